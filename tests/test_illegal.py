"""Illegal schedule steps are refused, naming the dependence they would break.

Each case asserts that the step raises :class:`polytile.IllegalSchedule` and
that the message names

* the transformation (the step as written, e.g. ``interchange(stmt='S', ...)``),
* the kind of the violated dependence (flow / anti / output),
* its source and sink statements,
* a concrete pair of iterations ``src[...] (time [...]) must run before
  snk[...] (time [...])``.

The pair is then checked independently: it must belong to the named
dependence relation, and the times must be what the *rejected* schedule
(rebuilt with the legality check switched off) gives those iterations, with
the sink no later than the source (an ordering violation) or both in the
same iteration of all outer loops but different iterations of the marked
loop (a parallel/simd violation).  Where a fix exists (skew before
interchange, shift before fuse, the right loop order), it is applied and the
result compared with the oracle.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional
from unittest import mock

import islpy as isl
import numpy as np
import pytest

import polytile
from polytile import IllegalSchedule, PolytileError, pipeline
from polytile import deps as deps_mod
from polytile import scheduling as S
from polytile.poly.from_isl import execute, scop_from_isl

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

PAIR = re.compile(r"e\.g\. (\w+)\[([-\d, ]*)\] \(time \[([-\d, ]*)\]\) must run before "
                  r"(\w+)\[([-\d, ]*)\] \(time \[([-\d, ]*)\]\)")
KIND_REL = {"flow": "flow", "anti": "anti", "output": "output"}
KIND_TEXT = {"flow": "flow (RAW)", "anti": "anti (WAR)", "output": "output (WAW)"}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _ints(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _unchecked(fn, *args, **kw) -> S.Schedule:
    """What ``fn`` would return if the legality check let everything through."""
    with mock.patch.object(S.Schedule, "check", lambda self, what, since=None: self):
        return fn(*args, **kw)


def _time(s: S.Schedule, stmt: str, point: List[int]) -> List[int]:
    names = ", ".join(f"x{k}" for k in range(len(point)))
    cons = " and ".join(f"x{k} = {v}" for k, v in enumerate(point)) or "true"
    img = isl.Set(f"{{ {stmt}[{names}] : {cons} }}").apply(s.table[stmt].map)
    assert not img.is_empty(), f"{stmt}{point} is not an instance"
    pt = img.sample_point()
    return [int(pt.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(img.dim(isl.dim_type.set))]


def rejected(op: str, fn, *args, kind: str, src: str, snk: str, carried: Optional[str] = None, **kw) -> str:
    """``fn(*args, **kw)`` raises IllegalSchedule naming ``op``, ``kind`` and ``src -> snk``; return the message.

    ``carried`` is the name of the marked loop for parallel/simd violations.
    """
    before: S.Schedule = args[0]
    with pytest.raises(IllegalSchedule) as e:
        fn(*args, **kw)
    msg = str(e.value)
    assert msg.startswith(f"{op}("), msg
    assert "is illegal" in msg
    assert f"violated {KIND_TEXT[kind]} dependence {src} -> {snk}" in msg, msg
    m = PAIR.search(msg)
    assert m, f"no concrete pair in: {msg}"
    a_name, a, ta, b_name, b, tb = m.groups()
    assert (a_name, b_name) == (src, snk)
    a, b, ta, tb = _ints(a), _ints(b), _ints(ta), _ints(tb)
    # The pair is a real dependence of the named kind ...
    rel = getattr(before.deps, KIND_REL[kind])
    pair = isl.UnionMap(f"{{ {src}[{', '.join(map(str, a))}] -> {snk}[{', '.join(map(str, b))}] }}")
    assert pair.is_subset(rel), f"{pair} is not a {kind} dependence"
    # ... and the rejected schedule really runs it wrongly.
    bad = _unchecked(fn, *args, **kw)
    assert _time(bad, src, a) == ta and _time(bad, snk, b) == tb
    if carried is None:
        assert not ta < tb, f"{ta} runs before {tb}: not a violation"  # lists compare lexicographically
        assert before.deps.all(include_reductions=False).intersect(pair).is_empty() is False
    else:
        d = bad.loop_dim(bad.resolve(args[1]), carried)
        assert ta[:d] == tb[:d] and ta[d] != tb[d], f"{ta} / {tb} not carried by dim {d}"
    return msg


def tile_sched(name: str, dims: str, **kw) -> S.Schedule:
    return polytile.schedule(EXAMPLES / f"{name}.tile", dims=dims, parallel=False, **kw)


def check_tile(s: S.Schedule, source, dims: str, rng) -> None:
    k = polytile.compile(source, schedule=s)
    prog = k.program
    shapes = polytile.shapes_from_dims(prog, pipeline.parse_dims(dims))
    ins = [rng.integers(-4, 5, size=sh).astype(np.float64) for sh in shapes]
    np.testing.assert_array_equal(k(*ins), polytile.reference(source, *ins))


def check_isl(s: S.Schedule, rng) -> None:
    arrays = {a.name: rng.integers(-4, 5, size=a.shape).astype(a.dtype) for a in s.scop.arrays}
    want = execute(s.scop, arrays)
    got = pipeline.run_scop(pipeline.build_scop(s.scop, s), arrays)
    for a in s.scop.arrays:
        np.testing.assert_array_equal(got[a.name], want[a.name])


def initial(scop) -> S.Schedule:
    return S.initial(scop, deps_mod.compute(scop))


def jacobi1d(T=4, N=10):
    """B[i] = (A[i-1] + A[i] + A[i+1]) / 2 (S), then A[i] = B[i] (U), inside a time loop t."""
    return scop_from_isl("jacobi1d", [
        {"domain": f"{{ S[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ S[t, i] -> B[i] }",
         "reads": ["{ S[t, i] -> A[i - 1] }", "{ S[t, i] -> A[i] }", "{ S[t, i] -> A[i + 1] }"], "scale": 0.5},
        {"domain": f"{{ U[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ U[t, i] -> A[i] }",
         "reads": ["{ U[t, i] -> B[i] }"]},
    ], {"A": ((N,), "float64"), "B": ((N,), "float64")},
        schedule="{ S[t, i] -> [t, 0, i]; U[t, i] -> [t, 1, i] }")


def seidel2d(T=3, N=7):
    """In place, swept T times: A[i,j] = (A[i-1,j] + A[i,j-1] + A[i,j] + A[i+1,j] + A[i,j+1]) / 2."""
    return scop_from_isl("seidel2d", [
        {"domain": f"{{ S[t, i, j] : 0 <= t < {T} and 1 <= i < {N - 1} and 1 <= j < {N - 1} }}",
         "write": "{ S[t, i, j] -> A[i, j] }",
         "reads": [f"{{ S[t, i, j] -> A[{a}, {b}] }}" for a, b in
                   [("i - 1", "j"), ("i", "j - 1"), ("i", "j"), ("i + 1", "j"), ("i", "j + 1")]],
         "scale": 0.5},
    ], {"A": ((N, N), "float64")})


def recurrence(N=12):
    """In place A[i] = A[i-1] + B[i]: a flow of distance 1 carried by i."""
    return scop_from_isl("recurrence", [
        {"domain": f"{{ S[i] : 1 <= i < {N} }}", "write": "{ S[i] -> A[i] }",
         "reads": ["{ S[i] -> A[i - 1] }", "{ S[i] -> B[i] }"]},
    ], {"A": ((N,), "float64"), "B": ((N,), "float64")})


# ---------------------------------------------------------------------------
# interchange of time and space
# ---------------------------------------------------------------------------


def test_jacobi1d_interchange_time_space_rejected():
    s = initial(jacobi1d())
    # i outermost would run U[t, i] (writes A[i]) after S[t+1, i-1] (reads it).
    msg = rejected("interchange", S.interchange, s, "S", "t", "i", kind="flow", src="U", snk="S")
    assert "t" in msg and "i" in msg


def test_jacobi1d_interchange_legal_after_skew(rng):
    # S at i' = 2t + i, U at i' = 2t + i + 1, fused at every level: every
    # dependence distance in (t, i') is non-negative, so i' may go outside t.
    s = initial(jacobi1d())
    s = S.skew(s, "S", "i", "t", 2)
    s = S.shift(s, "U", "i", 1)
    s = S.fuse(s, "S", "U", 2)
    s = S.interchange(s, "S", "t", "i")
    assert s.loop_names("S") == ["i", "t"] and s.loop_names("U") == ["i", "t"]
    check_isl(s, rng)


def test_jacobi1d_skew_without_fusion_does_not_allow_interchange():
    # Skewed and shifted but still two separate i loops under t: after the
    # interchange, at one i' all of S's time steps would run before all of
    # U's, so S[t+1, i-1] would read A[i] before U[t, i] writes it.
    s = S.shift(S.skew(initial(jacobi1d()), "S", "i", "t", 2), "U", "i", 1)
    rejected("interchange", S.interchange, s, "S", "t", "i", kind="flow", src="U", snk="S")
    # Skewed by 2 without the shift, U[t, i-1] lands before S[t, i] reads A[i-1].
    s = S.skew(initial(jacobi1d()), "S", "i", "t", 2)
    rejected("interchange", S.interchange, s, "S", "t", "i", kind="anti", src="S", snk="U")


def test_seidel2d_interchange_time_space(rng):
    s = initial(seidel2d())
    # S[t, i, j] -> S[t+1, i-1, j] (A[i, j] read as the lower neighbour next sweep) has distance (1, -1, 0).
    rejected("interchange", S.interchange, s, "S", "t", "i", kind="flow", src="S", snk="S")
    # i' = i + t turns (1, -1, 0) into (1, 0, 0): then (i', t, j) is legal.
    k = S.interchange(S.skew(s, "S", "i", "t", 1), "S", "t", "i")
    assert k.loop_names("S") == ["i", "t", "j"]
    check_isl(k, rng)


def test_seidel2d_tiling_needs_skewing(rng):
    s = initial(seidel2d())
    rejected("tile", S.tile, s, "S", {"t": 2, "i": 2}, kind="flow", src="S", snk="S")
    ok = S.tile(S.skew(S.skew(s, "S", "i", "t", 1), "S", "j", "t", 1), "S", {"t": 2, "i": 2, "j": 3})
    check_isl(ok, rng)


def test_skew_time_by_space_rejected():
    s = initial(jacobi1d())
    rejected("skew", S.skew, s, "S", "t", "i", -1, kind="flow", src="U", snk="S")


# ---------------------------------------------------------------------------
# fusion
# ---------------------------------------------------------------------------

MBR = "M=4,K=3,N=5"


def test_fuse_consumer_before_reduction_completes():
    s = tile_sched("matmul_bias_relu", MBR)
    # Relu at depth 2 *before* the k loop reads C[i, j] before any S0[i, j, k] adds to it.
    msg = rejected("fuse", S.fuse, s, "C", "Y", 2, before=True, kind="flow", src="S0", snk="E1")
    assert "fuse(a='C', b='Y', depth=2, before=True)" in msg


def test_fuse_fill_after_update_rejected():
    s = tile_sched("matmul_bias_relu", MBR)
    # The fill C = 0 after the k loop would clear the finished sum.
    rejected("fuse", S.fuse, s, "S0", "Z0", 2, kind="flow", src="Z0", snk="S0")


def test_fuse_output_dependence_only():
    # a transpose into a taller output (its last row stays 0): the fill O = 0 and O[j, i] = I[i, j]
    # only share the written cells (WAW); running the fill second would zero the result.
    s = polytile.schedule("function (I[M, N]) -> (O) { O[j, i : N + 1, M] = =(I[i, j]); }", dims="M=3,N=4")
    rejected("fuse", S.fuse, s, "S0", "Z0", 2, kind="output", src="Z0", snk="S0")
    S.fuse(s, "S0", "Z0", 2, before=True)  # the right way round is fine


ROW_SUM_THEN_SCALE = "function (I[M, N]) -> (P) { O[i : M] = +(I[i, j]); P = O * 2; }"


def test_row_sum_consumer_fused_in_the_wrong_loop_order(rng):
    dims = "M=5,N=6"
    s = polytile.schedule(ROW_SUM_THEN_SCALE, dims=dims, parallel=False)
    swapped = S.interchange(s, "O", "i", "j")  # j outer: no row is complete before the last j
    rejected("fuse", S.fuse, swapped, "O", "P", 1, kind="flow", src="S0", snk="E1")
    # With i outer the consumer runs after its row's j loop: legal.
    good = S.fuse(s, "O", "P", 1)
    check_tile(good, ROW_SUM_THEN_SCALE, dims, rng)


def test_jacobi1d_fuse_without_shift(rng):
    s = initial(jacobi1d())
    # U[t, i] would overwrite A[i] before S[t, i+1] reads it (anti).
    rejected("fuse", S.fuse, s, "S", "U", 2, kind="anti", src="S", snk="U")
    check_isl(S.fuse(S.shift(s, "U", "i", 1), "S", "U", 2), rng)


def test_shift_consumer_earlier_rejected(rng):
    s = S.fuse(tile_sched("matmul_bias_relu", MBR), "C", "Y", 1)
    rejected("shift", S.shift, s, "Y", "i0", -1, kind="flow", src="S0", snk="E1")
    check_tile(S.shift(s, "Y", "i0", 1), EXAMPLES / "matmul_bias_relu.tile", MBR, rng)


# ---------------------------------------------------------------------------
# loop direction
# ---------------------------------------------------------------------------


def test_reverse_loop_carrying_flow():
    rejected("reverse", S.reverse, initial(recurrence()), "S", "i", kind="flow", src="S", snk="S")


def test_reverse_time_loop():
    # S[t, i] writes B[i] that U[t', i] reads at every later step t' >= t.
    rejected("reverse", S.reverse, initial(jacobi1d()), "S", "t", kind="flow", src="S", snk="U")


# ---------------------------------------------------------------------------
# parallel and simd marks
# ---------------------------------------------------------------------------


def test_parallel_reduction_without_target_support():
    s = S.reorder(tile_sched("matmul", "M=4,N=5,K=6"), "C", ["k", "i", "j"])
    no_red = s.with_(parallel_reductions=False)
    msg = rejected("parallel", S.parallel, no_red, "C", "k", reduction=True,
                   kind="flow", src="S0", snk="S0", carried="k")
    assert "no parallel reductions" in msg
    # Without a reduction clause it is a race on any target.
    for target in (s, no_red):
        msg = rejected("parallel", S.parallel, target, "C", "k", kind="flow", src="S0", snk="S0", carried="k")
        assert "carries a dependence" in msg
    msg = rejected("parallel", S.parallel, s, "C", "k", kind="flow", src="S0", snk="S0", carried="k")
    assert "reduction=True" in msg  # the hint: this target could do it with a reduction
    # ... which it then accepts.
    assert ("S0", "k", "parallel", True) in S.parallel(s, "C", "k", reduction=True).marks


def test_parallel_time_loop():
    rejected("parallel", S.parallel, initial(jacobi1d()), "S", "t", kind="flow", src="S", snk="U", carried="t")


def test_parallel_reduction_does_not_excuse_real_dependences():
    # reduction=True only covers an aggregation's own updates; the seidel
    # sweep's i loop carries ordinary flow dependences.
    rejected("parallel", S.parallel, initial(seidel2d()), "S", "i", reduction=True,
             kind="flow", src="S", snk="S", carried="i")


def test_vectorize_recurrence():
    rejected("vectorize", S.vectorize, initial(recurrence()), "S", "i", kind="flow", src="S", snk="S", carried="i")


def test_vectorize_seidel_inner_loop():
    rejected("vectorize", S.vectorize, initial(seidel2d()), "S", "j", kind="flow", src="S", snk="S", carried="j")


def test_vectorize_reduction_loop():
    s = tile_sched("matmul", "M=4,N=5,K=6")
    msg = rejected("vectorize", S.vectorize, s, "C", "k", kind="flow", src="S0", snk="S0", carried="k")
    assert "simd" in msg


def test_vectorize_reduction_hint_does_not_blame_the_target():
    # The target supports parallel reductions (the default); a simd request on
    # a reduction loop must not claim that it does not.
    s = tile_sched("matmul", "M=4,N=5,K=6")
    assert s.parallel_reductions
    with pytest.raises(IllegalSchedule) as e:
        S.vectorize(s, "C", "k")
    assert "this target has no parallel reductions" not in str(e.value)


def test_marks_rechecked_after_later_steps():
    # Marks are re-checked by every later step: j stays parallel when moved
    # inside k (it carries nothing) ...
    s = S.parallel(tile_sched("matmul", "M=4,N=5,K=6"), "C", "j")
    s2 = S.interchange(s, "C", "j", "k")
    assert ("S0", "j", "parallel", False) in s2.marks
    # ... but skewing j by k (j' = j + k) makes the parallel j' loop carry the
    # k chain of one cell: S0[i, j, k] and S0[i, j, k+1] land in different j'.
    rejected("skew", S.skew, s, "C", "j", "k", 1, kind="flow", src="S0", snk="S0", carried="j")


def test_errors_are_polytile_errors():
    s = initial(jacobi1d())
    with pytest.raises(PolytileError):
        S.interchange(s, "S", "t", "i")
    with pytest.raises(polytile.ScheduleError):
        S.interchange(s, "S", "t", "nope")  # malformed, not illegal
    try:
        S.interchange(s, "S", "t", "nope")
    except IllegalSchedule:  # pragma: no cover - would be the wrong class
        pytest.fail("an unknown loop name is a ScheduleError, not an IllegalSchedule")
    except polytile.ScheduleError:
        pass
