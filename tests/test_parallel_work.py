"""cost.parallel_work: the work of one execution of a parallel loop, against its parallel region's cost."""
from __future__ import annotations

import polytile
from polytile.cost.parallel_work import drop_small_parallel, instance_share, min_parallel_work, work_per_entry
from polytile.scheduling import PARALLEL

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"


def _parallel(s):
    return sorted((st, loop) for st, loop, kind, _ in s.marks if kind == PARALLEL)


def _schedule(n, hardware):
    return polytile.schedule(MATMUL, dims=dict(M=n, N=n, K=n), hardware=hardware, min_parallel_work=0)


def test_a_tiled_loop_counts_each_instance_once():
    # The box over the tile and point loops alone would count 2^21 for a 32^3 matmul blocked by rows and
    # columns; the domain bounds it by its 2^15 instances.
    s = _schedule(32, "x86-avx512")
    (stmt, loop), = [p for p in _parallel(s) if p[0] == "S0"]
    assert work_per_entry(s, stmt, s.loop_dim(stmt, loop)) == 32 ** 3


def test_a_register_block_instance_is_one_lane_of_an_fma():
    assert instance_share(_schedule(64, "x86-avx512"), "S0") == 1 / 32
    assert instance_share(_schedule(64, "x86-avx2"), "S0") == 1 / 16
    assert instance_share(_schedule(64, "x86-avx512"), "Z0") == 1.0  # the zeroing is a plain loop


def test_small_register_blocked_nests_run_serially_large_ones_in_parallel():
    need = min_parallel_work(2)
    notes = []
    small = drop_small_parallel(_schedule(48, "x86-avx512"), notes, need=need)
    assert ("S0", "i_t") not in _parallel(small) and any("i_t of S0 left sequential" in n for n in notes)
    large = drop_small_parallel(_schedule(128, "x86-avx512"), [], need=need)
    assert any(st == "S0" for st, _ in _parallel(large))


def test_the_serial_small_kernel_computes_the_same():
    import numpy as np
    rng = np.random.default_rng(0)
    for n in (1, 7, 33, 48):
        A = rng.integers(-4, 5, (n, n + 1)).astype(np.float32)
        B = rng.integers(-4, 5, (n + 1, n)).astype(np.float32)
        np.testing.assert_array_equal(polytile.compile(MATMUL)(A, B), A @ B)
