"""The thread count of each kernel call (polytile.runtime.threads): idle cores, pins, restore."""
from __future__ import annotations

import numpy as np
import pytest

from polytile import config, runtime
from polytile.runtime import threads as T

TICK = 100


class FakeMachine:
    """Clock, machine busy ticks and own CPU seconds that a test moves forward by hand."""

    def __init__(self, cpus: int = 4, stat_cpus: int = 4):
        # own: this process's CPU seconds, as after a start that read and initialised its data (the
        # first call's wait is bounded by a share of it).
        self.t, self.busy, self.own, self.cpus, self.stat_cpus = 0.0, 0, 1.0, cpus, stat_cpus
        # Threads runnable now, machine-wide and ours (None: a kernel without procs_running).
        self.running, self.mine = None, 1
        # The first call's further reads of the machine-wide runnable threads, in order (then `running`),
        # and the sleeps between them (each moves the clock on by `sleep_scale` times its length).
        self.later, self.sleeps, self.sleep_scale = [], [], 1.0

    def estimator(self) -> T.IdleCores:
        return T.IdleCores(clock=lambda: self.t, machine=lambda: (self.busy, self.stat_cpus, self.running),
                           own=lambda: self.own, own_runnable=lambda: self.mine, running=self._running_now,
                           sleep=self._sleep, cpus=self.cpus, tick=TICK)

    def _running_now(self):
        return self.later.pop(0) if self.later else self.running

    def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds * self.sleep_scale

    def run(self, seconds: float, others_cores: float, own_cores: float = 0.0) -> None:
        self.t += seconds
        self.own += own_cores * seconds
        self.busy += round((others_cores + own_cores) * seconds * TICK)


def test_threads_are_the_cores_others_leave_idle():
    m = FakeMachine(cpus=4)
    est = m.estimator()
    assert est.threads() == 4  # no history yet: every core
    for others, want in [(0.0, 4), (1.0, 3), (2.6, 1), (4.0, 1), (0.3, 4), (1.6, 2)]:
        m.run(0.5, others)
        assert est.threads() == want, (others, want)


def test_this_process_own_work_does_not_count_against_it():
    # Our own kernel kept all four cores busy: that is no reason to use fewer threads next time.
    m = FakeMachine(cpus=4)
    est = m.estimator()
    est.threads()
    m.run(1.0, others_cores=0.0, own_cores=4.0)
    assert est.threads() == 4
    m.run(1.0, others_cores=1.0, own_cores=3.0)
    assert est.threads() == 3


def test_estimates_are_reused_within_the_window():
    m = FakeMachine(cpus=2, stat_cpus=2)
    est = m.estimator()
    est.threads()
    m.run(0.5, others_cores=1.0)
    assert est.threads() == 1
    m.run(T.WINDOW / 2, others_cores=0.0)  # too short to measure again: the last estimate stands
    assert est.threads() == 1
    m.run(1.0, others_cores=0.0)
    assert est.threads() == 2


def test_a_neighbour_busy_lately_but_asleep_now_does_not_cost_threads():
    # The benchmark's numpy worker: its OpenBLAS threads kept both cores busy during the last window,
    # then went to sleep. Nothing of theirs is runnable now, so the call gets both cores.
    m = FakeMachine(cpus=2, stat_cpus=2)
    est = m.estimator()
    est.threads()
    m.running = 1  # the caller only
    m.run(0.3, others_cores=1.4)
    assert est.threads() == 2
    # A busy process: busy over the window and runnable now.
    m.running = 2
    m.run(0.3, others_cores=1.0)
    assert est.threads() == 1


def test_runnable_threads_of_our_own_are_not_a_neighbour():
    # Our OpenMP workers still spin from the last call (state R): they are ours.
    m = FakeMachine(cpus=2, stat_cpus=2)
    est = m.estimator()
    est.threads()
    m.running, m.mine = 3, 2
    m.run(0.3, others_cores=1.0)
    assert est.threads() == 1  # one neighbour thread runnable and busy lately
    m.running, m.mine = 2, 2
    m.run(0.3, others_cores=1.0)
    assert est.threads() == 2  # only ours are runnable now


def test_with_only_the_caller_runnable_our_threads_are_not_read():
    # Reading each of our threads' state is the dearest part of the estimate on a core just woken from
    # idle; with nobody but the caller runnable it cannot change the count.
    m = FakeMachine(cpus=2, stat_cpus=2)
    reads = []
    est = T.IdleCores(clock=lambda: m.t, machine=lambda: (m.busy, 2, m.running), own=lambda: m.own,
                      own_runnable=lambda: reads.append(1) or m.mine, running=m._running_now, cpus=2, tick=TICK)
    m.running = 1
    assert est.threads() == 2
    m.run(0.3, others_cores=1.0)
    assert est.threads() == 2 and reads == []
    m.running, m.mine = 2, 1
    m.run(0.3, others_cores=1.0)
    assert est.threads() == 1 and len(reads) == 1  # a neighbour: now ours are counted


def test_a_worker_of_ours_that_stops_between_the_reads_is_no_neighbour():
    # The machine's read saw our spinning worker; by the time ours were read it slept. The read of the
    # runnable threads after ours no longer sees it, so it does not pass for a neighbour.
    m = FakeMachine(cpus=2, stat_cpus=2)
    est = m.estimator()
    est.threads()
    m.running, m.mine, m.later = 2, 1, [1]
    m.run(0.3, others_cores=1.0)  # our own last call, counted as others' ticks by a coarse clock
    assert est.threads() == 2
    m.running, m.mine, m.later = 2, 1, [2]  # a neighbour runnable at both reads
    m.run(0.3, others_cores=1.0)
    assert est.threads() == 1


def test_the_first_call_counts_the_neighbours_runnable_now():
    m = FakeMachine(cpus=2, stat_cpus=2)
    m.running, m.mine = 2, 1  # one other thread runnable: a busy neighbour
    assert m.estimator().threads() == 1
    m.running, m.mine = 3, 2  # our own second thread is no neighbour
    assert m.estimator().threads() == 1
    m.running, m.mine = 1, 1
    assert m.estimator().threads() == 2
    m.running = None  # no procs_running: every core
    assert m.estimator().threads() == 2


def first_call(running, later=(), mine=1, cpus=2, sleep_scale=1.0):
    """The first call's thread count when the first read finds `running` threads runnable machine-wide and
    the further reads `later` (then `running` again), and the machine."""
    m = FakeMachine(cpus=cpus, stat_cpus=cpus)
    m.running, m.mine, m.later, m.sleep_scale = running, mine, list(later), sleep_scale
    return m.estimator().threads(), m


def test_the_first_call_on_a_quiet_machine_does_not_wait():
    n, m = first_call(running=1)
    assert n == 2 and m.sleeps == []
    n, m = first_call(running=2, mine=2)  # our own second thread
    assert n == 2 and m.sleeps == []


def test_a_neighbour_runnable_at_the_first_read_only_is_a_transient():
    # A shell, a kworker or the harness runnable at the instant of the first read: gone at the next.
    # It used to halve a one-region kernel (syrk, syr2k) for its whole run.
    n, m = first_call(running=2, later=[1] * 8)
    assert n == 2
    assert len(m.sleeps) == 2  # two reads in a row saw nobody: no need to read on
    # Runnable for the first few reads, gone at the end: still not a neighbour that keeps a core.
    n, m = first_call(running=2, later=[2, 2, 2, 1, 1, 1, 1, 1])
    assert n == 2 and len(m.sleeps) == 5
    assert first_call(running=2, later=[2, 2, 2, 2, 2, 2, 2, 1])[0] == 2  # gone by the last read
    # Coming and going, never two reads in a row: as the majority and the last read say.
    n, m = first_call(running=2, later=[1, 2, 1, 2, 1, 2, 1, 2], cpus=4)
    assert n == 3 and len(m.sleeps) == 8  # 2 ms of 0.25 ms sleeps
    assert first_call(running=2, later=[2, 1, 2, 1, 2, 1, 2, 1], cpus=4)[0] == 4


def test_a_neighbour_runnable_at_every_read_of_the_first_call_costs_a_thread():
    n, m = first_call(running=2)  # a process spinning on a core
    assert n == 1
    assert 2 <= len(m.sleeps) <= T.SETTLE_READS - 1 and sum(m.sleeps) <= T.SETTLE_SPAN + 1e-12
    # Runnable at most reads and at the last: a busy process that blocked for a moment is still busy.
    n, m = first_call(running=2, later=[2, 1, 2, 2, 1, 2, 2, 2])
    assert n == 1 and len(m.sleeps) >= 6  # single quiet reads do not stop the reading
    # Two neighbours, one of them leaving: one core is taken.
    assert first_call(running=3, later=[3, 2, 2, 2, 2, 2, 2, 2], cpus=4)[0] == 3
    # Our own threads are no neighbour at the further reads either.
    assert first_call(running=3, mine=2)[0] == 1
    assert first_call(running=3, later=[2] * 8, mine=2)[0] == 2


def test_the_first_call_waits_a_bounded_time():
    # Sleeps that overrun (a loaded machine wakes us late): no sleep starts that would end past the span.
    n, m = first_call(running=2, sleep_scale=3.0)
    assert n == 1 and len(m.sleeps) == 3  # woken at 0.75, 1.5 and 2.25 ms
    assert m.t <= T.SETTLE_SPAN + T.SETTLE_GAP * (3.0 - 1.0)  # at most the last sleep's overrun past the span
    # Without /proc/loadavg the first read stands (the rule before the further reads).
    m = FakeMachine(cpus=2, stat_cpus=2)
    m.running = 2
    est = m.estimator()
    est._running = lambda: None
    assert est.threads() == 1 and len(m.sleeps) == 1


def test_the_runnable_threads_are_read_from_loadavg(tmp_path):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.52 1.31 1.75 3/95 31228\n")
    assert T._running_now(str(loadavg)) == 3
    loadavg.write_text("garbage\n")
    assert T._running_now(str(loadavg)) is None
    assert T._running_now(str(tmp_path / "missing")) is None
    assert T._running_now() >= 1  # this very thread is running


def test_a_neighbour_runnable_now_but_idle_lately_does_not_cost_threads():
    # One runnable thread at the instant of the read says little (a process that just woke up);
    # the window's average must agree.
    m = FakeMachine(cpus=2, stat_cpus=2)
    est = m.estimator()
    est.threads()
    m.running = 2
    m.run(0.3, others_cores=0.1)
    assert est.threads() == 2


def test_counters_of_other_cpus_are_not_used():
    # /proc/stat describes 8 CPUs but this process may use 2 (an affinity mask): its numbers say
    # nothing about our two, so the count is left at every usable CPU.
    m = FakeMachine(cpus=2, stat_cpus=8)
    est = m.estimator()
    assert not est.measurable
    m.run(1.0, others_cores=6.0)
    assert est.threads() == 2


def test_an_unreadable_proc_stat_is_not_measurable(tmp_path):
    assert T._machine_busy_ticks(str(tmp_path / "missing")) is None
    est = T.IdleCores(machine=lambda: None, cpus=2)
    assert not est.measurable and est.threads() == 2


def test_proc_stat_is_read(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 1 5 100 7 2 3 4 0 0\ncpu0 5 0 2 50 3 1 1 2 0 0\ncpu1 5 1 3 50 4 1 2 2 0 0\n"
                    "intr 1 2 3\nprocs_running 3\nprocs_blocked 0\n")
    # busy = user + nice + system + irq + softirq = 10 + 1 + 5 + 2 + 3 (idle, iowait and steal left out)
    assert T._machine_busy_ticks(str(stat)) == (21, 2, 3)
    stat.write_text("cpu  10 1 5 100 7 2 3 4 0 0\ncpu0 5 0 2 50 3 1 1 2 0 0\n")
    assert T._machine_busy_ticks(str(stat)) == (21, 1, None)


def test_own_runnable_threads_are_read_from_procfs(tmp_path):
    for tid, stat in [(11, "11 (python3) R 1 2"), (12, "12 (a) b) c) S 1 2"), (13, "13 (x) R 0")]:
        (tmp_path / str(tid)).mkdir()
        (tmp_path / str(tid) / "stat").write_text(stat)
    assert T._own_runnable(str(tmp_path)) == 2
    assert T._own_runnable(str(tmp_path / "missing")) == 1
    assert T._own_runnable() >= 1  # this very thread is running (state R), whatever else is


def test_pins_win():
    with config.override(num_threads=3, omp_num_threads_set=False):
        assert T.call_threads() == 3
    with config.override(num_threads=3, omp_num_threads_set=True):
        assert T.call_threads() == 3  # POLYTILE_NUM_THREADS wins over OMP_NUM_THREADS
    with config.override(num_threads=None, omp_num_threads_set=True):
        assert T.call_threads() is None  # OpenMP reads it itself


def test_omp_num_threads_is_read_with_the_other_settings():
    assert config.Config.from_env({"OMP_NUM_THREADS": "1"}).omp_num_threads_set
    assert not config.Config.from_env({"OMP_NUM_THREADS": " "}).omp_num_threads_set  # empty counts as unset
    assert not config.Config.from_env({}).omp_num_threads_set


KERNEL = """
#include <omp.h>
int pt_threads_probe(void *a0) {
  int *out = (int *)a0;
  #pragma omp parallel
  {
    #pragma omp single
    out[0] = omp_get_num_threads();
  }
  out[1] = omp_get_max_threads();
  return 0;
}
"""


@pytest.fixture(scope="module")
def probe():
    path = runtime.build(KERNEL, name_hint="threads_probe")
    return runtime.load(path).function("pt_threads_probe", 1)


@pytest.mark.parametrize("pinned", [1, 2, 3])
def test_a_call_runs_with_the_count_and_restores_it_after(probe, pinned):
    omp = T._omp_functions()
    assert omp is not None, "the kernels' OpenMP runtime (libgomp) was not found"
    set_n, get_n = omp
    before = get_n()
    out = np.zeros(2, np.int32)
    with config.override(num_threads=pinned, omp_num_threads_set=False):
        probe(out)
    assert out[0] == pinned and out[1] == pinned
    assert get_n() == before  # the process's own setting is back


def test_an_unpinned_call_uses_the_estimate(probe, monkeypatch):
    m = FakeMachine(cpus=4, stat_cpus=4)
    est = m.estimator()
    monkeypatch.setattr(T, "ESTIMATOR", est)
    out = np.zeros(2, np.int32)
    with config.override(num_threads=None, omp_num_threads_set=False):
        est.threads()
        m.run(1.0, others_cores=3.0)
        probe(out)
        assert out[0] == 1
        m.run(1.0, others_cores=0.0)
        probe(out)
        assert out[0] == 4


def test_a_program_that_just_started_does_not_wait():
    # The wait is priced against the work so far (SETTLE_SHARE of the CPU time used): a program at its
    # very start takes the first read as it is, like a 0.4 ms kernel right after a short start must.
    m = FakeMachine(cpus=2, stat_cpus=2)
    m.own, m.running, m.later = 0.0, 2, [1, 1, 1]
    assert m.estimator().threads() == 1
    assert m.sleeps == []
    m2 = FakeMachine(cpus=2, stat_cpus=2)
    m2.own, m2.running, m2.later = 0.01, 2, [1, 1, 1]  # 10 ms of work: 0.5 ms of reads at most
    m2.estimator().threads()
    assert 1 <= len(m2.sleeps) <= 2


def test_procfs_files_are_read_through_one_descriptor_that_sees_fresh_text(tmp_path):
    import time
    first = T._read_proc("/proc/uptime")
    fd = T._PROC_FDS["/proc/uptime"]
    time.sleep(0.05)  # uptime counts hundredths of a second
    again = T._read_proc("/proc/uptime")
    assert T._PROC_FDS["/proc/uptime"] == fd and again != first
    assert float(again.split()[0]) > float(first.split()[0])
    # A file outside /proc is opened at every read: a replaced file's new text is what is read.
    f = tmp_path / "stat"
    f.write_text("one")
    assert T._read_proc(str(f)) == b"one"
    f.unlink()
    f.write_text("two")
    assert T._read_proc(str(f)) == b"two" and str(f) not in T._PROC_FDS
    assert T._read_proc(str(tmp_path / "missing")) is None
