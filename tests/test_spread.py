"""polytile.runtime.spread: before a kernel call, a worker sharing the caller's CPU moves off it.

A worker is forced onto the caller's CPU (a probe library built with -fopenmp, on the libgomp the
kernels use); after ``spread`` found the caller there, the worker's mask no longer holds that CPU
(masks, unlike the CPUs threads run on, do not change under a busy machine's migrations), and the
caller's own affinity is untouched.  Run in a subprocess:
the test moves OpenMP threads of its own process.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GCC = shutil.which("gcc") or shutil.which("cc")
pytestmark = [pytest.mark.skipif(GCC is None, reason="no C compiler"),
              pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                                 reason="needs two CPUs this process may run on")]

PROBE = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <omp.h>
/* Worker threads pin themselves to the caller's CPU: the collision spread() must undo. */
void collide(int threads)
{
  int m = sched_getcpu();
  #pragma omp parallel num_threads(threads)
  if (omp_get_thread_num() != 0) {
    cpu_set_t one; CPU_ZERO(&one); CPU_SET(m, &one);
    sched_setaffinity(0, sizeof one, &one);
  }
}
/* Each thread's CPU, and whether its mask holds CPU `cpu`. */
void where(int threads, int *cpus, int *has, int cpu)
{
  #pragma omp parallel num_threads(threads)
  {
    cpu_set_t s; sched_getaffinity(0, sizeof s, &s);
    cpus[omp_get_thread_num()] = sched_getcpu();
    has[omp_get_thread_num()] = CPU_ISSET(cpu, &s);
  }
}
"""

SCRIPT = r"""
import ctypes, os, sys
from polytile.runtime.spread import caller_cpu_spread
lib = ctypes.CDLL(sys.argv[1])
cpus, has = (ctypes.c_int * 2)(), (ctypes.c_int * 2)()
mask = os.sched_getaffinity(0)
for attempt in range(50):
    lib.collide(2)  # the worker may now run on the caller's CPU m only
    lib.where(2, cpus, has, 0)
    m = cpus[1]
    at = caller_cpu_spread(2)
    if at == m:  # the caller was on m when the region started: the worker had to move
        break
else:
    print("no collision")  # the caller kept migrating away: nothing to test
    sys.exit(0)
lib.where(2, cpus, has, m)
print("collided", m, "worker has m", has[1], "caller mask kept", os.sched_getaffinity(0) == mask)
"""


def test_a_worker_on_the_callers_cpu_moves_off_it(tmp_path: Path):
    src, lib = tmp_path / "probe.c", tmp_path / "libprobe.so"
    src.write_text(PROBE)
    subprocess.run([GCC, "-O2", "-fopenmp", "-fPIC", "-shared", str(src), "-o", str(lib)], check=True)
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")}
    out = subprocess.run([sys.executable, str(script), str(lib)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    if words[:2] == ["no", "collision"]:
        pytest.skip("the caller never stayed on the worker's CPU")
    worker_has_m, kept = int(words[5]), words[9]
    assert not worker_has_m  # the worker left the caller's CPU and may not come back
    assert kept == "True"  # the caller's own affinity is never touched


NO_COLLISION = r"""
import ctypes, sys
from polytile.runtime.spread import caller_cpu_spread, use_library
lib = ctypes.CDLL(sys.argv[1])
if sys.argv[2] == "c":
    assert use_library(lib)  # the kernels' C region (codegen.c_threads.SPREAD_FUNCTION), not the LLVM twin
cpus, has = (ctypes.c_int * 4)(), (ctypes.c_int * 4)()
at = caller_cpu_spread(4)
lib.where(4, cpus, has, at)
print(at, *has[1:4])
"""


@pytest.mark.parametrize("region", ["c", "llvm"])
def test_every_worker_leaves_the_callers_cpu_out_of_its_mask(tmp_path: Path, region):
    # Not only a worker found on the caller's CPU: one elsewhere could be woken onto it later, and the
    # call path skips the region while the caller stays put (before_call).
    from polytile.codegen.c_threads import GNU_SOURCE, SPREAD_FUNCTION
    src, lib = tmp_path / "probe.c", tmp_path / "libprobe.so"
    src.write_text(GNU_SOURCE + PROBE + (SPREAD_FUNCTION if region == "c" else ""))
    subprocess.run([GCC, "-O2", "-fopenmp", "-fPIC", "-shared", str(src), "-o", str(lib)], check=True)
    script = tmp_path / "run.py"
    script.write_text(NO_COLLISION)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")}
    out = subprocess.run([sys.executable, str(script), str(lib), region], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    at, *has = [int(w) for w in out.stdout.split()]
    assert at >= 0
    assert has == [0, 0, 0]  # no worker may run on the CPU the caller was on


def test_the_call_path_spreads_again_only_when_the_caller_moved_or_the_team_changed(monkeypatch):
    import threading

    from polytile.runtime import spread as S
    cpu, runs = [3], []

    def fake_spread(threads):
        runs.append((cpu[0], threads))
        return cpu[0]

    monkeypatch.setattr(S, "_calls", 1)  # past the process's first parallel call
    monkeypatch.setattr(S, "_last", threading.local())
    monkeypatch.setattr(S, "_current_cpu", lambda: cpu[0])
    monkeypatch.setattr(S, "caller_cpu_spread", fake_spread)
    assert S.before_call(2) and S.before_call(2) and S.before_call(2)
    assert runs == [(3, 2)]  # the workers already avoid CPU 3
    cpu[0] = 5
    S.before_call(2)
    S.before_call(2)
    assert runs == [(3, 2), (5, 2)]  # the caller moved
    S.before_call(3)
    assert runs[-1] == (5, 3)  # a bigger team has new workers
    S.before_call(1)
    assert len(runs) == 3  # one thread: no team

    other = []
    t = threading.Thread(target=lambda: other.append(S.before_call(3)))
    t.start()
    t.join()
    assert runs[-1] == (5, 3) and len(runs) == 4  # another thread's calls have a team of their own


def test_nothing_runs_for_one_thread_or_bound_threads(tmp_path: Path):
    from polytile.runtime.spread import spread
    assert spread(1) is False and spread(0) is False
    # With OMP_PROC_BIND the OpenMP runtime places threads itself: spread leaves them alone.
    script = tmp_path / "bound.py"
    script.write_text("from polytile.runtime.spread import spread\nprint(spread(2))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_PROC_BIND": "true"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_call_path_skips_the_first_call_and_spreads_from_the_second(tmp_path):
    # The first parallel call's workers are new threads (placed on idle CPUs); compiling the region then
    # would put ~50 ms on a one-call script.  From the second call on it runs.
    script = tmp_path / "calls.py"
    script.write_text("from polytile.runtime.spread import before_call\n"
                      "print(before_call(2), before_call(2), before_call(1))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "False"]


def test_c_kernels_bring_the_region_so_llvm_is_never_started(tmp_path):
    """Every C kernel library exports pt_spread (codegen.c_threads.SPREAD_FUNCTION): the runtime takes it from the
    first kernel it loads, so a process's second call does not import llvmlite and start LLVM (~90 ms).
    (Once per CPU model and cache directory, loading libgomp measures the cost of ``pause`` with LLVM:
    ``runtime.openmp.pause_seconds``; measured here first, as any earlier process would have.)"""
    from polytile.runtime import openmp

    openmp.pause_seconds()
    script = tmp_path / "two_calls.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import polytile
        from polytile.runtime import spread
        k = polytile.compile("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }")
        A = np.ones((96, 80), np.float32)
        k(A, A.T.copy()); k(A, A.T.copy())
        print(spread._native is not None, spread._fn is None, "llvmlite.binding" in sys.modules)
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY",
                                                            "OMP_NUM_THREADS", "POLYTILE_NUM_THREADS")}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "False"]


def test_a_program_called_spread_keeps_its_entry_apart(tmp_path):
    """A kernel with a parallel region defines pt_spread, and the name is reserved in every kernel (the
    runtime takes that symbol from any kernel library): a program called spread gets another entry."""
    import numpy as np
    import polytile

    path = tmp_path / "spread.tile"
    path.write_text("function (A[N]) -> (B) { B = A * 2; }\n")
    A = np.arange(8, dtype=np.float32)
    k = polytile.compile(str(path), min_parallel_work=0)  # keep the (tiny) parallel loop
    np.testing.assert_array_equal(k(A), A * 2)
    assert "int pt_spread_kernel(" in k.source(A) and "int pt_spread(int threads)" in k.source(A)
    serial = polytile.compile(str(path), parallel=False)
    np.testing.assert_array_equal(serial(A), A * 2)
    assert "int pt_spread_kernel(" in serial.source(A) and "pt_spread(" not in serial.source(A).replace(
        "pt_spread_kernel(", "")
