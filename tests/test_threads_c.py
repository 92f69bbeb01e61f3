"""The first parallel region's thread count in ``polytile opt`` output (codegen.c_threads.pt_threads):
a neighbour runnable at one instant is not a busy one, a process spinning on a core is."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polytile.codegen.c_threads import THREADS_PRELUDE

GCC = shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(GCC is None, reason="no C compiler")

#: One call, as a program whose only parallel region asks for its count (syrk, syr2k), after 50 ms of
#: work (initialising its data): the first call's wait is bounded by 5% of the CPU time used so far, and of
#: the region's estimated seconds when argv[1] gives them.
MAIN = """
int main(int argc, char **argv)
{
  volatile double x = 0.0;
  while (pt_seconds(CLOCK_PROCESS_CPUTIME_ID) < 0.05)
    x += 1.0;
  if (argc > 1) /* the region's estimated seconds, as polytile opt's regions state them */
    pt_threads_expect(atof(argv[1]));
  printf("%d\\n", pt_threads());
  return 0;
}
"""


def build(tmp_path: Path, proc: str = "", main: str = MAIN, name: str = "first") -> Path:
    """``main`` after the helper, built like ``polytile opt`` output is checked (-Wall -Wextra -Werror),
    against the fake procfs ``proc`` when given."""
    src, exe = tmp_path / f"{name}.c", tmp_path / (f"{name}_fake" if proc else name)
    src.write_text(THREADS_PRELUDE + main)
    flags = [f'-DPT_PROC="{proc}"'] if proc else []
    subprocess.run([GCC, "-O2", "-Wall", "-Wextra", "-Werror", "-fopenmp", *flags, str(src), "-o", str(exe)],
                   check=True)
    return exe


def first_count(exe: Path, **env: str) -> int:
    base = {k: v for k, v in os.environ.items() if k not in ("POLYTILE_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([str(exe)], env={**base, **env}, capture_output=True, text=True, check=True, timeout=60)
    return int(out.stdout)


class FakeProc:
    """A procfs of four CPUs whose runnable threads a test sets: /proc/stat's procs_running (the first
    read), /proc/loadavg's (the further reads) and this process's threads in state R."""

    def __init__(self, root: Path):
        self.root = root
        (root / "self" / "task").mkdir(parents=True)

    def set(self, first: int, later, own: int = 1) -> None:
        cpus = "".join(f"cpu{i} 5 0 2 50 3 1 1 2 0 0\n" for i in range(4))
        (self.root / "stat").write_text(f"cpu  20 0 8 200 12 4 4 8 0 0\n{cpus}intr 1 2\nprocs_running {first}\n")
        if later is None:
            (self.root / "loadavg").unlink(missing_ok=True)
        else:
            (self.root / "loadavg").write_text(f"0.10 0.20 0.30 {later}/100 4242\n")
        task = self.root / "self" / "task"
        for d in task.iterdir():
            shutil.rmtree(d)
        for tid in range(own + 1):
            (task / str(100 + tid)).mkdir()
            (task / str(100 + tid) / "stat").write_text(f"{100 + tid} (first) {'R' if tid < own else 'S'} 1 1\n")


def test_the_first_region_settles_the_runnable_count_of_a_fake_proc(tmp_path):
    fake = FakeProc(tmp_path / "proc")
    exe = build(tmp_path, str(fake.root))

    def count(first, later, own=1):
        fake.set(first, later, own)
        return first_count(exe, OMP_NUM_THREADS="8")  # the cap above the fake's four CPUs

    assert count(1, 1) == 4  # nobody else
    assert count(2, 1) == 4  # runnable at the first read only: a transient
    assert count(2, 2) == 3  # runnable at every read: a busy neighbour
    assert count(4, 4) == 1  # three of them
    assert count(3, 3, own=2) == 3  # one of the two others is our own
    assert count(3, 2, own=2) == 4
    assert count(2, None) == 3  # no /proc/loadavg: the first read stands
    assert first_count(exe, OMP_NUM_THREADS="2") == 2  # the cap still applies
    fake.set(1, 1)
    assert first_count(exe, OMP_NUM_THREADS="8", POLYTILE_NUM_THREADS="6") == 6  # a pin wins
    (fake.root / "stat").unlink()
    assert first_count(exe, OMP_NUM_THREADS="8") == 8  # no /proc: omp_get_max_threads()


def _ticks(pid="self"):
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _busy_ticks() -> int:
    """The machine's busy clock ticks since boot (user + nice + system + irq + softirq)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4] - v[7]


@pytest.fixture
def real_machine(tmp_path):
    if not os.path.exists("/proc/stat") or not os.path.exists("/proc/loadavg"):
        pytest.skip("no procfs")
    cpus = os.cpu_count() or 1
    if cpus < 2 or len(os.sched_getaffinity(0)) != cpus:
        pytest.skip("needs two CPUs or more, all of them usable")
    return build(tmp_path), cpus


def test_a_spinning_process_costs_the_first_region_a_thread(real_machine):
    exe, cpus = real_machine
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + 30
        while _ticks(spin.pid) < 5:  # in its loop: runnable at every read from now on
            assert time.monotonic() < deadline, "the spinning process never got going"
            time.sleep(0.02)
        counts = [first_count(exe) for _ in range(3)]
    finally:
        spin.kill()
        spin.wait()
    assert max(counts) <= cpus - 1, counts


def test_a_quiet_machine_gives_the_first_region_every_core(real_machine):
    exe, cpus = real_machine
    # Other processes come and go (this test's own harness among them); one run in five with every core
    # is what a busy neighbour would not allow. A machine someone else keeps busy proves nothing: skip.
    t0, busy0 = time.monotonic(), _busy_ticks()
    counts = [first_count(exe) for _ in range(5)]
    time.sleep(0.2)
    cores = (_busy_ticks() - busy0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
    if cpus not in counts and cores >= 0.3:  # the five short runs themselves use a few ms
        pytest.skip(f"the machine is busy: {cores:.2f} cores ({counts})")
    assert cpus in counts, (counts, cores)


#: Two regions' counts: the second (0.15 s later, when the test says so on stdin) takes the history path.
TWO_CALLS = """
int main(void)
{
  char line[8];
  printf("%d\\n", pt_threads());
  fflush(stdout);
  if (!fgets(line, sizeof line, stdin))
    return 1;
  printf("%d\\n", pt_threads());
  return 0;
}
"""


def test_a_later_region_confirms_the_neighbours_it_counts(tmp_path):
    # Between the machine's count (procs_running 4) and ours (2 of our threads in state R), one of our
    # workers stopped spinning: /proc/loadavg, read after ours, finds only 3 running.  Of the 2 "others"
    # only 1 is still there, so the region gets 3 of the fake's 4 CPUs, not 2.
    fake = FakeProc(tmp_path / "proc")
    exe = build(tmp_path, str(fake.root), TWO_CALLS, "two")
    base = {k: v for k, v in os.environ.items() if k not in ("POLYTILE_NUM_THREADS", "OMP_NUM_THREADS")}

    def second_count(later: int) -> int:
        fake.set(1, 1)  # the first region: nobody else
        proc = subprocess.Popen([str(exe)], env={**base, "OMP_NUM_THREADS": "8"}, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "4"
            fake.set(4, later, own=2)
            # Others kept the cores busy since the first region: 1000 ticks more of user time.
            stat = fake.root / "stat"
            stat.write_text(stat.read_text().replace("cpu  20 ", "cpu  1020 ", 1))
            time.sleep(0.15)  # past the 0.1 s the count is kept for
            out, _ = proc.communicate("go\n", timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        return int(out)

    assert second_count(later=3) == 3  # one of the two 'others' was our own worker
    assert second_count(later=4) == 2  # both still there: two neighbours


def test_a_short_region_does_not_wait_for_a_neighbour_to_go(tmp_path):
    # A neighbour runnable at the first read only (a transient): the first region of a program that used
    # 50 ms of CPU settles it away (2 ms of reads, 4 CPUs); one that expects to run 1 ms waits at most 5%
    # of that (50 us: no second read) and counts it; one that expects 1 s settles as before.
    fake = FakeProc(tmp_path / "proc")
    exe = build(tmp_path, str(fake.root))
    base = {k: v for k, v in os.environ.items() if k not in ("POLYTILE_NUM_THREADS", "OMP_NUM_THREADS")}

    def count(*argv: str) -> int:
        fake.set(2, 1)
        out = subprocess.run([str(exe), *argv], env={**base, "OMP_NUM_THREADS": "8"}, capture_output=True,
                             text=True, check=True, timeout=60)
        return int(out.stdout)

    assert count() == 4
    assert count("1e-3") == 3
    assert count("1.0") == 4
    # Without OpenMP the hint is a no-op that still compiles cleanly.
    plain = tmp_path / "plain.c"
    plain.write_text(THREADS_PRELUDE + "int main(void) { pt_threads_expect(1e-3 * 2.0); return 0; }\n")
    subprocess.run([GCC, "-O2", "-Wall", "-Wextra", "-Werror", str(plain), "-o", str(tmp_path / "plain")],
                   check=True)
