"""polytile.runtime.openmp: libgomp loaded once with a short spin, the environment left as it was.

After a kernel call returns, the team's workers must go to sleep within about a quarter of a
millisecond of spinning, not libgomp's default ~7 ms, which slowed the numpy call after it 1.8x.
What they spin is read as CPU time, from each thread's ``schedstat``; unlike wall time, it does not
grow when a busy machine takes the core away.  A user's ``GOMP_SPINCOUNT`` must still win.  These
run in subprocesses, because libgomp reads its settings once per process.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from polytile.runtime import openmp

TWO_CPUS = pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                              reason="needs two CPUs this process may run on")
SCHEDSTAT = pytest.mark.skipif(not os.path.exists(f"/proc/self/task/{os.getpid()}/schedstat"),
                               reason="no per-thread schedstat in procfs")


def test_the_spin_count_is_set_for_the_load_alone():
    env = {"HOME": "/x"}
    seen = openmp.with_spin_count(lambda: ("libgomp.so.1", dict(env)), env, lambda: 1234)
    assert seen == ("libgomp.so.1", {"HOME": "/x", "GOMP_SPINCOUNT": "1234"})
    assert env == {"HOME": "/x"}


def test_the_environment_is_restored_when_the_load_fails():
    env: dict = {}

    def fails():
        raise OSError("no such library")

    with pytest.raises(OSError):
        openmp.with_spin_count(fails, env, lambda: 1234)
    assert env == {}


@pytest.mark.parametrize("setting", [{"GOMP_SPINCOUNT": "5"}, {"OMP_WAIT_POLICY": "active"}])
def test_a_users_wait_policy_wins_and_nothing_is_measured(setting):
    env = dict(setting)

    def count():
        raise AssertionError("measured although the user chose")

    seen = openmp.with_spin_count(lambda: dict(env), env, count)
    assert seen == setting and env == setting


def test_the_count_is_the_spin_time_over_one_pause_within_bounds():
    low, high = openmp.SPIN_COUNT_RANGE
    assert openmp.spin_count(openmp.SPIN_SECONDS / 5000) == 5000
    assert openmp.spin_count(1e-3) == low          # an absurdly slow pause: libgomp's throttled count
    assert openmp.spin_count(1e-12) == high        # an absurdly fast one: never past libgomp's default
    assert openmp.spin_count(None) == openmp.spin_count(0.0) == openmp.FALLBACK_SPIN_COUNT


def test_the_cpu_is_named_by_its_first_processor(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
                    "model name\t: Intel(R) Xeon(R) Platinum 8480+\nstepping\t: 8\n\n"
                    "processor\t: 1\nvendor_id\t: Other\n")
    ident = openmp.cpu_identity(str(info))
    assert ident.endswith("|GenuineIntel|6|143|8|Intel(R) Xeon(R) Platinum 8480+")
    assert openmp.cpu_identity(str(tmp_path / "none")).count("|") == len(openmp.CPU_FIELDS)


def test_the_pause_is_measured_once_per_cpu_and_kept_in_the_cache(tmp_path, monkeypatch):
    from polytile import config

    calls = []
    monkeypatch.setattr(openmp, "measure_pause", lambda: calls.append(1) or 2.5e-8)
    with config.override(cache_dir=tmp_path / "cache"):
        assert openmp.pause_seconds() == 2.5e-8
        assert openmp.pause_seconds() == 2.5e-8
    assert len(calls) == 1
    assert len(list((tmp_path / "cache" / "openmp").glob("*.json"))) == 1


def test_an_unusable_cache_directory_still_gets_a_measurement(tmp_path, monkeypatch):
    from polytile import config

    monkeypatch.setattr(openmp, "measure_pause", lambda: 2.5e-8)
    foreign = tmp_path / "shared"
    foreign.mkdir()
    foreign.chmod(0o777)  # writable by others: refused as a cache root (runtime.cache.check_root)
    with config.override(cache_dir=foreign):
        assert openmp.pause_seconds() == 2.5e-8


def test_the_pause_loop_measures_something_plausible():
    t = openmp.measure_pause(loops=2000, repeats=3)
    assert t is None or 1e-10 < t < 1e-5


SPIN_SCRIPT = textwrap.dedent("""
    import os, sys, threading, time
    import numpy as np
    import polytile
    k = polytile.compile("function (A[M, N]) -> (Y) { Y[j : N] = +(A[i, j]); }", target=sys.argv[1])
    A = np.ones((1024, 512), np.float32)
    k(A)
    main = str(threading.get_native_id())

    def workers_cpu_ns():
        total = 0
        for tid in os.listdir("/proc/self/task"):
            if tid != main:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
        return total

    spun = []
    for _ in range(5):
        time.sleep(0.05)
        k(A)
        before = workers_cpu_ns()
        time.sleep(0.06)  # longer than any spin; the workers' CPU time in it is what they spun
        spun.append(workers_cpu_ns() - before)
    print(sorted(spun)[2], "GOMP_SPINCOUNT" in os.environ, len(os.listdir("/proc/self/task")))
""")


def _spin_ns(tmp_path, target: str, **extra: str):
    script = tmp_path / "spin.py"
    script.write_text(SPIN_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env.update(POLYTILE_NUM_THREADS="2", **extra)
    out = subprocess.run([sys.executable, str(script), target], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    ns, leaked, threads = out.stdout.split()
    assert int(threads) >= 2, "the kernel ran without a worker thread"
    return int(ns), leaked == "True"


@TWO_CPUS
@SCHEDSTAT
@pytest.mark.parametrize("target", ["openmp", "llvm"])
def test_workers_sleep_soon_after_a_call_and_a_users_spin_count_wins(tmp_path, target):
    ours, leaked = _spin_ns(tmp_path, target)
    assert not leaked, "GOMP_SPINCOUNT stayed in the environment after libgomp loaded"
    assert ours < 3_000_000, f"workers spun {ours / 1e6:.1f} ms of CPU after a call"
    # 100x the spins: the user's setting reached libgomp (and the measure above can see spinning).
    theirs, leaked = _spin_ns(tmp_path, target, GOMP_SPINCOUNT=str(100 * openmp.spin_count(openmp.pause_seconds())))
    assert leaked  # the user's own variable, untouched
    assert theirs > 10 * max(ours, 100_000), (ours, theirs)
