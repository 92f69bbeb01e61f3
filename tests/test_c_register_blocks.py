"""Register blocks in ``polytile opt`` (:mod:`polytile.c_optimiser.register_blocks`,
:mod:`polytile.codegen.c_regblock`).

An update ``lhs op= e`` whose cell stays put along its reduction loops gets
its tile's rows and columns blocked ``MR x NR`` with the running values in
variables.  The output must stay bitwise the original's: every kernel here is
optimised, built with the original (``-O2 -ffp-contract=off``), run on random
inputs and compared byte for byte, at sizes with full blocks, partial blocks
and (for triangular loops) blocks the diagonal cuts.  Generated kernels
(hypothesis) vary the loop order, the bounds, the operand, the operator, the
element type and the rank of the updated array.
"""
from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polytile.c_optimiser import optimize_regions
from polytile.c_optimiser.machine import CMachine, machine
from polytile.c_optimiser.register_blocks import block_roles
from polytile.frontends.c import extract
from polytile.scheduling import initial
from polytile.scheduling.marks import NO_LOOP
from polytile import deps as deps_mod

from test_c_opt import compile_so, needs_cc

CTYPES = {"double": (np.float64, ctypes.c_double), "float": (np.float32, ctypes.c_float),
          "int": (np.int32, ctypes.c_int)}


def _kernel(body: str, arrays: List[Tuple[str, str]], ctype: str = "double", sizes=("n", "m", "p"),
            scalars: Tuple[str, ...] = ()) -> str:
    params = [f"int {s}" for s in sizes] + [f"{ctype} {s}" for s in scalars]
    params += [f"{ctype} {name}[restrict {']['.join(dims.split(','))}]" for name, dims in arrays]
    return f"void kern({', '.join(params)})\n{{\n#pragma scop\n{body}\n#pragma endscop\n}}\n"


def _run(lib, arrays, shapes, sizes, scalars, ctype, seed):
    dt, cscalar = CTYPES[ctype]
    rng = np.random.default_rng(seed)
    bufs = []
    for name, _ in arrays:
        shape = shapes[name]
        if dt == np.int32:
            a = rng.integers(-50, 50, size=shape).astype(dt)
        else:
            a = rng.uniform(-1, 1, size=shape).astype(dt)
        bufs.append(np.ascontiguousarray(a))
    args = [ctypes.c_int(v) for v in sizes] + [cscalar(v) for v in scalars]
    args += [b.ctypes.data_as(ctypes.c_void_p) for b in bufs]
    lib.kern(*args)
    return bufs


def _check(tmp_path: Path, name: str, src: str, arrays, size_values: Dict[str, int], ctype="double",
           scalars: Tuple[float, ...] = (), blocked: bool = True):
    """Optimise ``src``, run it and the original on the same inputs, compare bitwise; return the notes."""
    path = tmp_path / f"{name}.c"
    path.write_text(src)
    out, results = optimize_regions(path, cache=False)
    notes = [n for r in results for n in r.notes]
    text = out.decode()
    if blocked is not None:
        assert ("pt_a0_0" in text) == blocked, notes
    sizes = [size_values[s] for s in ("n", "m", "p")]
    env = dict(size_values)
    shapes = {a: tuple(eval(d, {}, env) for d in dims.split(",")) for a, dims in arrays}
    orig = compile_so(tmp_path, name + "_orig", src.encode())
    opt = compile_so(tmp_path, name + "_opt", out)
    for seed in (1, 2):
        want = _run(orig, arrays, shapes, sizes, scalars, ctype, seed)
        got = _run(opt, arrays, shapes, sizes, scalars, ctype, seed)
        for (a, _), w, g in zip(arrays, want, got):
            assert w.tobytes() == g.tobytes(), (a, notes)
    return notes


GEMM = """  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      C[i][j] *= beta;
      for (int k = 0; k < p; k++)
        C[i][j] += alpha * A[i][k] * B[k][j];
    }"""
GEMM_ARRAYS = [("C", "n,m"), ("A", "n,p"), ("B", "p,m")]


@needs_cc
@pytest.mark.parametrize("n,m,p", [(37, 41, 35), (64, 64, 64), (3, 70, 5), (70, 15, 9), (33, 48, 1)])
def test_gemm_blocked_and_bitwise(tmp_path, n, m, p):
    src = _kernel(GEMM, GEMM_ARRAYS, scalars=("alpha", "beta"))
    _check(tmp_path, "gemm", src, GEMM_ARRAYS, {"n": n, "m": m, "p": p}, scalars=(1.5, 1.2))


@needs_cc
@pytest.mark.parametrize("lower", [True, False])
def test_triangular_blocks_bitwise(tmp_path, lower):
    # syrk-like (j <= i) and covariance-like (j >= i): the diagonal cuts some blocks, which run the
    # AST's loops; the others are full and blocked.
    cond = "j <= i" if lower else "j >= i"
    lo, hi = ("0", "i + 1") if lower else ("i", "n")
    body = f"""  for (int i = 0; i < n; i++)
    for (int k = 0; k < p; k++)
      for (int j = {lo}; j < {hi}; j++)
        C[i][j] += A[k][i] * A[k][j] * 0.5;"""
    arrays = [("C", "n,n"), ("A", "p,n")]
    notes = _check(tmp_path, "tri", _kernel(body, arrays), arrays, {"n": 71, "m": 1, "p": 37})
    assert any("register block 4x16" in x for x in notes), (cond, notes)


@needs_cc
def test_operand_reading_the_updated_array_is_not_blocked(tmp_path):
    # trmm-like: B[i][j] += A[k][i] * B[k][j] reads rows of B other rows of the block may hold.
    body = """  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      for (int k = i + 1; k < n; k++)
        B[i][j] += A[k][i] * B[k][j];"""
    arrays = [("A", "n,n"), ("B", "n,m")]
    _check(tmp_path, "trmm", _kernel(body, arrays), arrays, {"n": 45, "m": 40, "p": 1}, blocked=False)


@needs_cc
@pytest.mark.parametrize("ctype", ["float", "int"])
def test_other_element_types(tmp_path, ctype):
    # The running values take the cell's own type (int wraps as the original does).
    body = """  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      for (int k = 0; k < p; k++)
        C[i][j] = C[i][j] - A[i][k] * B[k][j];"""
    src = _kernel(body, GEMM_ARRAYS, ctype=ctype)
    _check(tmp_path, "t" + ctype, src, GEMM_ARRAYS, {"n": 45, "m": 70, "p": 33}, ctype=ctype)


def test_roles():
    src = _kernel(GEMM, GEMM_ARRAYS, scalars=("alpha", "beta"))
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "g.c"
        path.write_text(src)
        [cs] = extract(path)
        s = initial(cs.scop, deps_mod.compute(cs.scop))
        assert block_roles(s, "S1") == ("i", "j", ["k"])
        assert block_roles(s, "S0") is None  # C[i][j] *= beta has no reduction loop
        path.write_text(_kernel("""  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < i; k++)
        A[i][j] -= A[i][k] * A[k][j];""", [("A", "n,n")]))
        [cs] = extract(path)
        s = initial(cs.scop, deps_mod.compute(cs.scop))
        assert block_roles(s, "S0") is None  # lu: the operand reads A


@needs_cc
@pytest.mark.parametrize("n,m", [(37, 41), (64, 96), (9, 70), (70, 5)])
def test_line_blocks_bitwise(tmp_path, n, m):
    # atax: tmp[i] is one in-order chain per row: 8 rows run side by side (8 x 1); y[j] walks every
    # access with unit stride: 32 columns held in vectors (1 x 32).  Partial blocks at every edge.
    body = """  for (int i = 0; i < n; i++) {
    tmp[i] = 0.0;
    for (int j = 0; j < m; j++)
      tmp[i] = tmp[i] + A[i][j] * x[j];
    for (int j = 0; j < m; j++)
      y[j] = y[j] + A[i][j] * tmp[i];
  }"""
    arrays = [("A", "n,m"), ("x", "m"), ("y", "m"), ("tmp", "n")]
    notes = _check(tmp_path, "atax", _kernel(body, arrays), arrays, {"n": n, "m": m, "p": 1})
    assert any("register block 8x1 of" in x for x in notes) and any("register block 1x32 of" in x for x in notes), notes


@needs_cc
@pytest.mark.parametrize("ctype", ["double", "float", "int"])
def test_a_row_of_running_values_bitwise(tmp_path, ctype):
    # covariance's column sums: mean[j] += data[i][j] moves along j only, every access walks j with
    # unit stride -- a row of running values over the reduction loop i: 8 vectors (32 doubles; 64
    # floats, halved to the tile's 32 columns).
    body = """  for (int j = 0; j < m; j++) {
    mean[j] = 0;
    for (int i = 0; i < n; i++)
      mean[j] += data[i][j];
  }"""
    arrays = [("data", "n,m"), ("mean", "m")]
    notes = _check(tmp_path, "colsum" + ctype, _kernel(body, arrays, ctype=ctype), arrays, {"n": 45, "m": 150, "p": 1},
                   ctype=ctype)
    assert any("register block 1x32 of" in x for x in notes), notes


def test_line_roles():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "a.c"
        path.write_text(_kernel("""  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      tmp[i] = tmp[i] + A[i][j] * x[j];
      y[j] += A[i][j] * x[i];
      x[i] += x[j];
    }""", [("A", "n,m"), ("x", "m"), ("y", "m"), ("tmp", "n")]))
        [cs] = extract(path)
        s = initial(cs.scop, deps_mod.compute(cs.scop))
        assert block_roles(s, "S0") == ("i", NO_LOOP, ["j"])  # A[i][j]: i strided -> independent chains
        assert block_roles(s, "S1") == (NO_LOOP, "j", ["i"])  # unit stride along j -> vectors
        assert block_roles(s, "S2") is None  # the operand reads x, the updated array


def test_line_block_size_covers_the_fma_latency():
    assert machine("x86-avx512").line(8, vectors=True) == 32 and machine("x86-avx2").line(8, vectors=True) == 32
    assert machine("x86-avx2").line(4, vectors=True) == 64 and machine("x86-avx512").line(8, vectors=False) == 8


def test_block_shape_follows_the_descriptor():
    assert machine("x86-avx512").block(8) == (4, 16)
    assert machine("x86-avx2").block(8) == (4, 8)
    assert machine("x86-avx2").block(4) == (4, 16)
    assert CMachine(vector_registers=8, vector_bytes=16).block(8) == (4, 2)


@needs_cc
def test_saved_schedule_with_a_register_block_replays(tmp_path):
    src = _kernel(GEMM, GEMM_ARRAYS, scalars=("alpha", "beta"))
    path = tmp_path / "g.c"
    path.write_text(src)
    _, [res] = optimize_regions(path, cache=False)
    steps = [st.to_json() for st in res.schedule.steps]
    assert any(st["op"] == "regtile" for st in steps), steps
    out, _ = optimize_regions(path, schedule=steps, cache=False)
    assert b"pt_a0_0" in out
    sizes = {"n": 41, "m": 37, "p": 20}
    shapes = {"C": (41, 37), "A": (41, 20), "B": (20, 37)}
    orig = compile_so(tmp_path, "o", src.encode())
    opt = compile_so(tmp_path, "r", out)
    want = _run(orig, GEMM_ARRAYS, shapes, list(sizes.values()), (0.5, 2.0), "double", 3)
    got = _run(opt, GEMM_ARRAYS, shapes, list(sizes.values()), (0.5, 2.0), "double", 3)
    assert all(w.tobytes() == g.tobytes() for w, g in zip(want, got))


# --- generated kernels -------------------------------------------------------------------------

OPERANDS = ["A[i][k] * B[k][j]", "alpha * A[i][k] * B[k][j]", "A[i][k] + B[k][j] * alpha",
            "B[k][j] * A[i][k] * alpha", "(A[i][k] - B[k][j]) * 0.25"]
BOUNDS = {"rect": ("0", "n", "0", "m", "0", "p"), "lower": ("0", "n", "0", "i + 1", "0", "p"),
          "upper": ("0", "n", "i", "m", "0", "p"), "kdiag": ("0", "n", "0", "m", "0", "i + 1")}


@st.composite
def update_kernels(draw):
    order = draw(st.permutations(["i", "j", "k"]))
    bounds = draw(st.sampled_from(sorted(BOUNDS)))
    operand = draw(st.sampled_from(OPERANDS))
    op = draw(st.sampled_from(["+=", "-=", "*=", "= C[i][j] +"]))
    ctype = draw(st.sampled_from(["double", "float"]))
    batched = draw(st.booleans())
    n = draw(st.integers(1, 48))
    m = draw(st.integers(1, 48))
    p = draw(st.integers(1, 40))
    # Triangular bounds stay inside the arrays: j <= i needs m >= n, k <= i needs p >= n.
    if bounds == "lower":
        m = max(m, n)
    if bounds == "kdiag":
        p = max(p, n)
    return order, bounds, operand, op, ctype, batched, {"n": n, "m": m, "p": p}


@needs_cc
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(update_kernels())
def test_generated_updates_stay_bitwise(tmp_path_factory, case):
    order, bounds, operand, op, ctype, batched, sizes = case
    lo_hi = dict(zip(("i", "j", "k"), zip(BOUNDS[bounds][0::2], BOUNDS[bounds][1::2])))
    cell = "C[b][i][j]" if batched else "C[i][j]"
    a, bm = ("A[b]", "B[b]") if batched else ("A", "B")
    expr = operand.replace("A[", a + "[").replace("B[", bm + "[")
    if op.startswith("="):
        stmt = f"{cell} = {cell} + {expr};"
    else:
        stmt = f"{cell} {op} {expr};"
    body, indent = "", "  "
    if batched:
        body += f"{indent}for (int b = 0; b < 2; b++)\n"
        indent += "  "
    for v in order:
        lo, hi = lo_hi[v]
        if re.search(r"\bi\b", lo + " " + hi) and order.index("i") > order.index(v):
            lo, hi = BOUNDS["rect"][2 * "ijk".index(v)], BOUNDS["rect"][2 * "ijk".index(v) + 1]
        body += f"{indent}for (int {v} = {lo}; {v} < {hi}; {v}++)\n"
        indent += "  "
    body += indent + stmt
    if batched:
        arrays = [("C", "2,n,m"), ("A", "2,n,p"), ("B", "2,p,m")]
    else:
        arrays = GEMM_ARRAYS
    src = _kernel(body, arrays, ctype=ctype, scalars=("alpha",))
    path = tmp_path_factory.mktemp("gen")
    out_notes = None
    try:
        out_notes = _check(path, "g", src, arrays, sizes, ctype=ctype, scalars=(0.75,), blocked=None)
    finally:
        if out_notes is None:
            print(src)


DOITGEN = """  for (int r = 0; r < n; r++)
    for (int q = 0; q < m; q++) {
      for (int s = 0; s < p; s++) {
        sum[s] = 0.0;
        for (int t = 0; t < p; t++)
          sum[s] += A[r][q][t] * C4[t][s];
      }
      for (int s = 0; s < p; s++)
        A[r][q][s] = sum[s];
    }"""
DOITGEN_ARRAYS = [("A", "n,m,p"), ("C4", "p,p"), ("sum", "p")]


@needs_cc
@pytest.mark.parametrize("n,m,p", [(5, 7, 64), (4, 3, 70), (3, 5, 9), (2, 2, 33)])
def test_an_untiled_nest_gets_a_row_of_running_values_bitwise(tmp_path, n, m, p):
    # doitgen: sum[] is reset for every (r, q), so no band around the product tiles; the update
    # still gets 32 running values over s, the reduction loop t between the strips and the points.
    # Full and partial strips, and sizes below one strip (the generic loops only).
    notes = _check(tmp_path, "doitgen", _kernel(DOITGEN, DOITGEN_ARRAYS), DOITGEN_ARRAYS,
                   {"n": n, "m": m, "p": p}, blocked=None)
    assert any("register block of S1: 1 x 32" in x and "untiled nest" in x for x in notes), notes


def test_untiled_block_keeps_the_outer_reductions_outside_when_they_must():
    # r and q do not move sum[s] either, but running them inside the strips would reuse sum before
    # the next (r, q) resets it: refused, and the block takes t alone.
    import tempfile

    from polytile.c_optimiser.register_blocks import block_untiled

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "d.c"
        path.write_text(_kernel(DOITGEN, DOITGEN_ARRAYS))
        [cs] = extract(path)
        s = initial(cs.scop, deps_mod.compute(cs.scop))
        notes: List[str] = []
        t = block_untiled(s, CMachine(vector_registers=32, vector_bytes=32), notes)
        assert t.loop_names("S1") == ["r", "q", "s_t", "t", "s"], notes
        assert any(m[0] == "S1" and m[2] == "regtile" for m in t.marks)
        assert any("with r, q, t inside refused" in x for x in notes), notes
        assert block_untiled(s, CMachine(), notes, skip=["S1"]) is s  # statements of tiled bands are left


def test_blocks_survive_parametric_sizes():
    """With the sizes parameters (PolyBench's functions take ni, nj, nk), a reduction loop's range is not a
    number: it must not pass for a loop of one point, which has no loop in the AST to carry the block's
    mark (schedule.transforms._one_point; a sampled range once dropped the blocks of 15 PolyBench kernels)."""
    from pathlib import Path

    from polytile.scheduling import transforms as T

    _, [res] = optimize_regions(Path(__file__).parent / "c_kernels" / "gemm.c", cache=False)
    assert "pt_a0_0" in res.text, res.notes
    s = res.schedule
    loops = dict((n, d) for d, n in s.table["S1"].loops())
    assert not T._one_point(s, "S1", loops["k"])


def test_a_parametric_schedule_describes_its_loops_in_the_parameters():
    # The description read each loop's range at one sampled parameter value: "for k in [0, 0]".
    from pathlib import Path

    _, [res] = optimize_regions(Path(__file__).parent / "c_kernels" / "gemm.c", cache=False)
    text = res.schedule.describe()
    assert "for k in [0, nk - 1]:" in text and "for i in [0, ni - 1]:" in text, text
