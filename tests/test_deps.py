"""Dependence analysis (``polytile.deps.compute``) against relations derived by hand.

For each program the five relations of :class:`polytile.deps.Dependences`
are written out in isl notation, with the reasoning in a comment, and
compared with what isl's dataflow analysis computes (``is_equal`` after
restricting both sides to the statement domains, so the hand-written
relations may leave the bounds implicit).  Notation: ``a -> b`` means
instance ``a`` runs first and ``b`` must stay after it.

* flow        (RAW, memory-based): a writes a cell, b reads it later;
* flow_value  (RAW, value-based):  a is the *last* write of that cell before b reads it;
* anti        (WAR): a reads a cell, b overwrites it later;
* output      (WAW): a writes a cell, b writes it again later;
* reduction:  the subset of the above between two updates of one
  aggregation onto the same accumulator cell (reorderable).

Programs: jacobi-1d with a time loop (two statements, isl text), an in-place
2-D Gauss-Seidel sweep with a time loop (isl text), an in-place 1-D
recurrence (isl text, in two execution orders), matmul, matmul -> bias ->
relu, softmax, transpose, cumulative sum and row sum (Tile examples at small
sizes).
"""
from __future__ import annotations

from pathlib import Path

import islpy as isl
import numpy as np
import pytest

import polytile
from polytile import deps as deps_mod
from polytile.poly.from_isl import scop_from_isl

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
KINDS = ("flow", "flow_value", "anti", "output", "reduction")


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def restrict(um: isl.UnionMap, scop) -> isl.UnionMap:
    """Both ends of ``um`` inside the statement domains of ``scop``."""
    return um.intersect_domain(scop.domain).intersect_range(scop.domain)


def expect(deps, scop, **expected: str) -> None:
    """Every relation of ``deps`` equals the hand-written isl text ('{ }' for empty).

    All five kinds must be given, so no relation goes unchecked.
    """
    assert set(expected) == set(KINDS), f"give all of {KINDS}"
    for kind in KINDS:
        actual = restrict(getattr(deps, kind), scop)
        want = restrict(isl.UnionMap(expected[kind]), scop)
        assert actual.is_equal(want), (
            f"{kind} of {scop.name} differs from the hand-derived relation\n"
            f"  computed:      {actual.coalesce()}\n"
            f"  hand-derived:  {want.coalesce()}\n"
            f"  only computed: {actual.subtract(want).coalesce()}\n"
            f"  only derived:  {want.subtract(actual).coalesce()}")


def tile_scop(name: str, dims: str):
    """The Scop and dependences of an example (or Tile text) at the given sizes."""
    src = EXAMPLES / f"{name}.tile" if "{" not in name else name
    s = polytile.schedule(src, dims=dims, parallel=False)
    return s.scop, s.deps


def stmt(scop, origin: str, kind: str) -> str:
    """The statement name of the ``kind`` statement (fill/reset/contract/elementwise) of tensor ``origin``."""
    found = [s.name for s in scop.statements if s.origin == origin and s.kind == kind]
    assert len(found) == 1, f"expected one {kind} statement for {origin}: {scop.describe()}"
    return found[0]


# ---------------------------------------------------------------------------
# Scops written in isl notation
# ---------------------------------------------------------------------------

T1, N1 = 4, 9  # jacobi-1d: time steps, array length (interior 1..N1-2)


def jacobi1d(T=T1, N=N1, scale=1.0):
    """B[i] = scale*(A[i-1] + A[i] + A[i+1]) (S), then A[i] = B[i] (U), both inside one time loop t."""
    return scop_from_isl("jacobi1d", [
        {"domain": f"{{ S[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ S[t, i] -> B[i] }",
         "reads": ["{ S[t, i] -> A[i - 1] }", "{ S[t, i] -> A[i] }", "{ S[t, i] -> A[i + 1] }"], "scale": scale},
        {"domain": f"{{ U[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ U[t, i] -> A[i] }",
         "reads": ["{ U[t, i] -> B[i] }"]},
    ], {"A": ((N,), "float64"), "B": ((N,), "float64")},
        schedule="{ S[t, i] -> [t, 0, i]; U[t, i] -> [t, 1, i] }")


def test_jacobi1d_time_loop():
    scop = jacobi1d()
    d = deps_mod.compute(scop)
    last = N1 - 2
    expect(
        d, scop,
        # S[t,i] writes B[i]; U[t',i] reads B[i].  At the same t, U runs after S
        # (order [t,0,i] < [t,1,i]); at a later t' too.  U[t,i] writes A[i]; S
        # reads A[i'-1], A[i'], A[i'+1], i.e. A[i] when |i' - i| <= 1, but only
        # at a later time step (at the same t every S runs before every U).
        flow="{ S[t, i] -> U[t', i] : t' >= t; "
             "  U[t, i] -> S[t', i'] : t' > t and -1 <= i' - i <= 1 }",
        # The last write of B[i] before U[t,i] reads it is S[t,i]; the last
        # write of A[i] before S[t+1,i'] reads it is U[t,i] (the one step before).
        flow_value="{ S[t, i] -> U[t, i]; U[t, i] -> S[t + 1, i'] : -1 <= i' - i <= 1 }",
        # S[t,i] reads A[i-1..i+1], which U overwrites at the same or any later
        # step; U[t,i] reads B[i], which S overwrites only at a later step.
        anti="{ S[t, i] -> U[t', i'] : t' >= t and -1 <= i' - i <= 1; "
             "  U[t, i] -> S[t', i] : t' > t }",
        # Each statement writes its cell again at every later step.
        output="{ S[t, i] -> S[t', i] : t' > t; U[t, i] -> U[t', i] : t' > t }",
        reduction="{ }",
    )
    # Sanity of the restriction: the boundary cells 0 and N-1 are never
    # written, so nothing flows into S[t, 1] from U[t-1, 0].
    assert d.flow_value.intersect(isl.UnionMap(f"{{ U[t, i] -> S[t', i'] : i = 0 or i = {last + 1} }}")).is_empty()


def seidel2d(T=3, N=5):
    """In-place Gauss-Seidel sweep A[i,j] = A[i-1,j] + A[i,j-1] + A[i,j] + A[i+1,j] + A[i,j+1] for t."""
    return scop_from_isl("seidel2d", [
        {"domain": f"{{ S[t, i, j] : 0 <= t < {T} and 1 <= i < {N - 1} and 1 <= j < {N - 1} }}",
         "write": "{ S[t, i, j] -> A[i, j] }",
         "reads": ["{ S[t, i, j] -> A[i - 1, j] }", "{ S[t, i, j] -> A[i, j - 1] }", "{ S[t, i, j] -> A[i, j] }",
                   "{ S[t, i, j] -> A[i + 1, j] }", "{ S[t, i, j] -> A[i, j + 1] }"]},
    ], {"A": ((N, N), "float64")})


def test_seidel2d_inplace_time_loop():
    scop = seidel2d()
    d = deps_mod.compute(scop)
    # Program order is lexicographic on (t, i, j).  S[t,i,j] writes A[i,j];
    # the readers of A[i,j] are the five instances (i',j') with (i,j) in the
    # 5-point neighbourhood of (i',j') -- a symmetric set, so the same
    # neighbourhood of (i,j).  Any reader that runs later is a memory-based
    # flow; any writer of a cell S[t,i,j] read, running later, an anti
    # dependence: both are "neighbour and lexicographically later".
    later = "(t' > t or (t' = t and (i' > i or (i' = i and j' > j))))"
    near = ("((i' = i and j' = j) or (i' = i + 1 and j' = j) or (i' = i - 1 and j' = j) "
            "or (i' = i and j' = j + 1) or (i' = i and j' = j - 1))")
    # Value-based: the last writer of each read cell before S[t,i,j]:
    #   A[i-1,j], A[i,j-1]: already updated in this sweep  -> S[t, i-1, j], S[t, i, j-1]
    #   A[i,j], A[i+1,j], A[i,j+1]: not yet in this sweep  -> S[t-1, ...] of the same cell
    # (boundary cells are never written: no source, which the domain removes).
    expect(
        d, scop,
        flow=f"{{ S[t, i, j] -> S[t', i', j'] : {near} and {later} }}",
        # (written from the source's side: S[t,i,j] is the last writer for S[t,i+1,j], ...)
        flow_value="{ S[t, i, j] -> S[t, i + 1, j]; S[t, i, j] -> S[t, i, j + 1]; S[t, i, j] -> S[t + 1, i, j]; "
                   "  S[t, i, j] -> S[t + 1, i - 1, j]; S[t, i, j] -> S[t + 1, i, j - 1] }",
        anti=f"{{ S[t, i, j] -> S[t', i', j'] : {near} and {later} }}",
        output="{ S[t, i, j] -> S[t', i, j] : t' > t }",
        reduction="{ }",
    )


def recurrence(N=8, schedule=None):
    """In-place A[i] = A[i-1] + B[i] for 1 <= i < N (a loop-carried flow of distance 1)."""
    return scop_from_isl("recurrence", [
        {"domain": f"{{ S[i] : 1 <= i < {N} }}", "write": "{ S[i] -> A[i] }",
         "reads": ["{ S[i] -> A[i - 1] }", "{ S[i] -> B[i] }"]},
    ], {"A": ((N,), "float64"), "B": ((N,), "float64")}, schedule=schedule)


def test_inplace_recurrence_loop_carried_flow():
    scop = recurrence()
    d = deps_mod.compute(scop)
    # S[i] writes A[i]; the only reader of A[i] is S[i+1], which runs later:
    # flow of distance 1, memory- and value-based alike.  S[i] reads A[i-1],
    # written only by S[i-1], which ran before: no anti dependence.  Every cell
    # is written once: no output dependence.
    expect(d, scop, flow="{ S[i] -> S[i + 1] }", flow_value="{ S[i] -> S[i + 1] }",
           anti="{ }", output="{ }", reduction="{ }")
    # The relations follow the order: run backwards and the same accesses give
    # an anti dependence S[i] -> S[i-1] (S[i] reads A[i-1] before S[i-1]
    # overwrites it) and no flow at all.
    rev = recurrence(schedule="{ S[i] -> [-i] }")
    d = deps_mod.compute(rev)
    expect(d, rev, flow="{ }", flow_value="{ }", anti="{ S[i] -> S[i - 1] }", output="{ }", reduction="{ }")


# ---------------------------------------------------------------------------
# Tile programs (lowered: fill statements, reductions)
# ---------------------------------------------------------------------------


def test_matmul():
    M, N, K = 3, 4, 5
    scop, d = tile_scop("matmul", f"M={M},N={N},K={K}")
    Z, S = stmt(scop, "C", "fill"), stmt(scop, "C", "contract")
    # Z[i,j]: C[i,j] = 0, then S[i,j,k]: C[i,j] += A[i,k]*B[k,j] (reads and writes C[i,j]).
    # Memory-based: Z's write reaches every S[i,j,k]; each S[i,j,k] reaches every
    # later k' of the same cell.  Value-based: Z only reaches k = 0, and each k the next.
    # S[i,j,k] reads C[i,j] that every later k' overwrites (anti); Z and every
    # S write C[i,j] before the later updates (output).  The S -> S part of all
    # three is the reduction: the order of the additions is free.
    expect(
        d, scop,
        flow=f"{{ {Z}[i, j] -> {S}[i, j, k]; {S}[i, j, k] -> {S}[i, j, k'] : k' > k }}",
        flow_value=f"{{ {Z}[i, j] -> {S}[i, j, 0]; {S}[i, j, k] -> {S}[i, j, k + 1] }}",
        anti=f"{{ {S}[i, j, k] -> {S}[i, j, k'] : k' > k }}",
        output=f"{{ {Z}[i, j] -> {S}[i, j, k]; {S}[i, j, k] -> {S}[i, j, k'] : k' > k }}",
        reduction=f"{{ {S}[i, j, k] -> {S}[i, j, k'] : k' > k }}",
    )
    # Without reductions only the fill -> update order remains.
    want = restrict(isl.UnionMap(f"{{ {Z}[i, j] -> {S}[i, j, k] }}"), scop)
    assert restrict(d.all(include_reductions=False), scop).is_equal(want)
    assert not d.all(include_reductions=True).is_subset(want)


def test_matmul_bias_relu_chain():
    M, K, N = 3, 4, 5
    scop, d = tile_scop("matmul_bias_relu", f"M={M},K={K},N={N}")
    Z, S, E = stmt(scop, "C", "fill"), stmt(scop, "C", "contract"), stmt(scop, "Y", "elementwise")
    # As matmul for Z and S; then E[i,j]: Y[i,j] = relu(C[i,j] + B[j]) reads
    # C[i,j], written by Z[i,j] and by every S[i,j,k] (memory-based); the value
    # it sees is the last update, S[i,j,K-1].  E writes only Y: no anti/output.
    expect(
        d, scop,
        flow=f"{{ {Z}[i, j] -> {S}[i, j, k]; {S}[i, j, k] -> {S}[i, j, k'] : k' > k; "
             f"  {Z}[i, j] -> {E}[i, j]; {S}[i, j, k] -> {E}[i, j] }}",
        flow_value=f"{{ {Z}[i, j] -> {S}[i, j, 0]; {S}[i, j, k] -> {S}[i, j, k + 1]; "
                   f"  {S}[i, j, {K - 1}] -> {E}[i, j] }}",
        anti=f"{{ {S}[i, j, k] -> {S}[i, j, k'] : k' > k }}",
        output=f"{{ {Z}[i, j] -> {S}[i, j, k]; {S}[i, j, k] -> {S}[i, j, k'] : k' > k }}",
        reduction=f"{{ {S}[i, j, k] -> {S}[i, j, k'] : k' > k }}",
    )


def test_softmax_between_statements():
    M, N = 3, 4
    scop, d = tile_scop("softmax", f"M={M},N={N}")
    R0 = stmt(scop, "Mx", "reset")
    # Mx's reset to -inf reaches every cell before the max reads it: no fill statement (poly.tile).
    assert not [s for s in scop.statements if s.origin == "Mx" and s.kind == "fill"]
    S0, E1 = stmt(scop, "Mx", "contract"), stmt(scop, "E", "elementwise")
    Z2, S2 = stmt(scop, "S", "fill"), stmt(scop, "S", "contract")
    E3 = stmt(scop, "Y", "elementwise")
    # Program order: R0 (Mx = -inf, the identity of max), S0
    # (Mx[i,0] max= X[i,j]), E1 (E[i,j] = exp(X[i,j] - Mx[i,0])), Z2 (S = 0),
    # S2 (S[i,0] += E[i,j]), E3 (Y[i,j] = E[i,j] / S[i,0]).  Rows never mix.
    # Memory-based flow: every earlier writer of Mx[i,0] (R0, each S0[i,j])
    # reaches every later reader of it (S0[i,j'] for j' > j, all of E1's row);
    # likewise S[i,0] (Z2, S2) to S2 and E3's row; E[i,j] goes from E1 to S2 and E3.
    expect(
        d, scop,
        flow=f"{{ {R0}[i, 0] -> {S0}[i, j]; {R0}[i, 0] -> {E1}[i, j]; "
             f"  {S0}[i, j] -> {S0}[i, j'] : j' > j; {S0}[i, j] -> {E1}[i, j']; "
             f"  {E1}[i, j] -> {S2}[i, j]; {E1}[i, j] -> {E3}[i, j]; "
             f"  {Z2}[i, 0] -> {S2}[i, j]; {Z2}[i, 0] -> {E3}[i, j]; "
             f"  {S2}[i, j] -> {S2}[i, j'] : j' > j; {S2}[i, j] -> {E3}[i, j'] }}",
        # Value-based: the reset (not the fill) starts the max, the last column
        # of each reduction reaches the whole row of the consumer.
        flow_value=f"{{ {R0}[i, 0] -> {S0}[i, 0]; {S0}[i, j] -> {S0}[i, j + 1]; {S0}[i, {N - 1}] -> {E1}[i, j]; "
                   f"  {E1}[i, j] -> {S2}[i, j]; {E1}[i, j] -> {E3}[i, j]; "
                   f"  {Z2}[i, 0] -> {S2}[i, 0]; {S2}[i, j] -> {S2}[i, j + 1]; {S2}[i, {N - 1}] -> {E3}[i, j] }}",
        # Only the reductions read a cell that is overwritten later (by themselves).
        anti=f"{{ {S0}[i, j] -> {S0}[i, j'] : j' > j; {S2}[i, j] -> {S2}[i, j'] : j' > j }}",
        output=f"{{ {R0}[i, 0] -> {S0}[i, j]; "
               f"  {S0}[i, j] -> {S0}[i, j'] : j' > j; "
               f"  {Z2}[i, 0] -> {S2}[i, j]; {S2}[i, j] -> {S2}[i, j'] : j' > j }}",
        reduction=f"{{ {S0}[i, j] -> {S0}[i, j'] : j' > j; {S2}[i, j] -> {S2}[i, j'] : j' > j }}",
    )


def test_transpose_has_no_self_dependences():
    M, N = 3, 4
    scop, d = tile_scop("transpose", f"M={M},N={N}")
    S = stmt(scop, "O", "contract")
    # S[j,i]: O[j,i] = I[i,j] reads only the input and writes every cell once, so no fill of O
    # precedes it (poly.tile): no dependence at all.
    assert [s.name for s in scop.statements] == [S]
    expect(d, scop, flow="{ }", flow_value="{ }", anti="{ }", output="{ }", reduction="{ }")
    self_pairs = isl.UnionMap(f"{{ {S}[a, b] -> {S}[c, e] }}")
    for kind in KINDS:
        assert getattr(d, kind).intersect(self_pairs).is_empty(), kind


def test_trmv_triangular():
    N = 5
    scop, d = tile_scop("trmv", f"N={N}")
    Z, S = stmt(scop, "Y", "fill"), stmt(scop, "Y", "contract")
    # S[i,k]: Y[i] += L[i,k] * X[k] on the triangle 0 <= k <= i < N.  Like matmul along
    # k, but each row has i + 1 updates: Z[i] -> S[i,0] (value-based),
    # S[i,k] -> S[i,k+1] while k + 1 <= i.
    assert scop.statement(S).domain.is_equal(isl.Set(f"{{ {S}[i, k] : 0 <= k <= i < {N} }}"))
    expect(
        d, scop,
        flow=f"{{ {Z}[i] -> {S}[i, k]; {S}[i, k] -> {S}[i, k'] : k' > k }}",
        flow_value=f"{{ {Z}[i] -> {S}[i, 0]; {S}[i, k] -> {S}[i, k + 1] }}",
        anti=f"{{ {S}[i, k] -> {S}[i, k'] : k' > k }}",
        output=f"{{ {Z}[i] -> {S}[i, k]; {S}[i, k] -> {S}[i, k'] : k' > k }}",
        reduction=f"{{ {S}[i, k] -> {S}[i, k'] : k' > k }}",
    )


def test_cumsum_carries_each_cell_from_the_previous_one():
    # The same triangle summing I[k] (no i in the value) is a recurrence (poly.scan): the first cell sums
    # its one point, every later cell adds its one new term to the previous cell, which it reads.
    N = 5
    scop, d = tile_scop("cumsum", f"N={N}")
    S, C = [s.name for s in scop.statements if s.kind == "contract"]
    assert scop.statement(S).domain.is_equal(isl.Set(f"{{ {S}[0, 0] }}"))
    assert scop.statement(C).domain.is_equal(isl.Set(f"{{ {C}[i, i] : 1 <= i < {N} }}"))
    flow = d.flow_value
    assert isl.UnionMap(f"{{ {S}[0, 0] -> {C}[1, 1]; {C}[i, i] -> {C}[i + 1, i + 1] : 1 <= i < {N - 1} }}") \
        .is_subset(flow)


def test_row_sum():
    M, N = 3, 4
    scop, d = tile_scop("row_sum", f"M={M},N={N}")
    Z, S = stmt(scop, "O", "fill"), stmt(scop, "O", "contract")
    # O[i] += I[i,j]: one accumulator per row, reduction along j only; rows independent.
    expect(
        d, scop,
        flow=f"{{ {Z}[i] -> {S}[i, j]; {S}[i, j] -> {S}[i, j'] : j' > j }}",
        flow_value=f"{{ {Z}[i] -> {S}[i, 0]; {S}[i, j] -> {S}[i, j + 1] }}",
        anti=f"{{ {S}[i, j] -> {S}[i, j'] : j' > j }}",
        output=f"{{ {Z}[i] -> {S}[i, j]; {S}[i, j] -> {S}[i, j'] : j' > j }}",
        reduction=f"{{ {S}[i, j] -> {S}[i, j'] : j' > j }}",
    )


def test_deps_follow_the_given_schedule():
    """compute(scop, schedule) uses the schedule it is given, not the Scop's own order."""
    M, N, K = 2, 3, 4
    scop, d = tile_scop("matmul", f"M={M},N={N},K={K}")
    Z, S = stmt(scop, "C", "fill"), stmt(scop, "C", "contract")
    # Run k downwards: the value-based chain reverses, the fill still comes first.
    rev = isl.UnionMap(f"{{ {Z}[i, j] -> [0, i, j, 0]; {S}[i, j, k] -> [1, i, j, -k] }}")
    tree = isl.Schedule.from_domain(scop.domain).insert_partial_schedule(
        isl.MultiUnionPwAff.from_union_map(rev.intersect_domain(scop.domain)))
    d2 = deps_mod.compute(scop, tree)
    expect(
        d2, scop,
        flow=f"{{ {Z}[i, j] -> {S}[i, j, k]; {S}[i, j, k] -> {S}[i, j, k'] : k' < k }}",
        flow_value=f"{{ {Z}[i, j] -> {S}[i, j, {K - 1}]; {S}[i, j, k] -> {S}[i, j, k - 1] }}",
        anti=f"{{ {S}[i, j, k] -> {S}[i, j, k'] : k' < k }}",
        output=f"{{ {Z}[i, j] -> {S}[i, j, k]; {S}[i, j, k] -> {S}[i, j, k'] : k' < k }}",
        reduction=f"{{ {S}[i, j, k] -> {S}[i, j, k'] : k' < k }}",
    )


def test_describe_names_every_relation():
    scop = jacobi1d()
    text = deps_mod.compute(scop).describe()
    for head in ("flow (RAW, memory-based)", "flow (RAW, value-based)", "anti (WAR)", "output (WAW)", "reduction"):
        assert head in text
    assert "U[" in text and "S[" in text


@pytest.mark.parametrize("name, dims, fill", [
    ("transpose", "M=3,N=4", False),         # '=' reaching every cell: the fill was a dead pass
    ("upsample2x", "H=3,W=5", False),
    ("row_max", "M=4,N=6", False),           # the reset to -inf reaches every cell first
    ("row_sum", "M=4,N=6", True),            # '+': the fill is the start of the sum
    ("stencil2d", "B=1,H=6,W=7", True),      # the border is never reached: it stays 0
    ("slice_update", "M=6,N=5,R=2,C=3", True),  # cells outside the slice keep the default
])
def test_fill_only_where_a_cell_could_keep_it(name, dims, fill):
    scop, _ = tile_scop(name, dims)
    fills = [s for s in scop.statements if s.kind == "fill"]
    assert bool(fills) == fill, [s.name for s in scop.statements]
    path = str(EXAMPLES / f"{name}.tile")
    prog = polytile.load_program(path)
    shapes = polytile.shapes_from_dims(prog, polytile.parse_dims(dims))
    rng = np.random.default_rng(1)
    arrays = [rng.integers(-5, 6, s).astype(np.float32) for s in shapes]
    got = polytile.compile(path)(*arrays)
    want = polytile.reference(path, *arrays)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, w)
