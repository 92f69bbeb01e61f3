"""Property tests: random sequences of schedule steps are either refused or correct.

Hypothesis draws a program (Tile examples and isl-text stencils at small
sizes) and a sequence of 1-5 steps, each a random transformation
(interchange, reorder, tile, split, skew, reverse, shift, fuse, distribute,
parallel, vectorize, unroll) with random statements, loops, sizes and
factors drawn from the schedule as it is at that point.  For every step:

* it succeeds, or raises a :class:`~polytile.PolytileError` of the schedule
  family (``IllegalSchedule`` or ``ScheduleError``); anything else fails;
* a brute-force legality check, written here from the definitions and
  independent of isl's dependence analysis (every pair of statement
  instances touching one cell, at least one writing, must keep its order;
  a parallel/simd loop may not separate such a pair within one iteration of
  its outer loops), agrees with the outcome: a step that succeeded is legal,
  and a step refused with ``IllegalSchedule`` is illegal (the rejected
  schedule is rebuilt with the check switched off and judged);
* an ``IllegalSchedule`` message names the transformation and says which
  iteration "must run before" which;
* after every successful step the compiled kernel gives exactly the
  oracle's result (``polytile.reference`` or ``from_isl.execute``) on
  integer-valued float64 inputs.
"""
from __future__ import annotations

import re

from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Tuple
from unittest import mock

import islpy as isl
import numpy as np
import pytest

from hypothesis import event, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import polytile  # noqa: E402
from polytile import IllegalSchedule, ScheduleError, pipeline  # noqa: E402
from polytile import deps as deps_mod  # noqa: E402
from polytile import scheduling as S  # noqa: E402
from polytile.poly.from_isl import execute, scop_from_isl  # noqa: E402

from numpy_programs import example_cases, example_paths  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

OPS = ("interchange", "reorder", "tile", "split", "skew", "reverse", "shift", "fuse", "distribute",
       "parallel", "vectorize", "unroll")

# Exact programs only (no transcendental builtins, no division): results must be equal.
TILE_CASES = (
    ("matmul", "M=3,N=4,K=3"),
    ("matmul_bias_relu", "M=3,K=2,N=4"),
    ("cumsum", "N=5"),
    ("trmv", "N=5"),
    ("suffix_sum", "N=6"),
    ("row_max", "M=3,N=4"),
    ("transpose", "M=3,N=4"),
    ("conv1d", "N=2,L=5,CI=2,KW=2,CO=2"),
    ("gemm", "M=2,K=3,N=3"),
    ("stencil2d", "B=2,H=4,W=4"),
)


# ---------------------------------------------------------------------------
# isl-text Scops (scale 1/2 keeps every value exact)
# ---------------------------------------------------------------------------


def _jacobi1d():
    T, N = 3, 7
    return scop_from_isl("pjacobi1d", [
        {"domain": f"{{ S[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ S[t, i] -> B[i] }",
         "reads": ["{ S[t, i] -> A[i - 1] }", "{ S[t, i] -> A[i] }", "{ S[t, i] -> A[i + 1] }"], "scale": 0.5},
        {"domain": f"{{ U[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ U[t, i] -> A[i] }",
         "reads": ["{ U[t, i] -> B[i] }"]},
    ], {"A": ((N,), "float64"), "B": ((N,), "float64")},
        schedule="{ S[t, i] -> [t, 0, i]; U[t, i] -> [t, 1, i] }")


def _seidel2d():
    T, N = 2, 5
    return scop_from_isl("pseidel2d", [
        {"domain": f"{{ S[t, i, j] : 0 <= t < {T} and 1 <= i < {N - 1} and 1 <= j < {N - 1} }}",
         "write": "{ S[t, i, j] -> A[i, j] }",
         "reads": [f"{{ S[t, i, j] -> A[{a}, {b}] }}" for a, b in
                   [("i - 1", "j"), ("i", "j - 1"), ("i", "j"), ("i + 1", "j"), ("i", "j + 1")]],
         "scale": 0.5},
    ], {"A": ((N, N), "float64")})


def _recurrence():
    # Two statements: a loop-carried recurrence, then a consumer of its result.
    N = 6
    return scop_from_isl("precurrence", [
        {"domain": f"{{ S[i] : 1 <= i < {N} }}", "write": "{ S[i] -> A[i] }",
         "reads": ["{ S[i] -> A[i - 1] }", "{ S[i] -> B[i] }"]},
        {"domain": f"{{ T[i, j] : 0 <= i < {N} and 0 <= j < 3 }}", "write": "{ T[i, j] -> C[i, j] }",
         "reads": ["{ T[i, j] -> A[i] }", "{ T[i, j] -> B[j] }"]},
    ], {"A": ((N,), "float64"), "B": ((N,), "float64"), "C": ((N, 3), "float64")})


ISL_CASES = {"jacobi1d": _jacobi1d, "seidel2d": _seidel2d, "recurrence": _recurrence}


@lru_cache(maxsize=None)
def tile_base(name: str, dims: str) -> S.Schedule:
    return polytile.schedule(EXAMPLES / f"{name}.tile", dims=dims, parallel=False)


@lru_cache(maxsize=None)
def isl_base(name: str) -> S.Schedule:
    scop = ISL_CASES[name]()
    return S.initial(scop, deps_mod.compute(scop))


# ---------------------------------------------------------------------------
# brute-force legality, from the definitions
# ---------------------------------------------------------------------------

Instance = Tuple[str, Tuple[int, ...]]


def _points(m: isl.Map) -> List[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """All (input, output) integer pairs of a finite map."""
    n_in, n_out = m.dim(isl.dim_type.in_), m.dim(isl.dim_type.out)
    out = []

    def add(pt):
        v = [int(pt.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(n_in + n_out)]
        out.append((tuple(v[:n_in]), tuple(v[n_in:])))

    m.wrap().foreach_point(add)
    return out


def _maps(um: isl.UnionMap) -> List[isl.Map]:
    out: List[isl.Map] = []
    um.foreach_map(out.append)
    return out


@lru_cache(maxsize=None)
def conflicts(scop) -> List[Tuple[Instance, Instance, bool]]:
    """Every (earlier, later, is_reduction_pair) of instances touching one cell, one of them writing.

    "Earlier" is the Scop's original execution order.  A reduction pair is
    two updates of one aggregation statement on its own accumulator cell.
    """
    orig: Dict[Instance, Tuple[int, ...]] = {}
    for m in _maps(scop.schedule.get_map().intersect_domain(scop.domain)):
        name = m.get_tuple_name(isl.dim_type.in_)
        for x, t in _points(m):
            orig[(name, x)] = t
    touch: Dict[Tuple[str, Tuple[int, ...]], List[Tuple[Instance, bool]]] = defaultdict(list)
    for um, is_write in ((scop.reads, False), (scop.may_writes, True)):
        for m in _maps(um):
            name, arr = m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)
            for x, cell in _points(m):
                touch[(arr, cell)].append(((name, x), is_write))
    reduction = {s.name for s in scop.statements if s.is_reduction}
    written_cell = {}
    for s in scop.statements:
        if s.is_reduction:
            for x, cell in _points(s.write_map()):
                written_cell[(s.name, x)] = (s.body.array, cell)
    pairs = set()
    for key, acc in touch.items():
        for a, wa in acc:
            for b, wb in acc:
                if a == b or not (wa or wb):
                    continue
                first, second = (a, b) if orig[a] < orig[b] else (b, a)
                red = (first[0] == second[0] and first[0] in reduction
                       and written_cell[first] == key and written_cell[second] == key)
                pairs.add((first, second, red))
    # A pair can conflict through a reduction cell and through another cell too:
    # it is a reduction pair only if every conflict is.
    merged: Dict[Tuple[Instance, Instance], bool] = {}
    for a, b, red in pairs:
        merged[(a, b)] = merged.get((a, b), True) and red
    return [(a, b, red) for (a, b), red in merged.items()]


def times(s: S.Schedule) -> Dict[Instance, Tuple[int, ...]]:
    out = {}
    for name, ss in s.stmts:
        for x, t in _points(ss.map.intersect_domain(s.scop.statement(name).domain)):
            out[(name, x)] = t
    return out


def brute_force_violation(s: S.Schedule) -> str:
    """'' if ``s`` is legal by enumeration, else a description of one violated pair."""
    th = times(s)
    for a, b, red in conflicts(s.scop):
        if not red and not th[a] < th[b]:
            return f"order: {a} at {th[a]} must run before {b} at {th[b]}"
    some_time: Dict[str, Tuple[int, ...]] = {}  # any instance's time: its β (even) positions are constants
    for (name, _), t in th.items():
        some_time.setdefault(name, t)
    for stmt, loop, kind, arg in s.marks:
        if kind not in (S.PARALLEL, S.SIMD):
            continue
        d = s.loop_dim(stmt, loop)
        # The marked loop is shared by the statements with the same β values outside it.
        group = {name for name, t in some_time.items() if t[0:d:2] == some_time[stmt][0:d:2]}
        red_ok = kind == S.PARALLEL and bool(arg) and s.parallel_reductions
        for a, b, red in conflicts(s.scop):
            if a[0] not in group or b[0] not in group or (red and red_ok):
                continue
            if th[a][:d] == th[b][:d] and th[a][d] != th[b][d]:
                return f"{kind} loop {loop!r} of {stmt} separates {a} and {b}"
    return ""


# ---------------------------------------------------------------------------
# running and comparing
# ---------------------------------------------------------------------------


def check_tile_result(s: S.Schedule, name: str, dims: str, target: str = "openmp") -> None:
    path = EXAMPLES / f"{name}.tile"
    k = polytile.compile(path, schedule=s, target=target)
    prog = k.program
    shapes = polytile.shapes_from_dims(prog, pipeline.parse_dims(dims))
    rng = np.random.default_rng(len(s.steps))
    ins = [rng.integers(-4, 5, size=sh).astype(np.float64) for sh in shapes]
    out, ref = k(*ins), polytile.reference(path, *ins)
    out, ref = (out if isinstance(out, tuple) else (out,)), (ref if isinstance(ref, tuple) else (ref,))
    for o, r in zip(out, ref):
        np.testing.assert_array_equal(o, r, err_msg=f"{name} with {[str(x) for x in s.steps]}")


def check_isl_result(s: S.Schedule, target: str = "openmp") -> None:
    rng = np.random.default_rng(len(s.steps))
    arrays = {a.name: rng.integers(-4, 5, size=a.shape).astype(a.dtype) for a in s.scop.arrays}
    want = execute(s.scop, arrays)
    got = pipeline.run_scop(pipeline.build_scop(s.scop, s, target=target), arrays)
    for a in s.scop.arrays:
        np.testing.assert_array_equal(got[a.name], want[a.name], err_msg=f"{a.name} with {[str(x) for x in s.steps]}")


# ---------------------------------------------------------------------------
# drawing steps
# ---------------------------------------------------------------------------

OTHER_NAMES = ("i", "j", "k", "t", "zz")


def draw_step(data, s: S.Schedule, ops=OPS) -> Tuple[str, tuple, dict]:
    op = data.draw(st.sampled_from(ops), label="op")
    names = [n for n, _ in s.stmts]
    stmt = data.draw(st.sampled_from(names), label="stmt")
    loops = s.loop_names(stmt)
    loop_st = st.sampled_from(loops) if loops else st.sampled_from(OTHER_NAMES)
    loop = data.draw(loop_st, label="loop")
    if op == "interchange":
        return op, (stmt, loop, data.draw(loop_st, label="b")), {}
    if op == "reorder":
        if not loops:
            return op, (stmt, [loop]), {}
        sub = data.draw(st.lists(st.sampled_from(loops), min_size=1, max_size=len(loops), unique=True), label="order")
        return op, (stmt, data.draw(st.permutations(sub), label="perm")), {}
    if op == "tile":
        chosen = data.draw(st.lists(loop_st, min_size=1, max_size=3, unique=True), label="tiled")
        size = st.integers(1, 6)
        sizes = {l: data.draw(st.one_of(size, st.lists(size, min_size=2, max_size=2)), label=f"size {l}")
                 for l in chosen}
        return op, (stmt, sizes), {}
    if op == "split":
        return op, (stmt, loop, data.draw(st.integers(1, 5), label="factor")), {}
    if op == "skew":
        return op, (stmt, loop, data.draw(loop_st, label="by"), data.draw(st.integers(-2, 2), label="factor")), {}
    if op == "reverse":
        return op, (stmt, loop), {}
    if op == "shift":
        return op, (stmt, loop, data.draw(st.integers(-3, 3), label="amount")), {}
    if op == "fuse":
        other = data.draw(st.sampled_from(names), label="b")
        # Mostly a depth both nests have (fusions that can work), sometimes anything.
        common = max(1, min(len(loops), len(s.loop_names(other))))
        depth = data.draw(st.one_of(st.integers(1, common), st.integers(1, common), st.none(), st.integers(0, 4)),
                          label="depth")
        return op, (stmt, other, depth), {"before": data.draw(st.booleans(), label="before")}
    if op == "distribute":
        return op, (stmt, data.draw(st.integers(0, max(0, len(loops) - 1)), label="depth")), {}
    if op == "parallel":
        return op, (stmt, loop), {"reduction": data.draw(st.booleans(), label="reduction")}
    if op == "vectorize":
        return op, (stmt, loop), {}
    assert op == "unroll"
    return op, (stmt, loop, data.draw(st.integers(1, 8), label="factor")), {}


def apply_random_steps(data, s: S.Schedule, check_result, ops=OPS) -> S.Schedule:
    n = data.draw(st.integers(1, 5), label="steps")
    compiled = set()
    for _ in range(n):
        op, args, kw = draw_step(data, s, ops)
        fn = S.TRANSFORMS[op]
        note(f"{op}{args} {kw}")
        try:
            new = fn(s, *args, **kw)
        except IllegalSchedule as e:
            msg = str(e)
            assert msg.startswith(f"{op}("), f"message does not name {op}: {msg}"
            with mock.patch.object(S.Schedule, "check", lambda self, what, since=None: self):
                bad = fn(s, *args, **kw)
            simd = re.search(r"simd loop '(\w+)' of (\w+) would no longer be innermost", msg)
            if simd:  # a mark the step would break, not an order: check the claim itself
                loop, stmt = simd.groups()
                dim = bad.loop_dim(stmt, loop)
                assert [n for d, n in bad.table[stmt].loops() if d > dim], f"simd loop is still innermost: {msg}"
                event(f"{op}: breaks a simd mark")
                continue
            assert "must run before" in msg, msg
            why = brute_force_violation(bad)
            assert why, f"legal step refused: {op}{args} {kw}\n  steps so far: {[str(x) for x in s.steps]}\n  {msg}"
            event(f"{op}: illegal")
            continue
        except ScheduleError:
            event(f"{op}: malformed")
            continue  # a malformed request (unknown loop, bad depth, ...): refused cleanly
        event(f"{op}: applied")
        why = brute_force_violation(new)
        assert not why, f"illegal step accepted: {op}{args} {kw}\n  steps: {[str(x) for x in new.steps]}\n  {why}"
        s = new
        key = s.tree_text()
        if key not in compiled:  # identical trees give identical kernels
            compiled.add(key)
            check_result(s)
    return s


# ---------------------------------------------------------------------------
# the properties
# ---------------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=60)
@given(data=st.data())
def test_random_steps_on_tile_examples(data):
    name, dims = data.draw(st.sampled_from(TILE_CASES), label="program")
    apply_random_steps(data, tile_base(name, dims), lambda s: check_tile_result(s, name, dims))


@settings(max_examples=60)
@given(data=st.data())
def test_random_steps_on_isl_scops(data):
    name = data.draw(st.sampled_from(sorted(ISL_CASES)), label="program")
    apply_random_steps(data, isl_base(name), check_isl_result)


@settings(max_examples=25)
@given(data=st.data())
def test_random_steps_on_tile_examples_llvm(data):
    """The same random steps, compiled by the llvm target (LLVM IR, JIT): the oracle's results."""
    name, dims = data.draw(st.sampled_from(TILE_CASES), label="program")
    apply_random_steps(data, tile_base(name, dims), lambda s: check_tile_result(s, name, dims, "llvm"))


@settings(max_examples=25)
@given(data=st.data())
def test_random_steps_on_isl_scops_llvm(data):
    name = data.draw(st.sampled_from(sorted(ISL_CASES)), label="program")
    apply_random_steps(data, isl_base(name), lambda s: check_isl_result(s, "llvm"))


@pytest.mark.slow
@settings(max_examples=30)
@given(data=st.data())
def test_random_steps_on_isl_scheduler_output(data):
    # The same, starting from isl's schedule (other loop names, fused nests).
    name, dims = data.draw(st.sampled_from(TILE_CASES[:4]), label="program")
    fusion = data.draw(st.sampled_from(S.FUSION), label="fusion")
    base = tile_base(name, dims)
    s = S.automatic(base.scop, base.deps, fusion).with_(meta=base.meta)
    apply_random_steps(data, s, lambda s2: check_tile_result(s2, name, dims))


# Other sizes for replaying the steps: awkward extents, and size-1 dimensions.
OTHER_DIMS = {
    "matmul": ("M=5,N=2,K=7", "M=1,N=6,K=2", "M=4,N=3,K=1"),
    "matmul_bias_relu": ("M=5,K=3,N=2", "M=1,K=4,N=3"),
    "cumsum": ("N=9", "N=1"),
    "suffix_sum": ("N=9", "N=1"),
    "trmv": ("N=9", "N=1"),
    "row_max": ("M=6,N=2", "M=2,N=1"),
    "transpose": ("M=1,N=5", "M=6,N=2"),
    "conv1d": ("N=1,L=7,CI=3,KW=3,CO=2", "N=3,L=3,CI=1,KW=1,CO=4"),
    "gemm": ("M=4,K=1,N=2", "M=1,K=5,N=6"),
    "stencil2d": ("B=1,H=5,W=6", "B=3,H=3,W=3"),
}


@pytest.mark.slow
@settings(max_examples=30)
@given(data=st.data())
def test_random_steps_replayed_on_other_shapes(data):
    """A schedule's steps, compiled for other sizes, give the oracle's result (or hit a real violation there)."""
    name, dims = data.draw(st.sampled_from(TILE_CASES), label="program")
    s = apply_random_steps(data, tile_base(name, dims), lambda s: None)
    other = data.draw(st.sampled_from(OTHER_DIMS[name]), label="other dims")
    # Replay step by step at the other sizes; a refusal there must be a real
    # violation at those sizes (dependences differ with the extents).
    there = tile_base(name, other)
    cur = pipeline.replay(there.scop, there.deps, s.steps[:1])
    for step in s.steps[1:]:
        try:
            cur = S.apply_step(cur, step)
        except IllegalSchedule:
            with mock.patch.object(S.Schedule, "check", lambda self, what, since=None: self):
                bad = S.apply_step(cur, step)
            assert brute_force_violation(bad), f"{step} refused at {other} but legal there"
            event("replay refused: IllegalSchedule")
            return
        except ScheduleError as e:  # not a legality question: the step must mean the same at every size
            raise AssertionError(f"{step} cannot be replayed at {other}: {e}\n"
                                 f"  steps (made at {dims}): {[str(x) for x in s.steps]}") from None
    check_tile_result(s, name, other)


# Producer-consumer programs, with fusion drawn four times as often as the rest.
FUSION_CASES = (("matmul_bias_relu", "M=3,K=2,N=4"), ("gemm", "M=2,K=3,N=3"), ("stencil2d", "B=2,H=4,W=4"))
FUSE_HEAVY = OPS + ("fuse",) * 3 * len(OPS) + ("distribute",) * len(OPS)


@pytest.mark.slow
@settings(max_examples=40)
@given(data=st.data())
def test_random_fusions_and_steps(data):
    name, dims = data.draw(st.sampled_from(FUSION_CASES + (("jacobi1d", ""),)), label="program")
    if name == "jacobi1d":
        apply_random_steps(data, isl_base(name), check_isl_result, FUSE_HEAVY)
    else:
        apply_random_steps(data, tile_base(name, dims), lambda s: check_tile_result(s, name, dims), FUSE_HEAVY)


# ---------------------------------------------------------------------------
# the brute-force checker itself
# ---------------------------------------------------------------------------


def test_brute_force_checker_sees_known_violations():
    """Without this, a checker that accepts everything would make the properties vacuous."""
    base = isl_base("jacobi1d")
    assert brute_force_violation(base) == ""
    with mock.patch.object(S.Schedule, "check", lambda self, what, since=None: self):
        swapped = S.interchange(base, "S", "t", "i")
        par = S.parallel(base, "S", "t")
        mm = tile_base("matmul", "M=3,N=4,K=3")
        red = S.parallel(S.reorder(mm, "C", ["k", "i", "j"]), "C", "k")
        red_ok = S.parallel(S.reorder(mm, "C", ["k", "i", "j"]), "C", "k", reduction=True)
        red_no_target = S.parallel(S.reorder(mm, "C", ["k", "i", "j"]).with_(parallel_reductions=False),
                                   "C", "k", reduction=True)
    assert brute_force_violation(swapped).startswith("order")
    assert brute_force_violation(par).startswith("parallel")
    assert brute_force_violation(red).startswith("parallel")
    assert brute_force_violation(red_ok) == ""
    assert brute_force_violation(red_no_target).startswith("parallel")
    # Reversing k only reorders a reduction: legal; reversing the fill/update order is not.
    assert brute_force_violation(S.reverse(mm, "C", "k")) == ""
    with mock.patch.object(S.Schedule, "check", lambda self, what, since=None: self):
        late_fill = S.fuse(mm, "S0", "Z0", 2)
    assert brute_force_violation(late_fill).startswith("order")


def _small_cases():
    out = []
    for p in example_paths():
        case = min(example_cases(p), key=lambda c: sum(int(np.prod(sh)) for sh in c["shapes"]))
        dims = ",".join(f"{k}={min(v, 4)}" for k, v in case["dims"].items())
        out.append(pytest.param(p, dims, case["named_shapes"], id=p.stem))
    return out


@pytest.mark.parametrize("path,dims,shapes", _small_cases())
def test_default_and_isl_schedules_legal_by_brute_force(path, dims, shapes):
    """Program order and isl's schedules, with auto_parallel's marks, pass the enumeration check."""
    for fusion in (None,) + S.FUSION:
        s = polytile.schedule(path, dims=dims, shapes=shapes, fusion=fusion)  # parallel=True: marks outer loops
        assert brute_force_violation(s) == "", f"{path.stem} fusion={fusion}: {brute_force_violation(s)}"
