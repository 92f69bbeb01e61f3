"""How many OpenMP threads a kernel call gets: the cores other processes leave free.

A generated kernel splits each parallel loop into one block per thread
(``schedule(static)``) and its threads spin while they wait at a barrier.
When another process holds one of the cores, the thread that shares it
reaches every barrier a scheduler slice late while the others spin: on two
cores with one busy process, SGEMM lost 3x and 1 ms kernels up to 30x
(``benchmarks/bench_contention.py``; benchmarks/README.md, "What fixes it").
Running each call with as many threads as there are idle cores keeps the
quiet speed and bounds the loss to the one-thread time (1.6-2.1x there).

The idle cores are measured, not guessed from the load average (which
includes this process and lags by a minute): the machine's busy clock
ticks (``/proc/stat``) minus this process's own CPU time (``time.process_time``),
over the time since the last estimate, re-estimated at most every
:data:`WINDOW` seconds.  An average over the past alone mistakes a
neighbour that *was* busy for one that *is*: a numpy process whose
OpenBLAS threads worked and then went to sleep made every call of the
next 0.1 s run on one thread (conv2d 1x28x28x128: 1.45 ms instead of
0.84 ms on a quiet machine).  So the cores counted against us are also
bounded by the threads of other processes runnable right now
(``procs_running`` minus this process's threads in state R)::

    others  = min(round(others_busy_cores_lately), others_runnable_now)
    threads = clamp(cpus - others, 1, cpus)

The first call of a process has no window yet and counts ``others_runnable_now`` alone, settled:
a single read finds a shell, a kworker or the harness that started us as readily as a busy
neighbour, and then a short program's only kernel call runs on too few cores (in the C helper's
twin of this rule, PolyBench's syrk and syr2k, one parallel region each, ran 2x slower in one of
three runs on a quiet two-core machine).  A first read with no other thread runnable is taken as it is (the usual
case: no wait).  One with some is read again every :data:`SETTLE_GAP` seconds for
:data:`SETTLE_SPAN`, or :data:`SETTLE_SHARE` of the CPU time the process has used so far if that is
less (at most :data:`SETTLE_READS` reads in all, no sleep ending later than the span,
``procs_running`` from ``/proc/loadavg``; no more reads once two in a row saw nobody), and the call
counts only as many others as a majority of the reads and the last one saw::

    others = min(median(others_runnable_reads), others_runnable_reads[-1])

A transient has gone by the last read; a process spinning on a core is runnable at every read.  The
rule is the C helper's of ``polytile opt`` output (:mod:`polytile.codegen.c_threads`).

Pinned counts win: ``POLYTILE_NUM_THREADS`` (``config.num_threads``) is set
for every call; with ``OMP_NUM_THREADS`` in the environment (``config.omp_num_threads_set``),
OpenMP's own choice is left alone.  Where ``/proc/stat`` does not describe this
process's CPUs (no procfs, or a CPU affinity mask smaller than the
machine), nothing is changed.  The count is set with
``omp_set_num_threads`` for the call and restored after it, so other
OpenMP code in the process keeps its own setting.

>>> 1 <= ESTIMATOR.threads() <= ESTIMATOR.cpus
True
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, Optional, Tuple

from polytile.config import get_config
from polytile.runtime import openmp
from polytile.runtime.spread import before_call

#: Seconds between two estimates (shorter windows see single scheduler ticks as whole cores).
WINDOW = 0.1

#: The first call's reads of the threads runnable now, when the first finds others': at most this many
#: reads in all, :data:`SETTLE_GAP` seconds apart, none after a sleep that would end past
#: :data:`SETTLE_SPAN` seconds from the first (so at most about 2 ms of sleeping, and only then), none
#: after two in a row that saw nobody (a start-up transient: about 0.5 ms).
SETTLE_READS = 9
SETTLE_GAP = 0.00025
SETTLE_SPAN = 0.002
#: ... and none past this share of the CPU time the process has used so far: the wait is priced against
#: the program's work, which the time it took to get here (reading, initialising its data) stands for.
#: PolyBench's jacobi-1d (a 0.4 ms kernel right after a short start) ran 3x slower with the full 2 ms
#: wait; a kernel whose start took 40 ms or more gets the whole span.
SETTLE_SHARE = 0.05

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


Sample = Tuple[int, int, Optional[int]]


#: Open descriptors of the procfs files read at every estimate, by path (see :func:`_read_proc`).
_PROC_FDS: Dict[str, int] = {}
_PROC_LOCK = threading.Lock()


def _read_proc(path: str) -> Optional[bytes]:
    """The whole file at ``path`` as bytes, through a descriptor kept open across calls; None if unreadable.

    procfs regenerates a file's text at every read from offset 0, so ``pread`` on one descriptor sees
    the current counters (a path outside ``/proc/`` is opened at every read).  Opening and parsing
    ``/proc/stat`` as text cost ~0.29 ms on a core that had just woken from 0.2 s of idle (a kernel
    call after a pause) against ~0.08 ms for a ``pread``, on the 2-vCPU VM the benchmarks ran on;
    warm, both take a few microseconds.  The descriptor is close-on-exec (Python's default) and
    ``pread`` leaves its offset alone, so a fork may share it.

    >>> _read_proc("/proc/loadavg").count(b"/") >= 1
    True
    """
    keep = path.startswith("/proc/")  # another file may be replaced: its old descriptor would read stale text
    try:
        with _PROC_LOCK:
            fd = _PROC_FDS.get(path)
            if fd is None:
                fd = os.open(path, os.O_RDONLY)
                if keep:
                    _PROC_FDS[path] = fd
        chunks, offset = [], 0
        try:
            while True:
                chunk = os.pread(fd, 1 << 16, offset)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
                offset += len(chunk)
        finally:
            if not keep:
                os.close(fd)
    except OSError:
        with _PROC_LOCK:
            stale = _PROC_FDS.pop(path, None)
        if stale is not None:
            try:
                os.close(stale)
            except OSError:
                pass
        return None


def _machine_busy_ticks(path: str = "/proc/stat") -> Optional[Sample]:
    """(busy clock ticks of all CPUs since boot, number of CPUs, threads runnable now) from ``/proc/stat``.

    None if unreadable; the last item is None when the file has no ``procs_running`` line. Busy is
    everything but idle, iowait and steal (steal is time the hypervisor gave to other guests: not
    work of ours or of any process here).
    """
    text = _read_proc(path)
    if not text:
        return None
    lines = text.split(b"\n")
    first = lines[0].split()
    if not first or first[0] != b"cpu":
        return None
    cpus, running = 0, None
    try:
        for line in lines[1:]:
            if line.startswith(b"cpu") and line[3:4].isdigit():
                cpus += 1
            elif line.startswith(b"procs_running "):
                running = int(line.split()[1])
        v = [int(x) for x in first[1:9]] + [0] * max(0, 9 - len(first))
    except ValueError:
        return None
    return sum(v[:8]) - v[3] - v[4] - v[7], cpus, running


def _running_now(path: str = "/proc/loadavg") -> Optional[int]:
    """Threads runnable now machine-wide (``procs_running``, the caller included), from ``/proc/loadavg``.

    Its fourth field, "running/total", is the kernel count ``/proc/stat`` prints as ``procs_running``, in
    a file of a few bytes on any machine (``/proc/stat`` grows with the CPUs and interrupts). None if
    unreadable.
    """
    text = _read_proc(path)
    try:
        return int(text.split()[3].split(b"/")[0]) if text else None
    except (ValueError, IndexError):
        return None


def _own_runnable(task_dir: str = "/proc/self/task") -> int:
    """Threads of this process in state R (running or waiting for a core), the caller included.

    Our own OpenMP and OpenBLAS workers spin for a while after a call; they are ours, not a neighbour.
    """
    count = 0
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return 1
    for tid in tids:
        try:
            with open(f"{task_dir}/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        # "tid (comm) S ...": the state follows the last ')' (comm may hold spaces and parentheses).
        if stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] == b"R":
            count += 1
    return count


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class IdleCores:
    """The thread-count estimate (one per process: :data:`ESTIMATOR`).

    ``clock``, ``machine``, ``own``, ``own_runnable``, ``running`` and ``sleep`` are the sources and the
    wait (monotonic seconds; machine busy ticks, CPU count and runnable threads; this process's CPU
    seconds; this process's runnable threads; machine-wide runnable threads alone, for the first call's
    further reads; ``time.sleep``); tests pass their own.

    >>> est = IdleCores(clock=iter([0.0, 1.0]).__next__, machine=lambda: (0, 2, 1), own=lambda: 0.0,
    ...                 own_runnable=lambda: 1)
    >>> est.threads(), est.threads()      # nobody busy: both cores
    (2, 2)
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 machine: Callable[[], Optional[Sample]] = _machine_busy_ticks,
                 own: Callable[[], float] = time.process_time,
                 own_runnable: Callable[[], int] = _own_runnable,
                 running: Callable[[], Optional[int]] = _running_now,
                 sleep: Callable[[float], None] = time.sleep, cpus: Optional[int] = None,
                 tick: int = _TICK):
        self._clock, self._machine, self._own, self._tick = clock, machine, own, tick
        self._own_runnable, self._running, self._sleep = own_runnable, running, sleep
        self.cpus = cpus if cpus is not None else _usable_cpus()
        self._lock = threading.Lock()
        self._last: Optional[Tuple[float, int, float]] = None
        self._threads = self.cpus
        first = machine()
        #: Whether the machine's counters describe the CPUs this process may use.
        self.measurable = first is not None and first[1] == self.cpus

    def threads(self) -> int:
        """Threads for a call starting now: the CPUs minus the cores others kept busy lately."""
        if not self.measurable:
            return self.cpus
        with self._lock:
            now = self._clock()
            if self._last is not None and now - self._last[0] < WINDOW:
                return self._threads
            sample = self._machine()
            if sample is None:
                return self._threads
            busy, running, own = sample[0], sample[2], self._own()
            if self._last is not None:
                t0, busy0, own0 = self._last
                wall = now - t0
                lately = int(max(0.0, ((busy - busy0) / self._tick - (own - own0)) / wall) + 0.5)
                others = lately if running is None else min(lately, self._others_now(running))
                self._threads = max(1, min(self.cpus, self.cpus - others))
            elif running is not None:
                # No history yet (the process's first call): the other processes' threads runnable now.
                others = self._settled(self._others_runnable(running), own)
                self._threads = max(1, min(self.cpus, self.cpus - others))
            self._last = (now, busy, own)
            return self._threads

    def _others_runnable(self, running: int) -> int:
        """Other processes' threads among ``running`` runnable ones (the caller's read of procs_running).

        Only the caller runnable (the usual case): none, and ours are not read -- reading each of our
        threads' state costs ~0.2 ms on a core that has just woken from idle, as much again as the rest
        of the estimate (a 7 ms SGEMM call measured it).  The C helper's ``pt_others_runnable``."""
        return 0 if running <= 1 else max(0, running - max(1, self._own_runnable()))

    def _others_now(self, running: int) -> int:
        """:meth:`_others_runnable`, confirmed: a worker of ours that stopped spinning after the machine's
        read and before ours would pass for a neighbour, so a read after ours must still find as many."""
        others = self._others_runnable(running)
        if others:
            again = self._running()
            if again is not None:  # ours are running - others
                others = max(0, min(others, again - (running - others)))
        return others

    def _settled(self, first: int, own: float) -> int:
        """The first call's count of others' runnable threads, given the first read's and this process's
        CPU seconds so far (module docstring)."""
        if first <= 0:
            return 0
        seen, start = [first], self._clock()
        span = min(SETTLE_SPAN, SETTLE_SHARE * own)
        while (len(seen) < SETTLE_READS and seen[-2:] != [0, 0]
               and self._clock() - start + SETTLE_GAP <= span):
            self._sleep(SETTLE_GAP)
            running = self._running()
            if running is None:
                break
            seen.append(self._others_runnable(running))
        return min(sorted(seen)[(len(seen) - 1) // 2], seen[-1])


ESTIMATOR = IdleCores()


def _load_omp() -> Optional[Tuple[Callable[[int], None], Callable[[], int]]]:
    """``omp_set_num_threads`` and ``omp_get_max_threads`` of the OpenMP runtime kernels link: the libgomp
    :func:`polytile.runtime.openmp.load` loads, else LLVM's libomp."""
    found = openmp.load()
    lib = found[1] if found else None
    if lib is None:  # no libgomp: LLVM's runtime
        for name in ("libomp.so", "libomp.so.5"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            return None
    set_n, get_n = lib.omp_set_num_threads, lib.omp_get_max_threads
    set_n.argtypes, set_n.restype = [ctypes.c_int], None
    get_n.argtypes, get_n.restype = [], ctypes.c_int
    return set_n, get_n


_omp: Optional[Tuple[Callable[[int], None], Callable[[], int]]] = None
_omp_loaded = False


def _omp_functions():
    global _omp, _omp_loaded
    if not _omp_loaded:
        _omp = _load_omp()
        _omp_loaded = True
    return _omp


def call_threads() -> Optional[int]:
    """The thread count for a kernel call starting now, or None to leave OpenMP's own choice.

    >>> n = call_threads()
    >>> n is None or n >= 1
    True
    """
    cfg = get_config()
    if cfg.num_threads is not None:
        return cfg.num_threads
    if cfg.omp_num_threads_set:  # read once, as libgomp reads it (os.environ.get alone cost 0.5 us a call)
        return None
    if not ESTIMATOR.measurable:
        return None
    return ESTIMATOR.threads()


def enter_call() -> Tuple[Optional[int], int]:
    """Set up one kernel call: :func:`call_threads` OpenMP threads, and with two or more the team's
    workers off this thread's CPU (:mod:`polytile.runtime.spread`).  Returns what :func:`leave_call`
    restores; the two bracket the call (plain calls, not a context manager: the hot path of a small
    kernel, where a generator-based ``with`` alone cost ~1 us).

    >>> leave_call(enter_call())
    """
    n = call_threads()
    omp = _omp_functions() if n is not None else None
    if omp is None:
        return n, -1
    set_n, get_n = omp
    previous = get_n()
    if previous != n:
        set_n(n)
    try:
        before_call(n)
    except BaseException:
        if previous != n:
            set_n(previous)
        raise
    return n, previous


def leave_call(token: Tuple[Optional[int], int]) -> None:
    """Restore the thread count :func:`enter_call` changed (``token`` is its return)."""
    n, previous = token
    if previous >= 0 and previous != n:
        _omp[0](previous)  # type: ignore[index]  # omp_set_num_threads: enter_call loaded it


@contextmanager
def threads_for_call() -> Iterator[Optional[int]]:
    """Run the block (one kernel call) between :func:`enter_call` and :func:`leave_call`.

    >>> with threads_for_call() as n:
    ...     pass
    """
    token = enter_call()
    try:
        yield token[0]
    finally:
        leave_call(token)
