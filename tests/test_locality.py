"""The locality steps of the default schedule (polytile.scheduling.locality).  vector_inner: a reduction
the register tiles left, whose innermost loop is a reduction loop, gets the output loop that is
unit-stride in every access innermost -- the vector loop -- and nothing else moves.  tile_transposes: a
copy that writes along one loop and reads along another runs by square tiles."""
from __future__ import annotations

import numpy as np
import pytest

import polytile
from polytile import scheduling as S
from polytile.scheduling.saved import replay


def _default(program, dims, hardware="x86-avx512"):
    return polytile.schedule(program, dims=dims, hardware=hardware)


def test_pooling_gets_its_channel_loop_innermost():
    s = _default("examples/maxpool.tile", "N=2,H=8,W=10,C=19")
    assert s.loop_names("S0") == ["n", "y", "x", "i", "j", "c"]
    assert "vector_inner" in [st.op for st in s.steps]
    # a recorded step: the schedule replays from its steps (as from its JSON)
    again = replay(s.scop, s.deps, s.steps)
    assert again.loop_names("S0") == s.loop_names("S0")


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8"])
def test_reordered_pooling_matches_the_oracle(dtype, target):
    rng = np.random.default_rng(3)
    I = rng.integers(-9, 10, (2, 8, 10, 19)).astype(dtype)
    if dtype.startswith("float"):
        I[0, 3, 4, 5] = np.nan  # max keeps a NaN, as numpy's maximum does
    k = polytile.compile("examples/maxpool.tile", target=target)
    np.testing.assert_array_equal(k(I), polytile.reference("examples/maxpool.tile", I))


def test_loops_that_would_not_vectorise_stay_and_parallel_ones_keep_their_region():
    # row sum: its output loop strides the rows, so the sum stays innermost (in SIMD lanes instead)
    s = _default("examples/row_sum.tile", "M=64,N=40")
    assert s.loop_names(s.resolve("O"))[-1] == "j"
    # a running max (cumsum's triangle; a max is not carried from cell to cell, poly.scan): the output loop
    # is the parallel one; moved inside the reduction whole it would fork per step, so its chunks stay
    # outside in parallel (one region) and its points go innermost
    s = _default("function (I[N]) -> (O) { O[i : N] = >(I[k]), i - k < N; }", "N=41")
    assert s.loop_names("S0") == ["i_t", "k", "i"] and ("S0", "i_t", S.PARALLEL, False) in s.marks
    assert not any(m[1] == "i" and m[2] == S.PARALLEL for m in s.marks)
    # a column min: the same, its columns innermost and unit-stride (it strided the rows before)
    s = _default("examples/min_reduce.tile", "M=40,N=64")
    assert s.loop_names("S0") == ["J_t", "i", "J"] and ("S0", "J_t", S.PARALLEL, False) in s.marks
    # a register-tiled contraction keeps its blocked order
    s = _default("examples/matmul.tile", "M=64,N=64,K=64")
    assert "vector_inner" not in [st.op for st in s.steps] or s.loop_names("S0")[-1] == "j"


VECMAT = "function (X[M], A[M, N]) -> (Y) { Y[j : N] = +(X[i] * A[i, j]); }"


def test_a_small_output_reduced_over_many_rows_runs_its_rows_in_parallel():
    # x @ A with 4096 x 4096: each thread streams its rows into a private Y (16 KiB), instead of
    # 1 KiB column chunks 16 KiB apart
    s = _default(VECMAT, "M=4096,N=4096")
    assert s.loop_names("S0") == ["i", "j"] and ("S0", "i", S.PARALLEL, True) in s.marks
    # a big output (512 KiB) keeps the column chunks; so do too few rows to split
    s = _default(VECMAT, "M=64,N=131072")
    assert s.loop_names("S0") == ["j_t", "i", "j"] and ("S0", "j_t", S.PARALLEL, False) in s.marks
    s = _default("examples/min_reduce.tile", "M=100,N=64")
    assert s.loop_names("S0") == ["J_t", "i", "J"]
    # a column min over many rows: rows in parallel too, its NaN-keeping min combining the copies
    s = _default("examples/min_reduce.tile", "M=1000,N=64")
    assert s.loop_names("S0") == ["i", "J"] and ("S0", "i", S.PARALLEL, True) in s.marks


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("op", ["+", "*", "<", ">"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8"])
def test_rows_in_parallel_match_the_oracle(op, dtype, target):
    src = f"function (A[M, N]) -> (Y) {{ Y[j : N] = {op}(A[i, j]); }}"
    rng = np.random.default_rng(5)
    A = (rng.choice([-1, 1], (1000, 37)) if op == "*" else rng.integers(-3, 4, (1000, 37))).astype(dtype)
    if dtype.startswith("float"):
        A[3, 5] = A[999, 6] = np.nan  # a NaN in either thread's rows reaches the output (numpy's max/min)
    k = polytile.compile(src, target=target)
    spec = k.specialize_shapes([A.shape], [dtype], build=False)
    assert spec.schedule.loop_names("S0") == ["i", "j"]  # the rows in parallel
    np.testing.assert_array_equal(k(A), polytile.reference(src, A))


def test_a_user_schedule_is_not_reordered():
    # polytile.schedule without a descriptor is the program order users start transforming from
    s = polytile.schedule("examples/maxpool.tile", dims="N=2,H=8,W=10,C=19")
    assert s.loop_names("S0") == ["n", "y", "x", "c", "i", "j"]
    assert S.vector_inner(s).loop_names("S0") == ["n", "y", "x", "i", "j", "c"]


# -- tile_transposes ---------------------------------------------------------------------------------

PERMUTE3 = "function (I[A, B, C]) -> (O) { O[c, b, a : C, B, A] = =(I[a, b, c]); }"
ADD_T = "function (X[M, N], Y[N, M]) -> (Z) { T[i, j : M, N] = =(Y[j, i]); Z = X + T; }"


def test_a_transpose_runs_by_square_tiles():
    s = _default("examples/transpose.tile", "M=100,N=70")
    assert s.loop_names("S0") == ["j_t", "i_t", "j", "i"] and ("S0", "j_t", S.PARALLEL, False) in s.marks
    assert "tile_transposes" in [st.op for st in s.steps]
    assert replay(s.scop, s.deps, s.steps).loop_names("S0") == s.loop_names("S0")
    # float64 tiles are half as many elements wide (the same bytes per row)
    t = polytile.schedule("examples/transpose.tile", dims="M=100,N=70", hardware="x86-avx512", dtypes="float64")
    assert t.describe() != s.describe() and "[0, 4]" in t.describe()  # 70 / 16 -> j_t in [0, 4]


def test_copies_that_do_not_transpose_or_are_small_are_left_alone():
    # the inner loop is unit-stride in every access: nothing to tile
    s = _default("function (X[M, N]) -> (Y) { Y[i, j : M, N] = =(X[i, j]); }", "M=100,N=70")
    assert "tile_transposes" not in [st.op for st in s.steps]
    # shorter than two tiles along one loop
    s = _default("examples/transpose.tile", "M=100,N=40")
    assert "tile_transposes" not in [st.op for st in s.steps]
    # a user schedule stays in program order until it asks
    s = polytile.schedule("examples/transpose.tile", dims="M=100,N=70")
    assert s.loop_names("S0") == ["j", "i"]
    assert S.tile_transposes(s).loop_names("S0") == ["j_t", "i_t", "j", "i"]


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int64"])
@pytest.mark.parametrize("program, shapes", [
    ("examples/transpose.tile", [(100, 70)]),
    (PERMUTE3, [(67, 3, 91)]),
    (ADD_T, [(66, 97), (97, 66)]),
])
def test_tiled_transposes_match_the_oracle(program, shapes, dtype, target):
    """Partial tiles at both edges, a 3-D permutation, a transpose feeding an add; exact."""
    rng = np.random.default_rng(4)
    arrays = [rng.integers(-100, 100, s).astype(dtype) for s in shapes]
    k = polytile.compile(program, target=target, hardware="x86-avx512")
    np.testing.assert_array_equal(k(*arrays), polytile.reference(program, *arrays))
