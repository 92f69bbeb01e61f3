"""Interleaved chains in ``polytile opt`` (:mod:`polytile.c_optimiser.chains`).

A statement whose innermost loop carries its own value (a recurrence, a chain
of divides) inside a loop whose iterations are independent gets that loop
strip-mined and its point loop moved innermost, so several chains advance per
step.  Outputs must stay bitwise the original's (built alike, run on random
inputs); a loop that carries a dependence is never used.
"""
from __future__ import annotations

import re

import pytest

from polytile import deps as deps_mod
from polytile.c_optimiser.chains import chain_loops
from polytile.frontends.c import extract
from polytile.scheduling import initial

from test_c_opt import needs_cc
from test_c_register_blocks import _check, _kernel

# adi's forward elimination: two divide chains along j, rows i independent.
ELIMINATION = """  for (int i = 1; i < n - 1; i++) {
    x[i][0] = 0.0;
    y[i][0] = u[0][i];
    for (int j = 1; j < m; j++) {
      x[i][j] = -0.5 / (0.25 * x[i][j - 1] + 2.0);
      y[i][j] = (u[j][i - 1] + 3.0 * u[j][i] - u[j][i + 1] - 0.25 * y[i][j - 1]) / (0.25 * x[i][j - 1] + 2.0);
    }
    for (int j = m - 2; j >= 1; j--)
      v[j][i] = x[i][j] * v[j + 1][i] + y[i][j];
  }"""
ELIMINATION_ARRAYS = [("x", "n,m"), ("y", "n,m"), ("u", "m,n"), ("v", "m,n")]


@needs_cc
@pytest.mark.parametrize("n,m", [(37, 45), (64, 64), (10, 90), (4, 20)])
def test_independent_rows_run_their_chains_side_by_side(tmp_path, n, m):
    src = _kernel(ELIMINATION, ELIMINATION_ARRAYS, sizes=("n", "m", "p"))
    notes = _check(tmp_path, "elim", src, ELIMINATION_ARRAYS, {"n": n, "m": m, "p": 1}, blocked=None)
    assert any(re.search(r"chains of \S+ along \S+: 8 iterations of \S+ side by side", x) for x in notes), notes


def _schedule(tmp_path, body: str, arrays):
    path = tmp_path / "k.c"
    path.write_text(_kernel(body, arrays, sizes=("n", "m", "p")))
    [cs] = extract(path)
    return initial(cs.scop, deps_mod.compute(cs.scop))


def test_chain_loops_finds_the_chain_and_the_independent_loop(tmp_path):
    s = _schedule(tmp_path, ELIMINATION, ELIMINATION_ARRAYS)
    found = {name: chain_loops(s, name) for name, _ in s.stmts}
    chains = [f for f in found.values() if f is not None]
    # x, y (along j) and v (along the reversed j loop): every chain's independent loop is i
    assert len(chains) == 3 and all(outer == "i" for outer, _ in chains), found
    # a vector loop (unit stride, nothing carried) is no chain
    s2 = _schedule(tmp_path, """  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      B[i][j] = 2.0 * A[i][j];""", [("A", "n,m"), ("B", "n,m")])
    assert all(chain_loops(s2, name) is None for name, _ in s2.stmts)


def test_a_loop_carrying_a_dependence_is_not_used(tmp_path):
    # In the original order each row reads the row before: i carries a dependence, so the chain along j
    # has no independent loop around it.  (isl's skewed schedules of this nest do have one: the
    # optimiser may interleave those, legality-checked.)
    s = _schedule(tmp_path, """  for (int i = 1; i < n; i++)
    for (int j = 1; j < m; j++)
      A[i][j] = (A[i - 1][j] + A[i][j - 1]) / 3.0;""", [("A", "n,m")])
    assert [chain_loops(s, name) for name, _ in s.stmts] == [None]


def test_a_tile_loop_does_not_count_as_independent_chains(tmp_path):
    # Iterations of a tile loop are a tile apart (seidel-2d's wavefront: interleaving 8 tiles was slower):
    # only point loops, affine in the iterators, qualify.
    from polytile.c_optimiser.chains import _point_loop
    from polytile.scheduling import tile

    s = _schedule(tmp_path, ELIMINATION, ELIMINATION_ARRAYS)
    name = next(n for n, _ in s.stmts if chain_loops(s, n) is not None)
    t = tile(s, name, {"i": 32})
    assert _point_loop(t, name, t.loop_dim(name, "i")) and not _point_loop(t, name, t.loop_dim(name, "i_t"))
