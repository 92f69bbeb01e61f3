"""Scalar expansion in ``polytile opt`` (:mod:`polytile.c_optimiser.expansion`).

A scalar temporary written before it is read in every iteration of a loop
becomes an array indexed by that loop's iterator when that lets the
optimiser reorder, vectorise or parallelise the loops it serialised; each
kernel here is optimised, compiled with the original, run on random inputs
and compared bitwise (arrays, and a scalar the function returns).  A scalar
read before it is written, or whose expansion buys nothing, is left alone.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from polytile.c_optimiser import optimize_regions
from polytile.c_optimiser.expansion import expand_scalars
from polytile.frontends.c import extract

from test_c_opt import KERNELS, compile_so, needs_cc

# ludcmp's LU sweep, written as a region-local temporary: the j iterations of the second inner nest
# share only the cell of w.
LU_SWEEP = """void lu_sweep(int n, double A[restrict n][n])
{
  double w;
#pragma scop
  for (int r = 0; r < n; r++) {
    for (int c = 0; c < r; c++) {
      w = A[r][c];
      for (int p = 0; p < c; p++)
        w = w - A[r][p] * A[p][c];
      A[r][c] = w / A[c][c];
    }
    for (int c = r; c < n; c++) {
      w = A[r][c];
      for (int p = 0; p < r; p++)
        w -= A[r][p] * A[p][c];
      A[r][c] = w;
    }
  }
#pragma endscop
}
"""

# The temporary is returned after the region: its final value must be the original's.
LIVE_OUT = """double scaled(int n, int m, double a[restrict n][m], double b[restrict n][m])
{
  double t = 0.0;
#pragma scop
  for (int j = 0; j < m; j++)
    for (int i = 0; i < n; i++) {
      t = a[i][j] * 3.0;
      b[i][j] = t + a[i][j] * t;
    }
#pragma endscop
  return t;
}
"""

# s carries a value from one iteration to the next (read before it is written): never expanded.
CARRIED = """void carried(int n, int m, double a[restrict n][m], double b[restrict n][m])
{
  double s = 1.0;
#pragma scop
  for (int j = 0; j < m; j++)
    for (int i = 0; i < n; i++) {
      b[i][j] = s * 0.5 + a[i][j];
      s = a[i][j];
    }
#pragma endscop
}
"""

# Nested declarations in the region (hoisted to its start by the frontend) used column-wise.
NESTED = """void nested(int n, int m, double a[restrict n][m], double b[restrict m][n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < m; j++) {
      double u = a[i][j] * 2.0;
      double v = u - 1.0;
      for (int k = 0; k < i; k++)
        v = v + a[k][j] * u;
      b[j][i] = v;
    }
  }
#pragma endscop
}
"""


def _optimise(tmp_path: Path, name: str, text: str, reassociate: bool = False):
    path = tmp_path / f"{name}.c"
    path.write_text(text)
    out, results = optimize_regions(path, cache=False, reassociate=reassociate)
    return path, out, results[0]


def _notes(res) -> str:
    return "\n".join(res.notes)


def _run(lib, fn_name, arrays, ints, restype=None):
    state = {k: v.copy() for k, v in arrays.items()}
    fn = getattr(lib, fn_name)
    fn.argtypes = [ctypes.c_int] * len(ints) + [ctypes.c_void_p] * len(state)
    fn.restype = restype
    ret = fn(*ints, *[a.ctypes.data_as(ctypes.c_void_p) for a in state.values()])
    return state, ret


def _bitwise(tmp_path, path, out, fn, arrays, ints, restype=None):
    orig = compile_so(tmp_path, "orig", path.read_bytes())
    new = compile_so(tmp_path, "new", out)
    want, want_ret = _run(orig, fn, arrays, ints, restype)
    got, got_ret = _run(new, fn, arrays, ints, restype)
    for k in arrays:
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"array {k} differs")
    assert got_ret == want_ret or (restype is not None and np.isnan(got_ret) and np.isnan(want_ret))
    return got


@needs_cc
@pytest.mark.parametrize("reassociate", [False, True])
def test_lu_sweep_expands_w_along_the_column_loop_and_interchanges(tmp_path, rng, reassociate):
    """With reassociation too, the expansion is made of the in-order version: still bitwise."""
    path, out, res = _optimise(tmp_path, "lu", LU_SWEEP, reassociate)
    assert "w expanded along c into w_x" in _notes(res)
    # the update's p loop now runs outside the column loop (interchanged, or between the column loop's
    # strips and points in a register block): the innermost loop is unit stride
    assert "'p', 'c']" in res.text
    assert "double w_x[n];" in res.text
    n = 53
    a = rng.uniform(0.0, 1.0, (n, n)) + n * np.eye(n)
    _bitwise(tmp_path, path, out, "lu_sweep", {"A": a}, [n])


@needs_cc
def test_live_out_scalar_gets_its_last_value_back(tmp_path, rng):
    path, out, res = _optimise(tmp_path, "live", LIVE_OUT)
    assert "t expanded along" in _notes(res) and "last value copied back" in _notes(res)
    n, m = 37, 41
    _bitwise(tmp_path, path, out, "scaled", {"a": rng.uniform(-1, 1, (n, m)), "b": np.zeros((n, m))}, [n, m],
             restype=ctypes.c_double)


@needs_cc
def test_scalar_read_before_written_is_not_expanded(tmp_path, rng):
    path, out, res = _optimise(tmp_path, "carried", CARRIED)
    assert "expanded" not in _notes(res)
    [cs] = extract(path)
    assert expand_scalars(cs.scop, cs.scalars, cs.dead_after, cs.taken) is None
    n, m = 30, 33
    _bitwise(tmp_path, path, out, "carried", {"a": rng.uniform(-1, 1, (n, m)), "b": np.zeros((n, m))}, [n, m])


@needs_cc
def test_region_local_declarations_are_expanded_without_copy_back(tmp_path, rng):
    path, out, res = _optimise(tmp_path, "nested", NESTED)
    [cs] = extract(path)
    assert set(cs.dead_after) == {"u", "v"}
    n, m = 35, 39
    _bitwise(tmp_path, path, out, "nested", {"a": rng.uniform(-1, 1, (n, m)), "b": np.zeros((m, n))}, [n, m])
    if "expanded" in _notes(res):
        assert "copied back" not in _notes(res)


def test_gramschmidt_nrm_is_not_expanded_along_its_sequential_loop():
    """nrm lives in one k iteration, but the k loop carries the updates of A: expanding it buys nothing."""
    [cs] = extract(KERNELS / "gramschmidt.c")
    assert "nrm" in cs.scalars and "nrm" in cs.dead_after
    assert expand_scalars(cs.scop, ["nrm"], cs.dead_after, cs.taken) is None


def test_dead_after_knows_what_the_function_reads_later(tmp_path):
    path = tmp_path / "live.c"
    path.write_text("""double g;
double f(int n, double a[restrict n], double t)
{
  double w, u;
  static double z;
#pragma scop
  for (int i = 0; i < n; i++) {
    double v;
    w = a[i]; u = w; z = u; g = z; t = g; v = t;
    a[i] = w * v;
  }
#pragma endscop
  return u;
}
""")
    [cs] = extract(path)
    assert set(cs.scalars) == {"w", "u", "z", "g", "t", "v"}
    # u is read later, z is static (kept across calls), g is global: their final values matter
    assert set(cs.dead_after) == {"w", "t", "v"}
    ex = expand_scalars(cs.scop, cs.scalars, cs.dead_after, cs.taken)
    assert ex is not None and "u = u_x[n - 1];" in ex.after and "w =" not in ex.after


# Temporaries of a typedef'd and an unsigned type: the expanded arrays are declared with the scalars'
# own C types (float arithmetic stays float, the unsigned shift stays logical).
TYPED = """typedef float real;
void typed(int n, int m, float a[restrict n][m], unsigned b[restrict m][n], float c[restrict m][n])
{
  real r;
  unsigned h;
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      r = a[i][j] * 0.1f;
      h = (unsigned) (a[i][j] * 1000.0f);
      c[j][i] = r * r + r;
      b[j][i] = h ^ (h >> 3);
    }
#pragma endscop
}
"""


@needs_cc
def test_expanded_arrays_keep_the_scalars_declared_types(tmp_path, rng):
    path, out, res = _optimise(tmp_path, "typed", TYPED)
    [cs] = extract(path)
    assert cs.scalar_types == {"r": "real", "h": "unsigned"}
    assert "expanded" in _notes(res)
    assert "real r_x[" in res.text and "unsigned h_x[" in res.text
    n, m = 33, 37
    arrays = {"a": rng.uniform(0, 1, (n, m)).astype(np.float32), "b": np.zeros((m, n), np.uint32),
              "c": np.zeros((m, n), np.float32)}
    _bitwise(tmp_path, path, out, "typed", arrays, [n, m])


def test_lu_temp_kernel_expands_only_the_web_of_the_free_column_loop():
    """tests/c_kernels/lu-temp.c (bitwise-checked with every kernel in test_c_opt): of t's three webs
    only the one in the c loop of U's row is expanded; the others' loops carry the updates of M and z."""
    [cs] = extract(KERNELS / "lu-temp.c")
    ex = expand_scalars(cs.scop, cs.scalars, cs.dead_after, cs.taken, cs.scalar_types)
    assert ex is not None and ex.notes == ("t expanded along c into t_x in S3, S4, S5",)
    assert ex.before == "double t_x[n];\n" and ex.after == ""
