"""poly.scan: a prefix contraction (a cumsum written as a triangle) as a recurrence, each cell from the previous
one -- linear instead of quadratic work, the same results as the oracle, and the bits of a sequential sum."""
from __future__ import annotations

import numpy as np
import pytest

import polytile
from polytile.frontends.tile import parse

CUMSUM = "function (I[N]) -> (O) { O[i : N] = +(I[k]), i - k < N; }"
CARRIED = {
    "cumsum": (CUMSUM, [(37,)]),
    "cumprod": ("function (I[N]) -> (O) { O[i : N] = *(I[k]), i - k < N; }", [(9,)]),
    "rows": ("function (I[B, N]) -> (O) { O[b, i : B, N] = +(I[b, k]), i - k < N; }", [(3, 21)]),
    "columns": ("function (I[N, C]) -> (O) { O[i, c : N, C] = +(I[k, c]), i - k < N; }", [(19, 5)]),
    "exclusive": ("function (I[N]) -> (O) { O[i : N] = +(I[k]), i - k - 1 < N - 1; }", [(23,)]),
    "squares": ("function (I[N]) -> (O) { O[i : N] = +(I[k] * I[k]), i - k < N; }", [(30,)]),
    # PlaidML 0.7.0's CumulativeSum / CumulativeProd count the term back from the cell (k' = i - k)
    "plaidml": ("function (I[N]) -> (O) { O[i : N] = +(I[i - k]), k < N; }", [(12,)]),
    "plaidml_prod_ax1": ("function (I[B, N]) -> (O) { O[b, i : B, N] = *(I[b, i - k]), k < N; }", [(4, 11)]),
    "plaidml_ax0": ("function (I[N, C]) -> (O) { O[i, c : N, C] = +(I[i - k, c]), k < N; }", [(13, 3)]),
    # sums from the right: the scan axis runs down (i' = N - 1 - i), the new term is the cell's first
    "reversed": ("function (I[N]) -> (O) { O[i : N] = +(I[k]), k - i < N; }", [(12,)]),
    "reversed_plaidml": ("function (I[N]) -> (O) { O[i : N] = +(I[i + k]), k < N; }", [(12,)]),
    "even": ("function (I[M], J[N]) -> (O) { O[i : N] = +(I[2 * i - 2 * k]), k < N; }", [(50,), (25,)]),
}
KEPT = {
    # a window of three (each cell loses a term as it gains one), a causal convolution (its weights read k),
    # a max, a prefix capped at the end (the last cells gain nothing), two reduction loops, a default,
    # a term read at two offsets of i
    "window": ("function (I[N]) -> (O) { O[i : N] = +(I[i + j - 1]), j < 3; }", [(12,)]),
    "causal": ("function (I[N], W[N]) -> (O) { O[i : N] = +(I[i - k] * W[k]), k < N; }", [(12,), (12,)]),
    "max": ("function (I[N]) -> (O) { O[i : N] = >(I[k]), i - k < N; }", [(12,)]),
    "capped": ("function (I[N]) -> (O) { O[i : N] = +(I[k]), i - k + 2 < N + 2; }", [(12,)]),
    "two_loops": ("function (A[N, K], B[K]) -> (O) { O[i : N] = +(A[k, j] * B[j]), i - k < N; }", [(12, 4), (4,)]),
    "default": ("function (I[N], D[N]) -> (O) { O[i : N] = +(I[k]), i - k < N default D; }", [(12,), (12,)]),
    "two_offsets": ("function (I[N]) -> (O) { O[i : N] = +(I[i - k] * I[k]), k < N; }", [(12,)]),
}


def _statements(src, shapes):
    s = polytile.schedule(src, shapes=dict(zip(parse(src).input_names, shapes)))
    return [st.name for st in s.scop.statements if st.kind == "contract"]


@pytest.mark.parametrize("name", sorted(CARRIED))
def test_prefix_contractions_carry_the_previous_cell(name):
    src, shapes = CARRIED[name]
    assert _statements(src, shapes) == ["S0", "S0c"]


@pytest.mark.parametrize("name", sorted(KEPT))
def test_other_contractions_keep_their_statement(name):
    src, shapes = KEPT[name]
    assert _statements(src, shapes) == ["S0"]


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int8", "uint16"])
@pytest.mark.parametrize("name", sorted(CARRIED) + sorted(KEPT))
def test_the_results_are_the_oracles(name, dtype, target):
    src, shapes = {**CARRIED, **KEPT}[name]
    rng = np.random.default_rng(7)
    for n in (1, 2, None):  # one and two cells (no carried cell; one), then the table's sizes
        sized = shapes if n is None else [tuple(n if d == shapes[0][0] else d for d in s) for s in shapes]
        if name in ("two_loops",) and n is not None:
            sized = [(n, 4), (4,)]
        args = [rng.integers(-3, 4, s).astype(dtype) for s in sized]
        got = polytile.compile(src, target=target)(*args)
        np.testing.assert_array_equal(got, polytile.reference(src, *args))


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("name", ["cumsum", "plaidml", "reversed", "reversed_plaidml"])
def test_a_float_cumsum_has_the_bits_of_a_sequential_sum(name, target):
    # numpy's cumsum adds left to right in the element type: the recurrence's association exactly
    # (from the right for the reversed sums; PlaidML's form is summed from the first element, not from i).
    X = np.random.default_rng(3).standard_normal(5000).astype(np.float32)
    want = np.cumsum(X[::-1])[::-1] if name.startswith("reversed") else np.cumsum(X)
    np.testing.assert_array_equal(polytile.compile(CARRIED[name][0], target=target)(X), want)


def test_the_cumsum_is_one_loop_not_a_triangle():
    text = polytile.compile(CUMSUM).source(shapes=[(100000,)])
    body = text[text.index("\nint pt_kernel("):text.index("\nint pt_spread(")]
    assert body.count("for (") == 2  # the zeroing and the recurrence; the triangle had a loop inside a loop
    assert "O[(i - 1)]" in body


@pytest.mark.parametrize("name", ["cumsum", "reversed_plaidml"])
def test_a_schedule_of_the_recurrence_replays_where_it_has_one_cell(name):
    # At one element there is nothing to carry; the carried statement is kept, empty, so a step
    # made at another size that names it still means something (it did not exist before).
    from polytile import pipeline
    from polytile import scheduling as S
    src = CARRIED[name][0]
    big = polytile.schedule(src, shapes={"I": (5,)}, parallel=False)
    steps = S.TRANSFORMS["split"](big, "S0c", "i", 2).steps
    one = polytile.schedule(src, shapes={"I": (1,)}, parallel=False)
    assert [st.name for st in one.scop.statements if st.kind == "contract"] == ["S0", "S0c"]
    assert one.scop.statement("S0c").domain.is_empty()
    cur = pipeline.replay(one.scop, one.deps, steps[:1])
    for step in steps[1:]:
        cur = S.apply_step(cur, step)
    X = np.array([2.5], np.float32)
    np.testing.assert_array_equal(polytile.compile(src, schedule=cur)(X), X)
