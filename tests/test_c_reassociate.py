"""``polytile opt --reassociate``: reductions in C regions may be reordered (and vectorised).

* Extraction marks ``lhs op= e`` (``+``, ``-``, ``*``) as a reduction only
  with ``reassociate=True``, and only when ``e`` never reads the updated cell.
* ``vectorize(..., reduction=True)`` is legal on a loop that carries nothing
  but reductions; into a scalar it is ``omp simd reduction(+:s)``, into an
  array element (C) the loop accumulates in a scalar and updates the cell
  once after it.
* Integer reductions reassociate exactly (checked bitwise); floating-point
  kernels are checked within a tolerance in ``test_c_opt``.
* Parallel loops over non-rectangular domains are dealt out cyclically.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import islpy as isl
import numpy as np
import pytest

from polytile import deps as deps_mod
from polytile.cli import main as cli_main
from polytile.codegen.c import _is_box
from polytile.c_optimiser import optimize_c, optimize_regions
from polytile.c_runner import close_difference
from polytile.errors import IllegalSchedule
from polytile.frontends.c import extract
from polytile.scheduling import initial, vectorize

from test_c_opt import KERNELS, compile_so, needs_cc

TRISOLV = KERNELS / "trisolv.c"


def _region(tmp_path: Path, body: str, params: str = "int n, double A[restrict n][n], double *restrict x, "
                                                      "double *restrict y") -> Path:
    path = tmp_path / "k.c"
    path.write_text(f"void k({params})\n{{\n#pragma scop\n{body}\n#pragma endscop\n}}\n")
    return path


def _reductions(path: Path, **kw):
    [cs] = extract(path, reassociate=True, **kw)
    return {st.name: (st.body.reduce, st.c_reduction) for st in cs.scop.statements}, cs.notes


def test_no_reductions_without_reassociate():
    [cs] = extract(TRISOLV)
    assert not any(st.is_reduction for st in cs.scop.statements)
    assert deps_mod.compute(cs.scop).reduction.is_empty()


def test_trisolv_update_is_a_reduction():
    red, notes = _reductions(TRISOLV)
    assert red["S1"] == ("+", ("s", "-=", "U[i][j] * x[j]"))
    assert red["S0"] == (None, None) and red["S2"] == (None, None)
    assert any("S1 (line 8) is a +-reduction on s" in n for n in notes)


@pytest.mark.parametrize("stmt, expect", [
    ("y[i] = y[i] - A[i][j] * x[j];", ("+", ("y[i]", "-=", "A[i][j] * x[j]"))),
    ("y[i] = A[i][j] * x[j] + y[i];", ("+", ("y[i]", "+=", "A[i][j] * x[j]"))),
    ("y[i] *= A[i][j];", ("*", ("y[i]", "*=", "A[i][j]"))),
    ("y[i] = y[i] * A[i][j];", ("*", ("y[i]", "*=", "A[i][j]"))),
    ("y[i]++;", ("+", ("y[i]", "+=", "1"))),
    ("y[i] = A[i][j] - y[i];", (None, None)),      # not associative in y
    ("y[i] /= A[i][j];", (None, None)),
    ("y[i] = y[i] + y[i] * A[i][j];", (None, None)),  # the operand reads the updated cell
])
def test_reduction_forms(tmp_path, stmt, expect):
    path = _region(tmp_path, f"  for (int i = 0; i < n; i++)\n    for (int j = 0; j < n; j++)\n      {stmt}")
    red, notes = _reductions(path)
    assert red["S0"] == expect
    if stmt.startswith("y[i] = y[i] + y[i]"):
        assert any("reads the cell it updates" in n for n in notes)


def test_operand_reading_other_cells_of_the_array_is_a_reduction(tmp_path):
    # PolyBench's trisolv: x[i] -= L[i][j] * x[j] with j < i never reads the cell it updates.
    path = _region(tmp_path, "  for (int i = 0; i < n; i++) {\n    for (int j = 0; j < i; j++)\n"
                             "      x[i] -= A[i][j] * x[j];\n    x[i] = x[i] / A[i][i];\n  }")
    red, _ = _reductions(path)
    assert red["S0"][0] == "+" and red["S1"] == (None, None)


def test_simd_reduction_legality():
    [cs] = extract(TRISOLV, reassociate=True)
    s = initial(cs.scop, deps_mod.compute(cs.scop))
    with pytest.raises(IllegalSchedule, match=r"vectorize\(\.\.\., reduction=True\)"):
        vectorize(s, "S1", "j")
    assert any(m[2] == "simd" and m[3] for m in vectorize(s, "S1", "j", reduction=True).marks)
    # Kept in order (no reassociate), the same loop carries a true chain: refused either way.
    [strict] = extract(TRISOLV)
    s2 = initial(strict.scop, deps_mod.compute(strict.scop))
    with pytest.raises(IllegalSchedule, match="carries a dependence"):
        vectorize(s2, "S1", "j", reduction=True)


def test_simd_reduction_refuses_a_cell_that_moves_along_the_loop(tmp_path):
    path = _region(tmp_path, "  for (int i = 0; i < n; i++)\n    for (int j = 0; j < n; j++)\n"
                             "      y[j / 2] += A[i][j];")
    [cs] = extract(path, reassociate=True)
    s = initial(cs.scop, deps_mod.compute(cs.scop))
    with pytest.raises(IllegalSchedule, match="different cells"):
        vectorize(s, "S0", "j", reduction=True)


def test_generated_reductions():
    text = optimize_c(TRISOLV, reassociate=True)
    assert "#pragma omp simd reduction(+:s)" in text
    syrk = optimize_c(KERNELS / "syrk.c", reassociate=True)
    assert "double pt_acc0 = 0;" in syrk and "#pragma omp simd reduction(+:pt_acc0)" in syrk
    assert "pt_acc0 += (alpha * A[i][k] * A[j][k]);" in syrk and "C[i][j] += pt_acc0;" in syrk
    # Without the option nothing is reassociated.
    assert "reduction(" not in optimize_c(TRISOLV) and "pt_acc" not in optimize_c(KERNELS / "syrk.c")


@needs_cc
@pytest.mark.parametrize("ctype, dtype", [("int", np.int32), ("long", np.int64)])
def test_integer_reductions_reassociate_exactly(tmp_path, rng, ctype, dtype):
    body = ("  for (int i = 0; i < n; i++) {\n    y[i] = 0;\n    for (int j = 0; j < n; j++)\n"
            "      y[i] += A[i][j] * x[j];\n  }\n  for (int i = 0; i < n; i++)\n    for (int j = 0; j < n; j++)\n"
            "      s[0] *= A[i][j];")
    path = _region(tmp_path, body, f"int n, {ctype} A[restrict n][n], {ctype} *restrict x, {ctype} *restrict y, "
                                   f"{ctype} *restrict s")
    out = optimize_c(path, reassociate=True)
    assert "reduction(" in out
    flags = ("-O3", "-march=native", "-fopenmp")
    libs = [compile_so(tmp_path, "orig", path.read_bytes(), flags), compile_so(tmp_path, "new", out.encode(), flags)]
    n = 67  # values small enough that nothing overflows (signed overflow is undefined in C)
    a = rng.choice(np.array([-1, 1], dtype), (n, n))
    x = rng.integers(-10**6, 10**6, n).astype(dtype)
    results = []
    for lib in libs:
        y, s = np.zeros(n, dtype), np.ones(1, dtype)
        fn = lib.k
        fn.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 4
        fn(n, a.ctypes.data, x.ctypes.data, y.ctypes.data, s.ctypes.data)
        results.append((y, s))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    np.testing.assert_array_equal(results[1][1], results[0][1])


def test_close_difference():
    want = np.array([1.0, -2.0, 3.0])
    assert close_difference("C", want + 1e-12, want) is None
    msg = close_difference("C", want + np.array([0, 0, 1e-6]), want)
    assert msg and "array C differs beyond 1e-09" in msg and "in 1 of 3" in msg
    assert close_difference("I", np.array([1, 2]), np.array([1, 3])) is not None  # integers: exactly


def test_box_domains():
    assert _is_box(isl.Set("[n, m] -> { S[i, j] : 0 <= i < n and 0 <= j < m }"))
    assert not _is_box(isl.Set("[n] -> { S[i, j] : 0 <= i < n and 0 <= j <= i }"))
    assert _is_box(isl.Set("{ S[] }"))


def test_triangular_parallel_loops_are_cyclic():
    assert "schedule(static, 1)" in optimize_c(KERNELS / "syrk.c")
    assert "schedule(static, 1)" not in optimize_c(KERNELS / "gemm.c")


@needs_cc
def test_cli_compare_reassociate(capsys):
    rc = cli_main(["compare", str(TRISOLV), "--dims", "n=300", "--repeat", "1", "--warmup", "0", "--reassociate",
                   "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    row = next(line for line in out.splitlines() if line.startswith("reassociate"))
    assert " ok " in row
    assert "'reassociate' within 1e-09" in out


def test_cli_opt_reassociate(tmp_path, capsys):
    out = tmp_path / "t.c"
    assert cli_main(["opt", str(TRISOLV), "--reassociate", "-o", str(out)]) == 0
    assert "omp simd reduction(+:s)" in out.read_text()


def test_saved_reassociated_schedule_replays_only_with_reassociate(tmp_path, capsys):
    sched = tmp_path / "s.json"
    assert cli_main(["schedule", str(TRISOLV), "--reassociate", "-o", str(sched)]) == 0
    out = tmp_path / "t.c"
    assert cli_main(["opt", str(TRISOLV), "--reassociate", "--schedule", str(sched), "-o", str(out)]) == 0
    assert out.read_text() == optimize_c(TRISOLV, reassociate=True)
    capsys.readouterr()
    assert cli_main(["opt", str(TRISOLV), "--schedule", str(sched), "-o", str(out)]) != 0
    assert "the schedule reorders reductions" in capsys.readouterr().err


def test_reassociation_is_scored_by_the_simd_loops_it_gets():
    # doitgen's sum[p] += A[r][q][s] * C4[s][p] could be reordered, but the reassociated version's hot
    # loop gets no simd mark (as written, p moves innermost: every sum[p] vectorises in order), so the
    # order is kept.  (atax's dot product tmp[i] += A[i][j] * x[j] does become a SIMD reduction.)
    out, [res] = optimize_regions(KERNELS / "doitgen.c", reassociate=True)
    assert any(n.startswith("versions") and n.endswith("; as written chosen") for n in res.notes), res.notes
    assert out == optimize_regions(KERNELS / "doitgen.c")[0]
    _, [res] = optimize_regions(KERNELS / "atax.c", reassociate=True)
    assert any(n.endswith("; reassociated as written chosen") for n in res.notes), res.notes
    # cholesky's O(n^3) update becomes a SIMD reduction (its sqrt and divisions need none).
    _, [res] = optimize_regions(KERNELS / "cholesky.c", reassociate=True)
    assert any(n.endswith("; reassociated as written chosen") for n in res.notes), res.notes


def test_point_loops_are_not_dealt_out_cyclically():
    # gramschmidt's parallel j loop (j > k: a triangle) runs over columns of A: neighbouring
    # iterations write neighbouring elements, so it keeps contiguous blocks.
    text = optimize_c(KERNELS / "gramschmidt.c")
    assert "#pragma omp parallel for" in text and "schedule(static, 1)" not in text
