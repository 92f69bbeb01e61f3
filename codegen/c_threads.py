"""The thread count of a parallel region in ``polytile opt`` output: the C twin of :mod:`polytile.runtime.threads`.

Generated C runs in the user's program, outside polytile's runtime, so the helper that gives each
``#pragma omp parallel for`` its ``num_threads(pt_threads())`` is emitted into the file (once, at its
top, guarded).  It follows the runtime's rule: at most ``omp_get_max_threads()`` (so ``OMP_NUM_THREADS``
caps it), fewer when other processes keep cores busy -- busy over the last 0.1 s (``/proc/stat`` minus
this process's CPU time) *and* runnable now (``procs_running`` minus this process's running threads,
confirmed by a read of ``/proc/loadavg`` after ours: a worker of ours that stopped spinning in between is
not a neighbour);
with no history yet (the first region of a short program), runnable now alone, settled: when the first
read finds other processes' threads runnable, it reads again every 0.25 ms for up to 2 ms, and at most 5%
of the CPU time the process used so far (PolyBench's 0.4 ms jacobi-1d ran 3x slower waiting 2 ms; until two
reads in a row see nobody) and counts only as many as a majority of the reads and the last one saw (a
shell, kworker or harness runnable at one instant had halved one-region kernels such as syrk for their
whole run; a spinning process is runnable at every read);
``POLYTILE_NUM_THREADS`` pins it; without ``/proc`` it is ``omp_get_max_threads()``.  Statically split
loops wait at every barrier for a thread that lost its core: beside one busy process on two cores,
PolyBench's atax ran 12x slower than gcc's serial code (benchmarks/README.md).

    >>> "static int pt_threads(void)" in THREADS_PRELUDE
    True
"""

#: Emitted at the top of an optimised file whose regions have parallel loops (``-fopenmp`` builds only).
THREADS_PRELUDE = r"""/* polytile: the thread count of each parallel region below (polytile.codegen.c_threads). */
#ifndef PT_THREADS_DEFINED
#define PT_THREADS_DEFINED
#ifdef _OPENMP
#include <dirent.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
/* Where procfs is (a test compiles the helper against a fake one). */
#ifndef PT_PROC
#define PT_PROC "/proc"
#endif
static double pt_seconds(clockid_t clock)
{
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int pt_own_running(void)
{
  DIR *d = opendir(PT_PROC "/self/task");
  struct dirent *e;
  int n = 0;
  if (!d)
    return 1;
  while ((e = readdir(d)) != NULL) {
    char path[sizeof PT_PROC + 48], buf[512];
    FILE *f;
    size_t k;
    char *p;
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, PT_PROC "/self/task/%.20s/stat", e->d_name);
    f = fopen(path, "r");
    if (!f)
      continue;
    k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    p = strrchr(buf, ')');
    if (p && p[1] == ' ' && p[2] == 'R')
      n++;
  }
  closedir(d);
  return n > 0 ? n : 1;
}
/* Threads of other processes runnable now: procs_running (the caller's read) minus ours in state R. */
static int pt_others_runnable(int running)
{
  int n;
  if (running <= 1)
    return 0; /* the caller itself is running */
  n = running - pt_own_running();
  return n > 0 ? n : 0;
}
/* procs_running again, from /proc/loadavg ("0.10 0.20 0.30 2/123 456"): the same kernel count as in
   /proc/stat, from a file of a few bytes on any machine (/proc/stat grows with CPUs and interrupts). */
static int pt_running_now(void)
{
  char buf[128];
  int running = -1;
  FILE *f = fopen(PT_PROC "/loadavg", "r");
  if (!f)
    return -1;
  if (!fgets(buf, sizeof buf, f) || sscanf(buf, "%*s %*s %*s %d/", &running) != 1)
    running = -1;
  fclose(f);
  return running;
}
/* pt_others_runnable, confirmed: a worker of ours that stopped spinning after the machine's read and before
   ours would pass for a neighbour, so a read of procs_running after ours must still find as many (ours then
   are running - others).  The runtime's ThreadEstimate._others_now. */
static int pt_others_now(int running)
{
  int others = pt_others_runnable(running), again;
  if (others > 0 && (again = pt_running_now()) >= 0) {
    int still = again - (running - others);
    if (still < others)
      others = still > 0 ? still : 0;
  }
  return others;
}
/* The first region's count of others' runnable threads, from the first read `first`.  None runnable: taken
   as it is.  Some: read again every 0.25 ms for 2 ms, or 5% of the process's CPU time so far or of the
   region's estimated time if less
   (at most PT_SETTLE_READS reads in all; no sleep that would end later; no more reads once two in a
   row saw nobody), and counted only as many as a majority
   of the reads and the last one saw (min(median, last)): a shell, kworker or harness runnable at one
   instant has gone by then; a process spinning on a core is runnable at every read. */
#define PT_SETTLE_READS 9
/* The estimated seconds of the region about to run its first parallel loop (pt_threads_expect; < 0: not
   known).  A wrong count costs at most about the region's time, so the settling waits at most 5% of it. */
static double pt_expect_s = -1.0;
static inline void pt_threads_expect(double seconds)
{
  pt_expect_s = seconds;
}
static int pt_others_settled(int first)
{
  int seen[PT_SETTLE_READS], sorted[PT_SETTLE_READS], n = 1, quiet = 0, i, j;
  double start, span;
  if (first <= 0)
    return 0;
  seen[0] = first;
  start = pt_seconds(CLOCK_MONOTONIC);
  /* The wait is priced against the program's work: at most 5% of the CPU time it used to get here, and of
     the region's own estimated time when the region said it (a 3 ms kernel waited 2 ms beside a busy process). */
  span = 0.05 * pt_seconds(CLOCK_PROCESS_CPUTIME_ID);
  if (pt_expect_s >= 0.0 && 0.05 * pt_expect_s < span)
    span = 0.05 * pt_expect_s;
  if (span > 0.002)
    span = 0.002;
  while (n < PT_SETTLE_READS && quiet < 2 &&
         pt_seconds(CLOCK_MONOTONIC) - start + 0.00025 <= span) {
    struct timespec gap = {0, 250000};
    int running;
    nanosleep(&gap, NULL);
    running = pt_running_now();
    if (running < 0)
      break;
    seen[n] = pt_others_runnable(running);
    quiet = seen[n] == 0 ? quiet + 1 : 0;
    n++;
  }
  for (i = 0; i < n; i++) { /* insertion sort of at most PT_SETTLE_READS counts */
    for (j = i; j > 0 && sorted[j - 1] > seen[i]; j--)
      sorted[j] = sorted[j - 1];
    sorted[j] = seen[i];
  }
  return sorted[(n - 1) / 2] < seen[n - 1] ? sorted[(n - 1) / 2] : seen[n - 1];
}
static int pt_threads(void)
{
  /* Every static of this helper has a non-zero initialiser, so it lives in .data, before .bss: a file
     whose own static arrays pass 2 GiB has .bss objects placed after them out of the small code
     model's reach ("relocation truncated to fit"), and the original file links. */
  static int mode = -1, last_n = 1;
  static double last_t = -1.0, last_busy = -1.0, last_own = -1.0;
  int max = omp_get_max_threads(), ncpu = 0, running = -1;
  double now, busy, own, tick;
  unsigned long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  char line[512];
  FILE *f;
  if (mode < 0) {
    const char *pin = getenv("POLYTILE_NUM_THREADS");
    mode = 1;
    if (pin && atoi(pin) > 0) {
      mode = 0;
      last_n = atoi(pin);
    }
  }
  if (mode == 0)
    return last_n;
  now = pt_seconds(CLOCK_MONOTONIC);
  if (last_t >= 0.0 && now - last_t < 0.1)
    return last_n < max ? last_n : max;
  f = fopen(PT_PROC "/stat", "r");
  if (!f || !fgets(line, sizeof line, f) ||
      sscanf(line, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
             &v[6], &v[7]) < 4) {
    if (f)
      fclose(f);
    mode = 0;
    last_n = max;
    return max;
  }
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "cpu", 3) == 0 && line[3] >= '0' && line[3] <= '9')
      ncpu++;
    else if (strncmp(line, "procs_running ", 14) == 0)
      running = atoi(line + 14);
  }
  fclose(f);
  /* busy = user + nice + system + irq + softirq (not idle, iowait or steal) */
  busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]);
  own = pt_seconds(CLOCK_PROCESS_CPUTIME_ID);
  tick = (double)sysconf(_SC_CLK_TCK);
  if (last_t >= 0.0 && ncpu > 0 && tick > 0) {
    double others = ((busy - last_busy) / tick - (own - last_own)) / (now - last_t);
    int lately = others > 0.0 ? (int)(others + 0.5) : 0;
    int busy_now = running >= 0 ? pt_others_now(running) : lately;
    int taken = lately < busy_now ? lately : busy_now;
    last_n = ncpu - (taken > 0 ? taken : 0);
    if (last_n < 1)
      last_n = 1;
  } else if (ncpu > 0 && running >= 0) {
    /* No history yet (a short program's first region): the threads of others runnable now, settled. */
    last_n = ncpu - pt_others_settled(pt_others_runnable(running));
    if (last_n < 1)
      last_n = 1;
  } else {
    last_n = max;
  }
  last_t = now;
  last_busy = busy;
  last_own = own;
  return last_n < max ? last_n : max;
}
#else
#define pt_threads_expect(seconds) ((void)0)
#endif
#endif
"""

#: The helper of :data:`THREADS_PRELUDE` a region calls with its estimated seconds (:func:`expect_call`).
EXPECT_FUNCTION = "pt_threads_expect"


def expect_call(seconds_expr: str) -> str:
    """The statement a region runs before its parallel loops: its estimated seconds, which bound how long
    the first region waits for a runnable neighbour to go away (a no-op without OpenMP).

    >>> expect_call("1e-3 * (double)(n)")
    'pt_threads_expect(1e-3 * (double)(n));'
    """
    return f"{EXPECT_FUNCTION}({seconds_expr});"


#: The clause every parallel loop of ``polytile opt`` output carries (with ``-fopenmp``).
THREADS_CLAUSE = " num_threads(pt_threads())"


def needs_threads_prelude(text: str) -> bool:
    """Whether region code calls a helper of :data:`THREADS_PRELUDE`: a parallel loop's thread count, or
    the expected seconds a region announces (which stays even where no parallel loop was emitted).

    >>> needs_threads_prelude("pt_threads_expect(0.5); { for (c0 = 0; ...) }"), needs_threads_prelude("{ }")
    (True, False)
    """
    return THREADS_CLAUSE in text or EXPECT_FUNCTION + "(" in text


#: First in a file that defines :data:`SPREAD_FUNCTION`: ``sched_getcpu`` and ``CPU_CLR`` need it
#: before every system header.
GNU_SOURCE = """#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
"""

#: ``pt_spread``, the runtime's spread region (:mod:`polytile.runtime.spread`) in C, exported by every
#: kernel library with a parallel region: the runtime takes it from the first one it loads instead of
#: JIT-compiling the region with LLVM, which cost a process's second kernel call ~90 ms (importing
#: llvmlite, initialising LLVM, the engine).  The LLVM IR twin in spread.py states the same steps.
SPREAD_FUNCTION = r"""
#if defined(_OPENMP) && defined(__linux__)
#include <omp.h>
#include <sched.h>
/* Run an empty region on `threads` threads; every worker narrows its own affinity to the caller's
   mask without the caller's CPU, so no later wake-up lands there while the caller stays on it.
   The caller's CPU, or -1 when nothing ran (bound threads). */
int pt_spread(int threads) {
  if (omp_get_proc_bind() != omp_proc_bind_false) return -1;
  const int cpu = sched_getcpu();
  cpu_set_t mask;
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof mask, &mask) != 0) return -1;
  #pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() != 0) {
      cpu_set_t mine = mask;
      CPU_CLR(cpu, &mine);
      if (CPU_COUNT(&mine) > 0) sched_setaffinity(0, sizeof mine, &mine);
    }
  }
  return cpu;
}
#endif
"""
