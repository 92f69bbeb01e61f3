"""Schedule transformations keep results equal to the oracle.

Every transformation of :mod:`polytile.schedule` is applied where it is legal
to Tile examples (compiled with ``polytile.compile(path, schedule=s)`` and
compared with ``polytile.reference`` on integer-valued float64 inputs, so
results must be *equal*) and to Scops written in isl notation (built with
``pipeline.build_scop`` and compared with ``from_isl.execute``, the
instance-by-instance interpreter).  The isl-text stencils use a dyadic scale
(1/2) or none, so every value is exact and any reordering that respects the
dependences gives bit-identical results.

Also: isl's scheduler at every fusion choice on every example, the schedule
JSON round trip (byte-identical C), replay of steps on other shapes, and
``describe()``.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import re
from pathlib import Path

import numpy as np
import pytest

import polytile
from polytile import IllegalSchedule, pipeline
from polytile import scheduling as S
from polytile.poly.from_isl import execute, scop_from_isl

from numpy_programs import INEXACT, TOLERANCE, example_cases, example_paths, make_inputs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def path_of(name: str) -> Path:
    return EXAMPLES / f"{name}.tile"


def sched(name: str, dims: str, **kw) -> S.Schedule:
    """Program-order schedule of an example, no marks."""
    return polytile.schedule(path_of(name), dims=dims, parallel=False, **kw)


def ints_for(name: str, dims: str, rng, dtype=np.float64):
    prog = polytile.load_program(path_of(name))
    shapes = polytile.shapes_from_dims(prog, pipeline.parse_dims(dims))
    return [rng.integers(-4, 5, size=sh).astype(dtype) for sh in shapes]


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def assert_same(out, ref, inexact=False):
    out, ref = as_tuple(out), as_tuple(ref)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.shape == r.shape and o.dtype == r.dtype
        if inexact:
            np.testing.assert_allclose(o, r, **TOLERANCE)
        else:
            np.testing.assert_array_equal(o, r)


def run_checked(s: S.Schedule, name: str, dims: str, rng) -> str:
    """Compile ``name`` with schedule ``s``, run at ``dims``, compare with the oracle; return the C."""
    k = polytile.compile(path_of(name), schedule=s)
    ins = ints_for(name, dims, rng)
    assert_same(k(*ins), polytile.reference(path_of(name), *ins), inexact=name in INEXACT)
    return k.source(*ins)


def c_params(name: str, s: S.Schedule, dims: str, rng):
    """Names of the arrays passed to the generated function."""
    k = polytile.compile(path_of(name), schedule=s)
    return [p.name for p in k.specialize(*ints_for(name, dims, rng)).source.params]


def function_body(src: str) -> str:
    """The generated functions (parallel loop bodies are outlined into ``pt_par*`` helpers)."""
    start = src.index("static __attribute__((noinline)) void pt_par") if "void pt_par" in src else src.index("int pt_")
    return src[start:]


MM = "M=13,N=9,K=7"  # matmul sizes that no tile size below divides


# ---------------------------------------------------------------------------
# loop order
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("a,b", [("i", "j"), ("j", "k"), ("i", "k")])
def test_interchange_matmul(a, b, rng):
    s = S.interchange(sched("matmul", MM), "C", a, b)
    names = s.loop_names("S0")
    assert names.index(a) > names.index(b)
    run_checked(s, "matmul", MM, rng)


def test_interchange_transpose_and_conv(rng):
    run_checked(S.interchange(sched("transpose", "M=5,N=7"), "O", "j", "i"), "transpose", "M=5,N=7", rng)
    dims = "N=2,H=6,W=5,CI=2,KH=2,KW=3,CO=3"
    s = S.interchange(sched("conv2d", dims), "O", "y", "ci")
    assert s.loop_names("S0")[1] == "ci"
    run_checked(s, "conv2d", dims, rng)


@pytest.mark.parametrize("order", [["k", "i", "j"], ["j", "k", "i"], ["k", "j", "i"]])
def test_reorder_matmul(order, rng):
    s = S.reorder(sched("matmul", MM), "C", order)
    assert s.loop_names("S0") == order
    run_checked(s, "matmul", MM, rng)


def test_reorder_subset_batched_matmul(rng):
    dims = "NB=3,M=4,N=5,K=6"
    s = S.reorder(sched("batched_matmul", dims), "Z", ["k", "i"])  # b, i, j, k -> b, k, j, i
    assert s.loop_names("S0") == ["b", "k", "j", "i"]
    run_checked(s, "batched_matmul", dims, rng)


# ---------------------------------------------------------------------------
# tiling and strip-mining
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [
    {"i": 4, "j": 4},            # 13 and 9 are not multiples of 4
    {"i": 5, "j": 2, "k": 3},    # three loops, none divides
    {"i": 64, "j": 100},         # larger than the extents: one tile
    {"k": 1},                    # degenerate size 1
    {"i": 13, "j": 9, "k": 7},   # exactly the extents
])
def test_tile_one_level(sizes, rng):
    s = S.tile(sched("matmul", MM), "C", sizes)
    names = s.loop_names("S0")
    for loop in sizes:
        assert f"{loop}_t" in names and names.index(f"{loop}_t") < names.index(loop)
    run_checked(s, "matmul", MM, rng)


@pytest.mark.parametrize("sizes", [
    {"i": [8, 3], "j": [6, 4]},
    {"i": [5, 2], "k": [4, 3]},
    {"j": [100, 7]},
])
def test_tile_two_levels(sizes, rng):
    s = S.tile(sched("matmul", MM), "C", sizes)
    names = s.loop_names("S0")
    for loop in sizes:
        assert names.index(f"{loop}_t") < names.index(f"{loop}_t1") < names.index(loop)
    run_checked(s, "matmul", MM, rng)


def test_tile_keyword_form_and_method_chain(rng):
    a = S.tile(sched("matmul", MM), "C", i=4, j=3)
    b = sched("matmul", MM).tile("C", {"i": 4, "j": 3})
    assert a.time_map().is_equal(b.time_map())
    run_checked(a, "matmul", MM, rng)


@pytest.mark.parametrize("name,dims,stmt,sizes", [
    ("trmv", "N=11", "Y", {"i": 3, "k": 4}),                                 # triangular domain
    ("conv1d", "N=2,L=9,CI=3,KW=3,CO=5", "O", {"x": 4, "co": 2, "ci": 2}),
    ("stencil2d", "B=2,H=7,W=9", "O", {"i1": 4, "i2": 5}),
    ("row_max", "M=7,N=10", "O", {"i": 3, "j": 4}),
])
def test_tile_other_examples(name, dims, stmt, sizes, rng):
    run_checked(S.tile(sched(name, dims), stmt, sizes), name, dims, rng)


@pytest.mark.parametrize("loop,factor", [("k", 3), ("i", 5), ("j", 100), ("i", 1)])
def test_split(loop, factor, rng):
    s = S.split(sched("matmul", MM), "C", loop, factor)
    names = s.loop_names("S0")
    assert names.index(f"{loop}_o") + 1 == names.index(f"{loop}_i")
    assert loop not in names
    run_checked(s, "matmul", MM, rng)


def test_split_triangular(rng):
    s = S.split(sched("trmv", "N=10"), "Y", "k", 3)
    run_checked(s, "trmv", "N=10", rng)


# ---------------------------------------------------------------------------
# affine changes of one loop
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("loop,by,factor", [("j", "i", 1), ("k", "i", 2), ("k", "j", -1), ("j", "i", -3)])
def test_skew_inner_by_outer(loop, by, factor, rng):
    # An inner loop skewed by an outer one keeps every dependence's order.
    s = S.skew(sched("matmul", MM), "C", loop, by, factor)
    run_checked(s, "matmul", MM, rng)


def test_skew_outer_by_inner_reduction_only(rng):
    # i := i - k runs matmul's k updates of one cell out of order -- but those
    # are reduction dependences only (additions may be reordered): legal.
    s = S.skew(sched("matmul", MM), "C", "i", "k", -1)
    run_checked(s, "matmul", MM, rng)


def test_skew_legality_time_by_space():
    # Skewing the *time* loop by space (t := t - i) puts U[t, i] and
    # S[t+1, i+1] at the same time step, where S runs first: the flow
    # U[t, i] -> S[t+1, i+1] (A[i+1]... read by S) would be violated.
    s = S.initial(jacobi1d(), _deps(jacobi1d()))
    with pytest.raises(IllegalSchedule) as e:
        S.skew(s, "S", "t", "i", -1)
    msg = str(e.value)
    assert "skew" in msg and "must run before" in msg
    # ... while the space loop skewed by time is always legal.
    S.skew(s, "S", "i", "t", 1)


def test_reverse_dependence_free_loops(rng):
    s = S.reverse(sched("matmul", MM), "C", "i")
    s = S.reverse(s, "C", "j")
    run_checked(s, "matmul", MM, rng)
    run_checked(S.reverse(sched("transpose", "M=4,N=6"), "O", "i"), "transpose", "M=4,N=6", rng)


def test_reverse_reduction_loop(rng):
    # k carries only reduction dependences: running it backwards is allowed.
    run_checked(S.reverse(sched("trmv", "N=9"), "Y", "k"), "trmv", "N=9", rng)


def test_shift(rng):
    dims = "M=6,K=4,N=5"
    base = sched("matmul_bias_relu", dims)
    # A statement alone in its nest: shifting only moves its loop bounds.
    run_checked(S.shift(base, "Y", "i0", 3), "matmul_bias_relu", dims, rng)
    # Relu fused into the i loop of the matmul, after the j loop: shifting it
    # one iteration later still runs it after its row of C is complete.
    fused = S.fuse(base, "C", "Y", 1)
    s = S.shift(fused, "Y", "i0", 1)
    run_checked(s, "matmul_bias_relu", dims, rng)
    src = function_body(run_checked(S.shift(fused, "Y", "i0", 2), "matmul_bias_relu", dims, rng))
    assert "Y[" in src


# ---------------------------------------------------------------------------
# fusion, contraction, distribution
# ---------------------------------------------------------------------------

MBR = "M=6,K=5,N=7"


def fused_mbr() -> S.Schedule:
    """matmul -> bias -> relu with the fill before and relu after the k loop, inside i, j."""
    s = sched("matmul_bias_relu", MBR)
    s = S.fuse(s, "S0", "Z0", 2, before=True)
    return S.fuse(s, "S0", "E1", 2)


def test_fuse_contracts_the_intermediate(rng):
    s = fused_mbr()
    text = s.describe()
    assert "[local C]" in text
    # One nest: the fill, the k loop, then relu, all inside the shared i, j loops.
    assert len([ln for ln in text.splitlines() if ln.startswith("for ")]) == 1
    nbytes = S.contracted_bytes(s)
    assert set(nbytes) == {"C"} and nbytes["C"] == 6 * 7 * 4  # float32 at schedule time
    assert S.traffic_saved(s) == 2 * nbytes["C"]
    src = run_checked(s, "matmul_bias_relu", MBR, rng)
    params = c_params("matmul_bias_relu", s, MBR, rng)
    assert "C" not in params and {"A", "W", "B", "Y"} <= set(params)
    body = function_body(src)
    assert "pt_l_C" in body
    assert not re.search(r"\bC\s*\[", body), "the contracted C must not be indexed as an array"
    signature = body.splitlines()[0]
    assert signature.count("void *") == len(params) == 4


def _blocked_mbr(dims: str):
    """matmul+bias+relu with its contraction blocked by the first AVX-512 candidate, and the depth of its tile loops."""
    from polytile import autotile, hardware
    s = polytile.schedule(path_of("matmul_bias_relu"), dims=dims)
    cfg = autotile.candidates(s, "S0", hardware.load("x86-avx512"), full_blocks=False)[0]
    blocked = autotile.apply(s, cfg)
    return blocked, blocked.loop_names("S0").index("k")


def _replays(t: S.Schedule, src: str, dims: str, rng) -> None:
    """``t``'s steps, through JSON, compile to the same source ``src``."""
    steps = tuple(S.Step.from_json(json.loads(json.dumps(x.to_json()))) for x in t.steps)
    ins = ints_for("matmul_bias_relu", dims, rng)
    assert polytile.compile(path_of("matmul_bias_relu"), schedule=steps).source(*ins) == src


@pytest.mark.parametrize("dims", ["M=37,K=29,N=53", "M=64,K=64,N=64", "M=8,K=40,N=33"])
def test_fuse_last_runs_the_epilogue_per_register_block(dims, rng):
    """fuse_last puts relu(C + B) inside the blocked nest's tile loops, after the block's last k step
    (issue 14: the epilogue reads the block from L1); the oracle agrees at odd sizes, and the step
    replays from its JSON."""
    blocked, depth = _blocked_mbr(dims)
    t = blocked.fuse_last("S0", "E1", depth)
    tree = t.describe().split(")\n", 1)[1]
    lines = tree.splitlines()
    e1 = next(k for k, ln in enumerate(lines) if "E1:" in ln)
    tile_loop = next(k for k, ln in enumerate(lines) if "i_t1" in ln)
    assert tile_loop < e1 and len(lines[e1]) - len(lines[e1].lstrip()) > len(lines[tile_loop]) - len(lines[tile_loop].lstrip())
    _replays(t, run_checked(t, "matmul_bias_relu", dims, rng), dims, rng)


def test_fuse_last_refuses_a_consumer_of_nothing_the_producer_writes():
    """Z0 (C = 0) reads nothing S0 writes: there is no last producing instance to run after."""
    s = sched("matmul_bias_relu", MBR)
    with pytest.raises(polytile.ScheduleError, match="fuse_last"):
        S.TRANSFORMS["fuse_last"](s, "S0", "Z0", 1)


@pytest.mark.parametrize("dims", ["M=37,K=29,N=53", "M=64,K=64,N=64", "M=8,K=40,N=33"])
def test_fuse_first_zeroes_each_register_block_before_its_first_k_step(dims, rng):
    """fuse_first puts C = 0 inside the blocked nest's tile loops, before the block's first k step;
    the oracle agrees at odd sizes (partial blocks too), no separate zeroing pass is left, and the
    step replays from its JSON."""
    blocked, depth = _blocked_mbr(dims)
    t = blocked.fuse_first("S0", "Z0", depth)
    lines = t.describe().split(")\n", 1)[1].splitlines()
    z0, s0 = (next(k for k, ln in enumerate(lines) if f"{x}:" in ln) for x in ("Z0", "S0"))
    tile_loop = next(k for k, ln in enumerate(lines) if "i_t1" in ln)
    assert tile_loop < z0 < s0  # inside the tile loops, before the contraction's body
    src = run_checked(t, "matmul_bias_relu", dims, rng)
    assert re.search(r"if \(c\d+ == 0\)", src)  # only where the first k step reaches the block
    _replays(t, src, dims, rng)


def test_fuse_first_refuses_a_statement_writing_nothing_the_other_reads():
    """E1 (Y = relu(C + B)) writes Y, which S0 never reads: there is no first reader to run before."""
    s = sched("matmul_bias_relu", MBR)
    with pytest.raises(polytile.ScheduleError, match="fuse_first"):
        S.TRANSFORMS["fuse_first"](s, "S0", "E1", 1)


def test_unfused_keeps_the_intermediate(rng):
    s = sched("matmul_bias_relu", MBR)
    assert S.contracted_bytes(s) == {}
    assert "C" in c_params("matmul_bias_relu", s, MBR, rng)


@pytest.mark.parametrize("dims", ["M=1,K=5,N=7", "M=6,K=1,N=7", "M=6,K=5,N=1"])
def test_fuse_with_a_size_one_dimension(dims, rng):
    # The same fusion at a size where one loop has a single iteration.
    s = sched("matmul_bias_relu", dims)
    s = S.fuse(S.fuse(s, "S0", "Z0", 2, before=True), "S0", "E1", 2)
    assert set(S.contracted_bytes(s)) == {"C"}
    run_checked(s, "matmul_bias_relu", dims, rng)


def test_steps_on_one_statement_leave_the_others_alone_with_size_one_dims():
    # With M = 1 the three nests of matmul -> bias -> relu are still three
    # nests: splitting the fill's loop must not split the matmul's or relu's.
    for dims in ("M=4,K=3,N=5", "M=1,K=3,N=5"):
        s = sched("matmul_bias_relu", dims)
        t = S.split(s, "Z0", "o1", 2)
        assert t.loop_names("S0") == s.loop_names("S0") == ["i", "j", "k"], dims
        assert t.loop_names("E1") == s.loop_names("E1"), dims
        assert len([ln for ln in t.describe().splitlines() if ln.startswith("for ")]) == 3, dims


@pytest.mark.parametrize("M", [3, 1])
def test_replay_keeps_the_meaning_of_steps(M, rng):
    # Steps made at M = 3 (split relu's column loop, interchange the matmul's
    # j and k) replayed at M = 1.
    s3 = sched("matmul_bias_relu", "M=3,K=4,N=5")
    steps = S.interchange(S.split(s3, "Y", "i1", 2), "C", "j", "k").steps
    k = polytile.compile(path_of("matmul_bias_relu"), schedule=steps)
    ins = ints_for("matmul_bias_relu", f"M={M},K=4,N=5", rng)
    assert_same(k(*ins), polytile.reference(path_of("matmul_bias_relu"), *ins))


def test_distribute_undoes_fusion(rng):
    f = fused_mbr()
    d = S.distribute(f, "E1", 0)
    assert S.contracted_bytes(d) == {}
    run_checked(d, "matmul_bias_relu", MBR, rng)
    assert "C" in c_params("matmul_bias_relu", d, MBR, rng)
    # Distributing the fill too gives back three separate nests in program order.
    d2 = S.distribute(d, "Z0", 0)
    tops = [ln for ln in d2.describe().splitlines() if ln.startswith("for ")]
    assert len(tops) == 3
    orig_src = run_checked(sched("matmul_bias_relu", MBR), "matmul_bias_relu", MBR, rng)
    assert function_body(run_checked(d2, "matmul_bias_relu", MBR, rng)) == function_body(orig_src)


def test_distribute_inner_level(rng):
    # Keep the i loop shared, give relu its own j loop: C lives for one row.
    d = S.distribute(fused_mbr(), "E1", 1)
    lines = d.describe().splitlines()
    assert sum(1 for ln in lines if ln.startswith("for ")) == 1
    run_checked(d, "matmul_bias_relu", MBR, rng)


def test_fuse_softmax_rows(rng):
    # Fuse the whole row pipeline of softmax into one i loop (each consumer
    # after its producer's complete j loop).
    dims = "M=5,N=6"
    s = sched("softmax", dims)
    for consumer in ["S0", "E1", "Z2", "S2", "E3"]:
        s = S.fuse(s, "R0", consumer, 1)
    tops = [ln for ln in s.describe().splitlines() if ln.startswith("for ")]
    assert len(tops) == 1
    run_checked(s, "softmax", dims, rng)


# ---------------------------------------------------------------------------
# marks
# ---------------------------------------------------------------------------


def test_parallel_dependence_free_loop(rng):
    s = S.parallel(sched("matmul", MM), "C", "j")
    assert ("S0", "j", "parallel", False) in s.marks
    src = function_body(run_checked(s, "matmul", MM, rng))
    assert "#pragma omp parallel for" in src
    # No reduction rides on the parallel loop (the innermost k sums in SIMD lanes: its own clause).
    assert not [ln for ln in src.splitlines() if "omp parallel" in ln and "reduction(" in ln]


@pytest.mark.parametrize("name,dims,stmt,order,loop,op", [
    ("matmul", MM, "C", ["k", "i", "j"], "k", "+"),
    ("row_sum", "M=5,N=40", "O", ["j", "i"], "j", "+"),
    ("row_max", "M=5,N=40", "O", ["j", "i"], "j", "max"),
    ("product", "M=3,N=6", "O", None, "j", "*"),
])
def test_parallel_reduction_loop(name, dims, stmt, order, loop, op, rng):
    s = sched(name, dims)
    if order:
        s = S.reorder(s, stmt, order)
    st = s.resolve(stmt)
    with pytest.raises(IllegalSchedule):
        S.parallel(s, stmt, loop)  # without a reduction clause: a race
    p = S.parallel(s, stmt, loop, reduction=True)
    assert (st, loop, "parallel", True) in p.marks
    src = function_body(run_checked(p, name, dims, rng))
    # float max/min combine with the NaN-keeping declared reductions (pt_rmax_float64, ...)
    assert f"reduction({op}:" in src or f"reduction(pt_r{op}_" in src
    assert "#pragma omp parallel for" in src


def test_simd_reduction_of_tile_statements(rng):
    # matmul in program order has k innermost, carrying only the reduction into C: a Tile sum has
    # no order, so k may run in SIMD lanes -- asked for, as here, or by default (codegen/c_accumulate.py).
    s = sched("matmul", MM)
    with pytest.raises(IllegalSchedule, match="vectorize\\(\\.\\.\\., reduction=True\\)"):
        S.vectorize(s, "C", "k")
    v = S.vectorize(s, "C", "k", reduction=True)
    src = function_body(run_checked(v, "matmul", MM, rng))
    assert "#pragma omp simd reduction(+:pt_acc0)" in src
    # max combines its lanes NaN-aware (a declared reduction); narrow types would convert at every step.
    v = S.vectorize(sched("row_max", "M=5,N=40"), "O", "j", reduction=True)
    src = function_body(run_checked(v, "row_max", "M=5,N=40", rng))
    assert "#pragma omp simd reduction(pt_rmax_float64:pt_acc0)" in src
    with pytest.raises(IllegalSchedule, match="SIMD reductions hold"):
        S.vectorize(sched("row_sum", "M=5,N=40", dtypes="int8"), "O", "j", reduction=True)


def test_vectorize_innermost(rng):
    s = S.reorder(sched("matmul", MM), "C", ["i", "k", "j"])
    v = S.vectorize(s, "C", "j")
    src = function_body(run_checked(v, "matmul", MM, rng))
    assert "#pragma omp simd" in src
    src = function_body(run_checked(S.vectorize(sched("transpose", "M=5,N=8"), "O", "i"), "transpose", "M=5,N=8", rng))
    assert "#pragma omp simd" in src


def test_vectorize_with_parallel_outer(rng):
    s = S.reorder(sched("matmul", MM), "C", ["i", "k", "j"])
    s = S.parallel(S.vectorize(s, "C", "j"), "C", "i")
    src = function_body(run_checked(s, "matmul", MM, rng))
    assert "#pragma omp simd" in src and "#pragma omp parallel for" in src


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_unroll(factor, rng):
    s = S.unroll(sched("matmul", MM), "C", "k", factor)
    src = function_body(run_checked(s, "matmul", MM, rng))
    assert f"#pragma GCC unroll {factor}" in src


@pytest.mark.parametrize("factor", [0, 65535, 70000, 1.5, True])
def test_unroll_factor_outside_what_gcc_accepts_is_refused(factor):
    # 70000 became "#pragma GCC unroll 70000", which gcc rejects (a compile error, not a schedule error).
    with pytest.raises(polytile.ScheduleError, match="from 1 to 65534"):
        S.unroll(sched("matmul", MM), "C", "k", factor)


def test_marks_survive_tiling(rng):
    s = S.parallel(S.reorder(sched("matmul", MM), "C", ["i", "k", "j"]), "C", "i")
    s = S.vectorize(S.tile(s, "C", i=4, j=4), "C", "j")
    # tile moves the parallel mark to the outermost tile loop
    assert ("S0", "i_t", "parallel", False) in s.marks
    src = function_body(run_checked(s, "matmul", MM, rng))
    assert "#pragma omp parallel for" in src


def test_unmark(rng):
    s = S.parallel(sched("matmul", MM), "C", "i")
    u = S.unmark(s, "C", "i")
    assert u.marks == frozenset()
    assert "#pragma omp parallel" not in function_body(run_checked(u, "matmul", MM, rng))


@pytest.mark.parametrize("other", ["parallel", "vectorize"])
def test_unroll_together_with_an_omp_mark(other, rng):
    # If the schedule layer accepts both marks on one loop, the kernel must
    # compile (GCC refuses "#pragma GCC unroll" between an omp loop pragma
    # and its loop, and the other way round); refusing the combination with
    # a ScheduleError would be fine too.
    s = sched("transpose", "M=5,N=8")
    s = S.unroll(s, "O", "i", 4)
    try:
        s = getattr(S, other)(s, "O", "i")
    except polytile.ScheduleError as e:
        assert not isinstance(e, IllegalSchedule), f"a legal request refused as illegal: {e}"
        return
    run_checked(s, "transpose", "M=5,N=8", rng)


def _dangling_marks(s: S.Schedule):
    return [m for m in s.marks if m[1] not in s.loop_names(m[0])]


@pytest.mark.parametrize("kind", ["parallel", "auto_parallel", "unroll"])
def test_split_a_marked_loop(kind, rng):
    # polytile.schedule() marks outermost loops parallel by default, so
    # splitting one of them is the common case, not a corner case.
    if kind == "auto_parallel":
        s = polytile.schedule(path_of("matmul"), dims=MM)  # parallel=True: i is marked
        loop = "i"
    elif kind == "parallel":
        s, loop = S.parallel(sched("matmul", MM), "C", "j"), "j"
    else:
        s, loop = S.unroll(sched("matmul", MM), "C", "k", 2), "k"
    out = S.split(s, "C", loop, 4)
    assert _dangling_marks(out) == [], "marks must name loops that exist"
    run_checked(out, "matmul", MM, rng)


def test_parallel_reduction_inside_contracted_nest(rng):
    # C is contracted to a scalar inside (i, j); the k loop may still be a
    # parallel reduction -- of that scalar, which is not the array C.  (A
    # ScheduleError refusing the request would be acceptable; a kernel that
    # does not compile is not.)
    try:
        s = S.parallel(fused_mbr(), "C", "k", reduction=True)
    except polytile.ScheduleError as e:
        assert not isinstance(e, IllegalSchedule), f"a legal request refused as illegal: {e}"
        return
    assert "C" in S.contracted_bytes(s)
    src = function_body(run_checked(s, "matmul_bias_relu", MBR, rng))
    assert "reduction(+:" in src


# ---------------------------------------------------------------------------
# isl's scheduler on every example
# ---------------------------------------------------------------------------

SCHEDULER_TIMEOUT = 30.0  # seconds; the scheduler takes well under one second on these sizes


def _probe(path, dims, shapes, fusion, conn):
    try:
        polytile.schedule(path, dims=dims, shapes=shapes, fusion=fusion, parallel=False)
        conn.send("ok")
    except BaseException as e:  # report anything, the parent decides
        conn.send(f"{type(e).__name__}: {e}")


def scheduler_finishes(path, dims: str, shapes, fusion: str, timeout: float = SCHEDULER_TIMEOUT) -> str:
    """Run isl's scheduler in a forked child; 'ok', the error, or a timeout note.

    A forked child, so that a scheduler that never returns (a C call, which
    no signal interrupts) fails this test instead of hanging the suite.
    """
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_probe, args=(str(path), dims, shapes, fusion, send), daemon=True)
    proc.start()
    try:
        if not recv.poll(timeout):
            return f"isl scheduler did not finish within {timeout:.0f} s"
        return recv.recv()
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()


def _scheduler_cases():
    out = []
    for p in example_paths():
        for n, case in enumerate(example_cases(p)):
            for fusion in S.FUSION:
                out.append(pytest.param(p, case, fusion, id=f"{p.stem}-{n}-{fusion}"))
    return out


@pytest.mark.parametrize("path,case,fusion", _scheduler_cases())
def test_isl_scheduler_every_example(path, case, fusion, rng):
    dims = ",".join(f"{k}={v}" for k, v in case["dims"].items())
    status = scheduler_finishes(path, dims, case["named_shapes"], fusion)
    assert status == "ok", f"{path.stem} at {dims}, fusion={fusion}: {status}"
    steps = [{"op": "base", "kind": "isl", "fusion": fusion}, {"op": "auto_parallel"}]
    k = polytile.compile(path, schedule=steps)
    prog = k.program
    ins = make_inputs(prog, case, rng)
    assert_same(k(*ins), polytile.reference(path, *ins), inexact=path.stem in INEXACT)


def test_isl_scheduler_fusion_choices_differ(rng):
    # On matmul -> bias -> relu, "none" keeps three nests and "max" fuses the
    # relu with the matmul; both compute the same thing.
    none = S.automatic(*_scop_deps("matmul_bias_relu", MBR), "none")
    most = S.automatic(*_scop_deps("matmul_bias_relu", MBR), "max")
    tops = lambda s: [ln for ln in s.describe().splitlines() if ln.startswith("for ")]  # noqa: E731
    assert len(tops(none)) > len(tops(most))
    for s in (none, most):
        run_checked(s, "matmul_bias_relu", MBR, rng)


def _scop_deps(name, dims):
    s = sched(name, dims)
    return s.scop, s.deps


# ---------------------------------------------------------------------------
# schedules as data: save, load, replay
# ---------------------------------------------------------------------------


def chained() -> S.Schedule:
    s = sched("matmul", MM)
    s = S.tile(s, "C", i=[8, 4], j=3)
    s = S.split(s, "C", "k", 2)
    s = S.parallel(s, "C", "i_t")
    return S.unroll(s, "C", "k_i", 2)


def test_save_errors_name_the_path_given_and_leave_nothing(tmp_path):
    s = sched("matmul", MM)
    for bad, why in ((tmp_path / "no_dir" / "x.json", "does not exist"), (tmp_path, "is a directory")):
        with pytest.raises(polytile.ScheduleError, match=why) as info:
            s.save(bad)
        assert str(bad) in str(info.value) and ".sched-" not in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == []
    s.save(tmp_path / "ok.json")
    mode = (tmp_path / "ok.json").stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # an ordinary file, not mkstemp's private 0600


def test_save_load_roundtrip_byte_identical(tmp_path, rng):
    s = chained()
    text = s.dumps()
    doc = json.loads(text)
    assert [st["op"] for st in doc["steps"]] == ["base", "tile", "split", "parallel", "unroll"]
    steps = pipeline.schedule_steps(text)
    assert steps == s.steps
    f = tmp_path / "mm.sched.json"
    s.save(f)
    assert pipeline.schedule_steps(str(f)) == s.steps
    assert pipeline.schedule_steps(json.loads(text)) == s.steps
    ins = ints_for("matmul", MM, rng)
    sources = [polytile.compile(path_of("matmul"), schedule=spec).source(*ins)
               for spec in (s, text, str(f), steps, doc["steps"])]
    assert all(src == sources[0] for src in sources[1:])
    # The replayed schedule is the same schedule.
    again = pipeline.replay(s.scop, s.deps, steps)
    assert again.time_map().is_equal(s.time_map())
    assert again.marks == s.marks
    assert again.tree_text() == s.tree_text()
    run_checked(again, "matmul", MM, rng)


def test_step_json_roundtrip():
    for st in chained().steps:
        assert S.Step.from_json(json.loads(json.dumps(st.to_json()))) == st


@pytest.mark.parametrize("dims", ["M=2,N=3,K=4", "M=40,N=33,K=9", "M=8,N=3,K=12", "M=3,N=17,K=2"])
def test_replay_on_other_shapes(dims, rng):
    k = polytile.compile(path_of("matmul"), schedule=chained().dumps())
    ins = ints_for("matmul", dims, rng)
    assert_same(k(*ins), polytile.reference(path_of("matmul"), *ins))


@pytest.mark.parametrize("dims", ["M=1,N=17,K=3", "M=5,N=4,K=1"])
def test_replay_when_a_dimension_has_size_one(dims, rng):
    # "one schedule serves all shapes" (polytile.options.Options): a kernel compiled
    # with a schedule that tiles i and splits k must still run when M or K
    # is 1 (a batch of one row, a rank-1 update).
    k = polytile.compile(path_of("matmul"), schedule=chained().dumps())
    ins = ints_for("matmul", dims, rng)
    assert_same(k(*ins), polytile.reference(path_of("matmul"), *ins))


@pytest.mark.parametrize("dims", ["M=3,K=2,N=4", "M=11,K=7,N=2", "M=2,K=1,N=9"])
def test_replay_fused_on_other_shapes(dims, rng):
    s = S.parallel(S.tile(fused_mbr(), "C", i=4, j=4), "C", "i_t")
    k = polytile.compile(path_of("matmul_bias_relu"), schedule=s.steps)
    ins = ints_for("matmul_bias_relu", dims, rng)
    assert_same(k(*ins), polytile.reference(path_of("matmul_bias_relu"), *ins))


def test_describe_names_loops():
    s = chained()
    text = s.describe()
    for name in s.loop_names("S0"):
        assert name in text
    assert {"i_t", "i_t1", "j_t", "k_o", "k_i"} <= set(s.loop_names("S0"))
    assert "[parallel]" in text and "[unroll 2]" in text
    assert "tile(" in text.splitlines()[0]


# ---------------------------------------------------------------------------
# Scops from isl text, against the instance-by-instance oracle
# ---------------------------------------------------------------------------


def _deps(scop):
    from polytile import deps as deps_mod

    return deps_mod.compute(scop)


def jacobi1d(T=5, N=14, scale=0.5):
    """B[i] = scale*(A[i-1] + A[i] + A[i+1]) (S), then A[i] = B[i] (U), one time loop around both."""
    return scop_from_isl("jacobi1d", [
        {"domain": f"{{ S[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ S[t, i] -> B[i] }",
         "reads": ["{ S[t, i] -> A[i - 1] }", "{ S[t, i] -> A[i] }", "{ S[t, i] -> A[i + 1] }"], "scale": scale},
        {"domain": f"{{ U[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ U[t, i] -> A[i] }",
         "reads": ["{ U[t, i] -> B[i] }"]},
    ], {"A": ((N,), "float64"), "B": ((N,), "float64")},
        schedule="{ S[t, i] -> [t, 0, i]; U[t, i] -> [t, 1, i] }")


def jacobi2d(T=4, N=9):
    """B[i,j] = A[i,j] + its 4 neighbours (S), then A[i,j] = B[i,j] (U), inside a time loop."""
    dom = f"0 <= t < {T} and 1 <= i < {N - 1} and 1 <= j < {N - 1}"
    return scop_from_isl("jacobi2d", [
        {"domain": f"{{ S[t, i, j] : {dom} }}", "write": "{ S[t, i, j] -> B[i, j] }",
         "reads": [f"{{ S[t, i, j] -> A[{a}, {b}] }}" for a, b in
                   [("i", "j"), ("i - 1", "j"), ("i + 1", "j"), ("i", "j - 1"), ("i", "j + 1")]],
         "scale": 0.5},
        {"domain": f"{{ U[t, i, j] : {dom} }}", "write": "{ U[t, i, j] -> A[i, j] }",
         "reads": ["{ U[t, i, j] -> B[i, j] }"]},
    ], {"A": ((N, N), "float64"), "B": ((N, N), "float64")},
        schedule="{ S[t, i, j] -> [t, 0, i, j]; U[t, i, j] -> [t, 1, i, j] }")


def seidel2d(T=3, N=8):
    """In place: A[i,j] = A[i-1,j] + A[i,j-1] + A[i,j] + A[i+1,j] + A[i,j+1], swept T times (scale 1/2)."""
    return scop_from_isl("seidel2d", [
        {"domain": f"{{ S[t, i, j] : 0 <= t < {T} and 1 <= i < {N - 1} and 1 <= j < {N - 1} }}",
         "write": "{ S[t, i, j] -> A[i, j] }",
         "reads": [f"{{ S[t, i, j] -> A[{a}, {b}] }}" for a, b in
                   [("i - 1", "j"), ("i", "j - 1"), ("i", "j"), ("i + 1", "j"), ("i", "j + 1")]],
         "scale": 0.5},
    ], {"A": ((N, N), "float64")})


def isl_inputs(scop, rng):
    return {a.name: rng.integers(-4, 5, size=a.shape).astype(a.dtype) for a in scop.arrays}


def run_isl_checked(s: S.Schedule, rng) -> str:
    """Build ``s`` for its Scop, run it, compare every array with ``execute``; return the C."""
    arrays = isl_inputs(s.scop, rng)
    want = execute(s.scop, arrays)
    spec = pipeline.build_scop(s.scop, s)
    got = pipeline.run_scop(spec, arrays)
    for a in s.scop.arrays:
        np.testing.assert_array_equal(got[a.name], want[a.name], err_msg=f"array {a.name}")
    return spec.source.text


def test_isl_scop_original_order(rng):
    for scop in (jacobi1d(), jacobi2d(), seidel2d()):
        run_isl_checked(S.initial(scop, _deps(scop)), rng)


def test_execute_is_a_real_oracle(rng):
    """The interpreter agrees with a direct numpy loop (so agreeing with it means something)."""
    scop = jacobi1d(T=3, N=7)
    arrays = isl_inputs(scop, rng)
    a, b = arrays["A"].copy(), arrays["B"].copy()
    for _ in range(3):
        for i in range(1, 6):
            b[i] = 0.5 * ((a[i - 1] + a[i]) + a[i + 1])
        a[1:6] = b[1:6]
    got = execute(scop, arrays)
    np.testing.assert_array_equal(got["A"], a)
    np.testing.assert_array_equal(got["B"], b)


@pytest.mark.parametrize("sizes", [{"t": 2, "i": 4}, {"t": 3, "i": 5}, {"t": 8, "i": 32}, {"t": [4, 2], "i": [8, 3]}])
def test_jacobi1d_skew_shift_tile(sizes, rng):
    # Time tiling of the two-statement Jacobi: S at i' = 2t + i, U at 2t + i + 1
    # makes every dependence distance non-negative in (t, i'), so rectangular
    # tiles of (t, i') are legal.
    scop = jacobi1d()
    s = S.initial(scop, _deps(scop))
    s = S.skew(s, "S", "i", "t", 2)   # the i loops of S and U (sharing t) both
    s = S.shift(s, "U", "i", 1)
    s = S.tile(s, "S", sizes)
    names = s.loop_names("S")
    assert names.index("t_t") < names.index("t") and names.index("i_t") < names.index("i")
    run_isl_checked(s, rng)


def test_jacobi1d_skew_by_one_is_not_tileable():
    # With i' = t + i for both statements, the anti dependence S[t, i] -> U[t, i-1]
    # (S reads A[i-1] before U overwrites it) runs backwards in i' and splits
    # across tiles: tiling must be refused.
    scop = jacobi1d()
    s = S.skew(S.initial(scop, _deps(scop)), "S", "i", "t", 1)
    with pytest.raises(IllegalSchedule) as e:
        S.tile(s, "S", t=2, i=4)
    assert "tile" in str(e.value) and "anti" in str(e.value)


def test_jacobi1d_shift_fuse(rng):
    # Fuse U into S's i loop, one iteration behind: U[t, i-1] runs after
    # S[t, i] has read A[i-1].  (Without the shift, see test_illegal.)
    scop = jacobi1d()
    s = S.initial(scop, _deps(scop))
    s = S.shift(s, "U", "i", 1)
    s = S.fuse(s, "S", "U", 2)
    lines = s.describe().splitlines()
    assert sum(1 for ln in lines if ln.strip().startswith("for ")) == 2  # t, and one shared i loop
    run_isl_checked(s, rng)
    # ... and the fused loop can be split and unrolled.
    run_isl_checked(S.unroll(S.split(s, "S", "i", 3), "S", "i_i", 3), rng)


@pytest.mark.parametrize("sizes", [{"t": 2, "i": 3, "j": 4}, {"t": 4, "i": 16, "j": 2}, {"i": 3, "j": 3}])
def test_jacobi2d_skew_shift_tile(sizes, rng):
    scop = jacobi2d()
    s = S.initial(scop, _deps(scop))
    s = S.skew(s, "S", "i", "t", 2)
    s = S.skew(s, "S", "j", "t", 2)
    s = S.shift(s, "U", "i", 1)
    s = S.shift(s, "U", "j", 1)
    s = S.tile(s, "S", sizes)
    run_isl_checked(s, rng)


@pytest.mark.parametrize("sizes", [{"t": 2, "i": 3, "j": 3}, {"t": 3, "i": 4, "j": 5}, {"i": [4, 2], "j": 3}])
def test_seidel2d_skew_tile(sizes, rng):
    # (t, i + t, j + t): every distance (1, -1, 0), (1, 0, -1), (0, 1, 0), ...
    # becomes non-negative, so (t, i', j') can be tiled.
    scop = seidel2d()
    s = S.initial(scop, _deps(scop))
    s = S.skew(s, "S", "i", "t", 1)
    s = S.skew(s, "S", "j", "t", 1)
    run_isl_checked(S.tile(s, "S", sizes), rng)


def test_seidel2d_wavefront_parallel(rng):
    # After skewing j by i and t (j' = j + i + 2t ... here j + t then j + i), the
    # point loop over i inside a fixed (t, j') wavefront is dependence-free.
    scop = seidel2d()
    s = S.initial(scop, _deps(scop))
    s = S.skew(s, "S", "i", "t", 1)
    s = S.skew(s, "S", "j", "t", 1)
    s = S.skew(s, "S", "j", "i", 1)
    s = S.interchange(s, "S", "i", "j")
    s = S.parallel(s, "S", "i")
    src = run_isl_checked(s, rng)
    assert "#pragma omp parallel for" in src


def test_isl_scop_schedule_roundtrip(rng):
    scop = jacobi1d()
    s = S.tile(S.shift(S.skew(S.initial(scop, _deps(scop)), "S", "i", "t", 2), "U", "i", 1), "S", t=2, i=4)
    again = pipeline.replay(scop, _deps(scop), pipeline.schedule_steps(s.dumps()))
    assert again.time_map().is_equal(s.time_map())
    a = pipeline.build_scop(scop, s).source.text
    b = pipeline.build_scop(scop, again).source.text
    assert a == b
