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
    # The zeroing is a vector loop: its 4 bytes an instance at VECTOR_RATE, at least a lane of a 32-byte vector.
    assert instance_share(_schedule(64, "x86-avx512"), "Z0") == 1 / 8


def _parallel_in_source(src: str, *shapes) -> bool:
    return "omp parallel" in polytile.compile(src).source(shapes=list(shapes), dtypes=["float32"] * len(shapes))


def test_a_vector_loop_instance_is_one_lane():
    from polytile.cost.parallel_work import vector_loop
    mv = polytile.schedule(MATMUL, dims=dict(M=70, K=412, N=1), hardware="host")
    assert vector_loop(mv, "S0") == (8, 8)  # k sums A[i, k] * B[k, 0] into C[i, 0]: 8 lanes, 8 bytes moving
    f64 = polytile.schedule(MATMUL, dims=dict(M=70, K=412, N=1), hardware="host", dtypes=["float64", "float64"])
    assert vector_loop(f64, "S0") == (4, 16)
    # Every trailing axis of one element is dropped, not only the last: B[k, 0, 0] of a 412 x 1 x 1 B.
    b3 = "function (A[M, K], B[K, 1, 1]) -> (C) { C[i : M] = +(A[i, k] * B[k, 0, 0]); }"
    assert vector_loop(polytile.schedule(b3, dims=dict(M=70, K=412), hardware="host"), "S0") == (8, 8)
    short = polytile.schedule(MATMUL, dims=dict(M=70, K=3, N=1), hardware="host")
    assert vector_loop(short, "S0") == (3, 8)  # at most the loop's points
    # A.T @ x: the sum runs down A's columns (a stride of M elements): scalar code.
    atx = "function (A[K, M], X[K]) -> (Y) { Y[i : M] = +(A[k, i] * X[k]); }"
    assert vector_loop(polytile.schedule(atx, dims=dict(M=70, K=412), hardware="host", parallel=False), "S0") is None
    # A call may run scalar; plain arithmetic does not.
    for body, found in (("E = exp(A);", None), ("E = A * A + 1;", (8, 8))):
        s = polytile.schedule(f"function (A[M, K]) -> (E) {{ {body} }}", dims=dict(M=70, K=412), hardware="host")
        assert [vector_loop(s, st.name) for st in s.scop.statements] == [found]


def test_a_small_matrix_vector_product_runs_serially_a_large_one_in_parallel():
    # 70 x 412 @ 412 x 1 (28840 instances, each a lane of a vector sum): 4.3 us in parallel, 3.2 serially.
    assert not _parallel_in_source(MATMUL, (70, 412), (412, 1))
    assert not _parallel_in_source(MATMUL, (1, 1893), (1893, 25))
    assert _parallel_in_source(MATMUL, (1024, 1024), (1024, 1))


def test_an_elementwise_loop_runs_in_parallel_from_some_tens_of_thousands_of_instances():
    # E = A * B + A moves 12 bytes an instance: 128 x 256 ran 4.7 us in parallel, 3.8 serially; 256 x 256 5.6, 7.9.
    src = "function (A[M, K], B[M, K]) -> (E) { E = A * B + A; }"
    assert not _parallel_in_source(src, (128, 256), (128, 256))
    assert _parallel_in_source(src, (256, 256), (256, 256))


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


def test_a_kernel_that_opens_a_region_anyway_keeps_its_small_vector_loops_parallel():
    # conv 1x28x28x128: the convolution's region wakes the team, so the 346 KB zeroing (86528 instances,
    # 10816 at the vector price) keeps its own cheap region (0.443 ms; 0.450 with it serial).
    conv = "function (I[N, H, W, C], F[KH, KW, C, CO]) -> (O) { " \
           "O[n, y, x, co : N, H - KH + 1, W - KW + 1, CO] = +(I[n, y + ky, x + kx, c] * F[ky, kx, c, co]); }"
    s = polytile.schedule(conv, dims=dict(N=1, H=28, W=28, C=128, KH=3, KW=3, CO=128), hardware="host",
                          min_parallel_work=None)
    assert any(st == "Z0" for st, _ in _parallel(s)) and any(st == "S0" for st, _ in _parallel(s))
    # Alone, the same zeroing is a vector loop too small for a region.
    fill = polytile.schedule("function (A[M, N]) -> (E) { E = A * 0; }", dims=dict(M=676, N=128),
                             hardware="host", min_parallel_work=None)
    assert not _parallel(fill)
