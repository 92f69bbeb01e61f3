"""``polytile deps``, ``schedule`` and ``compare`` on C files, and :mod:`polytile.c_runner` behind ``compare``.

* ``deps FILE.c``: per region, the statements with their C text and every
  dependence relation, in the Tile command's layout.
* ``schedule FILE.c``: the schedule ``polytile opt`` uses, per region; ``-o``
  then ``opt --schedule`` gives exactly ``opt``'s output (the round trip);
  several regions get numbered files.
* ``compare FILE.c``: the original build and ``opt`` variants on the same
  inputs, every array checked bitwise; a wrong variant is a MISMATCH row and
  exit status 1; a missing size, an unknown name, Tile-only options are
  errors that say what to pass.
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from polytile import c_runner
from polytile.cli import main as cli_main
from polytile.errors import PolytileError

KERNELS = Path(__file__).resolve().parent / "c_kernels"
needs_cc = pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler")


def run(capsys, *argv) -> tuple:
    capsys.readouterr()
    code = cli_main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------
# deps
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kernel, statement", [
    ("gemm.c", "S1 (line 12): C[i][j] += alpha * A[i][k] * B[k][j];"),
    ("jacobi-2d.c", "S1 (line 12): A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j]);"),
    ("trisolv.c", "S0 (line 6): s = b[i];"),
])
def test_deps_prints_statements_and_every_relation(kernel, statement, capsys):
    code, out, _ = run(capsys, "deps", KERNELS / kernel)
    assert code == 0, out
    assert out.startswith(f"// {KERNELS / kernel}:") and "statements:" in out
    assert statement in out
    for title in ("flow (RAW, memory-based):", "flow (RAW, value-based):", "anti (WAR):", "output (WAW):",
                  "reduction:"):
        assert title in out
    # Every relation is an isl map between statement instances of this region.
    assert "-> S" in out.split("flow (RAW, memory-based):")[1]


def test_deps_fixed_parameters_and_two_regions(capsys):
    code, out, _ = run(capsys, "deps", KERNELS / "gemm.c", "--dims", "ni=4,nj=5,nk=6")
    assert code == 0
    assert "fixed ni=4, nj=5, nk=6" in out and "[nj, nk] ->" not in out
    code, out, _ = run(capsys, "deps", KERNELS / "features.c")
    assert code == 0
    assert out.count("// ") == 2 and "features.c:11-25 (kernel_features)" in out and ":27-30 (kernel_features)" in out


def test_deps_shares_show_dependences(capsys):
    # show prints the same relations (one implementation): every map of deps appears in show.
    _, deps_out, _ = run(capsys, "deps", KERNELS / "jacobi-1d.c")
    _, show_out, _ = run(capsys, "show", KERNELS / "jacobi-1d.c")
    maps = [ln.strip() for ln in deps_out.splitlines() if ln.startswith("  [")]
    assert maps and all(m in show_out for m in maps)


def test_deps_reports_a_skipped_region(tmp_path, capsys):
    p = tmp_path / "indirect.c"
    p.write_text("void f(int n, double *restrict a, int *restrict idx) {\n  int i;\n#pragma scop\n"
                 "  for (i = 0; i < n; i++)\n    a[idx[i]] = 1.0;\n#pragma endscop\n}\n")
    code, out, _ = run(capsys, "deps", p)
    assert code == 0 and f"skipped: {p}:5:7: error: non-affine subscript of a" in out


def test_tile_only_and_c_only_options_are_usage_errors(capsys):
    code, _, err = run(capsys, "deps", KERNELS / "gemm.c", "--dtype", "float32")
    assert code == 2 and "--dtype applies to Tile programs only" in err
    code, _, err = run(capsys, "deps", "examples/matmul.tile", "--function", "f")
    assert code == 2 and "--function applies to C files only" in err
    code, _, err = run(capsys, "compare", KERNELS / "gemm.c", "--tile", "32")
    assert code == 2 and "--tile applies to Tile programs only" in err


# ---------------------------------------------------------------------------
# schedule
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["jacobi-2d.c", "gemm.c", "trisolv.c"])
def test_schedule_round_trip_through_opt(kernel, tmp_path, capsys):
    saved = tmp_path / "s.json"
    code, out, _ = run(capsys, "schedule", KERNELS / kernel, "-o", saved)
    assert code == 0
    assert "== schedule (loop tree)" in out and "== schedule tree (isl)" in out
    assert f"wrote {saved}" in out and f"opt {KERNELS / kernel} --schedule {saved}" in out
    doc = json.loads(saved.read_text())
    assert doc["steps"][0]["op"] == "base"
    plain, replayed = tmp_path / "plain.c", tmp_path / "replayed.c"
    assert cli_main(["opt", str(KERNELS / kernel), "-o", str(plain)]) == 0
    assert cli_main(["opt", str(KERNELS / kernel), "--schedule", str(saved), "-o", str(replayed)]) == 0
    assert replayed.read_bytes() == plain.read_bytes()


def test_schedule_options_reach_opt(capsys):
    code, out, _ = run(capsys, "schedule", KERNELS / "jacobi-2d.c", "--no-tile", "--no-parallel", "--fusion", "max",
                       "--dims", "tsteps=3,n=20")
    assert code == 0
    assert "base(kind='isl', fusion='max')" in out and "tile(" not in out and "[parallel]" not in out
    assert "fixed n=20, tsteps=3" in out and "one sample of" not in out


def test_schedule_of_two_regions_writes_numbered_files(tmp_path, capsys):
    code, out, _ = run(capsys, "schedule", KERNELS / "features.c", "-o", tmp_path / "f.json")
    assert code == 0
    assert (tmp_path / "f.1.json").is_file() and (tmp_path / "f.2.json").is_file()
    assert not (tmp_path / "f.json").exists()
    assert "one schedule file per region, numbered in file order" in out
    # Each file replays on its own region (steps name that region's statements).
    assert json.loads((tmp_path / "f.2.json").read_text())["steps"][0]["op"] == "base"


def test_schedule_apply_replays_given_steps(tmp_path, capsys):
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps([{"op": "base", "kind": "original"},
                                 {"op": "tile", "stmt": "S1", "sizes": {"j": 8, "k": 8}}]))
    code, out, _ = run(capsys, "schedule", KERNELS / "gemm.c", "--apply", steps)
    assert code == 0 and "tile(stmt='S1', sizes={'j': 8, 'k': 8})" in out
    assert "schedule replayed from the given steps" in out


# ---------------------------------------------------------------------------
# c_runner and compare
# ---------------------------------------------------------------------------


def test_prepare_arguments_shapes_and_globals():
    call = c_runner.prepare(KERNELS / "gemm.c", sizes={"ni": 7, "nj": 6, "nk": 5}, scalars={"alpha": 2.0})
    assert call.function == "kernel_gemm" and call.scalars == {"alpha": 2.0, "beta": c_runner.DEFAULT_SCALAR}
    assert {k: a.shape for k, a in call.inputs.items()} == {"C": (7, 6), "A": (7, 5), "B": (5, 6)}
    # double *x: the extent the region accesses.
    call = c_runner.prepare(KERNELS / "jacobi-1d.c", sizes={"tsteps": 2, "n": 30})
    assert call.inputs["A"].shape == (30,)
    # Global arrays sized by macros; a macro given a new value is rewritten in the source.
    call = c_runner.prepare(KERNELS / "heat-3d.c", sizes={"N": 9})
    assert call.globals == ("B", "A") and call.inputs["A"].shape == (9, 9, 9)
    assert b"#define N 9\n" in call.source and call.sizes == {"N": 9, "TSTEPS": 4}


def test_prepare_names_what_is_missing(tmp_path):
    with pytest.raises(PolytileError, match=r"kernel_gemm\(\) needs a value for nj, nk: pass --dims nj=<int>,nk=<int>"):
        c_runner.prepare(KERNELS / "gemm.c", sizes={"ni": 4})
    with pytest.raises(PolytileError, match="no integer parameter or macro named q"):
        c_runner.prepare(KERNELS / "gemm.c", sizes={"ni": 4, "nj": 4, "nk": 4, "q": 1})
    p = tmp_path / "static.c"
    p.write_text("static double T[8];\nvoid f(int n) {\n  int i;\n#pragma scop\n  for (i = 0; i < n; i++)\n"
                 "    T[i] = T[i] * 2.0;\n#pragma endscop\n}\n")
    with pytest.raises(PolytileError, match="uses the array T, which is neither a parameter nor an exported"):
        c_runner.prepare(p, sizes={"n": 8})
    p2 = tmp_path / "ptrptr.c"
    p2.write_text("void g(int n, double **restrict M) {\n  int i;\n#pragma scop\n  for (i = 0; i < n; i++)\n"
                  "    M[i][i] = 1.0;\n#pragma endscop\n}\n")
    with pytest.raises(PolytileError, match="pointer to pointers"):
        c_runner.prepare(p2, sizes={"n": 4})


def test_set_macros_and_extents():
    assert c_runner.set_macros(b"#define N 10\n#  define M 3\n", {"M": 7}) == b"#define N 10\n#  define M 7\n"
    with pytest.raises(PolytileError, match="cannot set macro K"):
        c_runner.set_macros(b"#define N 10\n", {"K": 1})
    assert c_runner.eval_extent("2 * n + 1", {"n": 5}) == 11 and c_runner.eval_extent("(N - 1) / 2", {"N": 8}) == 3
    a, b = np.array([1.0, np.nan]), np.array([1.0, np.nan])
    assert c_runner.bitwise_difference("x", a, b) is None
    assert "differs in 1 of 2" in c_runner.bitwise_difference("x", a, np.array([1.0 + 2 ** -52, np.nan]))


@needs_cc
@pytest.mark.parametrize("kernel, dims", [
    ("gemm.c", "ni=37,nj=41,nk=35"),
    ("jacobi-2d.c", "tsteps=6,n=40"),
    ("trisolv.c", "n=50"),
    ("features.c", "n=45"),
])
def test_compare_rows_are_checked_bitwise(kernel, dims, tmp_path, capsys):
    out_csv = tmp_path / "r.csv"
    code, out, _ = run(capsys, "compare", KERNELS / kernel, "--dims", dims, "--fusion", "none,max", "--no-tile",
                       "--repeat", "1", "--warmup", "0", "-q", "-o", out_csv)
    assert code == 0, out
    assert "check    bitwise" in out and "compiler " in out and "-ffp-contract=off" in out
    rows = [ln.split() for ln in out.splitlines()]
    table = {r[0]: r for r in rows if r and r[0] in ("original", "opt", "fusion-none", "fusion-max", "no-tile")}
    assert list(table) == ["original", "opt", "fusion-none", "fusion-max", "no-tile"]
    assert all(r[1:3] == ["yes", "ok"] and r[-1].endswith("x") for r in table.values())
    assert table["original"][-1] == "1.00x"
    with out_csv.open() as f:
        data = list(csv.DictReader(line for line in f if not line.startswith("#")))
    assert [d["name"] for d in data] == list(table) and all(d["check"] == "ok" for d in data)
    assert '# check: "bitwise' in out_csv.read_text()


@needs_cc
def test_compare_globals_and_macros(tmp_path, capsys):
    out_json = tmp_path / "r.json"
    code, out, _ = run(capsys, "compare", KERNELS / "heat-3d.c", "--dims", "N=12,TSTEPS=3", "--repeat", "1",
                       "--warmup", "0", "-q", "-o", out_json)
    assert code == 0, out
    assert "A[12x12x12] (global)" in out and "(N=12, TSTEPS=3)" in out
    doc = json.loads(out_json.read_text())
    assert doc["provenance"]["macros_set"] == {"N": 12, "TSTEPS": 3}
    assert [r["check"] for r in doc["rows"]] == ["ok", "ok"] and doc["rows"][1]["steps"][0]["op"] == "base"


@needs_cc
def test_compare_fails_loudly_on_a_wrong_variant(monkeypatch, capsys):
    real = c_runner.optimise

    def wrong(path, **options):
        text, results = real(path, **options)
        if options.get("fusion") == "max":
            # One coefficient changed in the generated region: a variant that computes something else.
            text = text.replace(b"0.2 * (B[i][j]", b"0.25 * (B[i][j]")  # parallel and serial copies
            assert b"0.25 * (B[i][j]" in text
        return text, results

    monkeypatch.setattr(c_runner, "optimise", wrong)
    code, out, _ = run(capsys, "compare", KERNELS / "jacobi-2d.c", "--dims", "tsteps=3,n=20", "--fusion", "max",
                       "--repeat", "1", "--warmup", "0", "-q")
    assert code == 1
    line = next(ln for ln in out.splitlines() if ln.startswith("fusion-max"))
    assert "MISMATCH" in line
    assert "fusion-max: array A differs in" in out
    assert next(ln for ln in out.splitlines() if ln.startswith("opt ")).split()[2] == "ok"


@needs_cc
def test_compare_missing_size_and_unknown_scalar(capsys):
    code, _, err = run(capsys, "compare", KERNELS / "gemm.c", "--dims", "ni=8")
    assert code == 1 and "needs a value for nj, nk: pass --dims nj=<int>,nk=<int>" in err
    code, _, err = run(capsys, "compare", KERNELS / "gemm.c", "--dims", "ni=8,nj=8,nk=8", "--scalar", "gamma=2")
    assert code == 1 and "no floating-point parameter named gamma (it has: alpha, beta)" in err


@needs_cc
def test_compare_reports_regions_left_as_written(capsys):
    # 2mm's array parameters may overlap without --assume-no-alias: opt leaves the region, compare says so.
    code, out, _ = run(capsys, "compare", KERNELS / "2mm.c", "--repeat", "1", "--warmup", "0", "-q")
    assert code == 0 and "opt: lines 11-26 left as written" in out and "may overlap" in out
    code, out, _ = run(capsys, "compare", KERNELS / "2mm.c", "--assume-no-alias", "--repeat", "1", "--warmup", "0",
                       "-q")
    assert code == 0 and "left as written" not in out


def test_unknown_extent_is_named_and_shape_supplies_it(tmp_path):
    p = tmp_path / "outside.c"
    p.write_text("void h(int n, double *restrict x, double *restrict y) {\n  int i;\n#pragma scop\n"
                 "  for (i = 0; i < n; i++)\n    y[i] = 2.0 * y[i];\n#pragma endscop\n  x[0] = y[0];\n}\n")
    with pytest.raises(PolytileError, match=r"the extent of x \(dimension 1\) is not known: pass --shape x=<n>"):
        c_runner.prepare(p, sizes={"n": 5})
    call = c_runner.prepare(p, sizes={"n": 5}, shapes={"x": (1,)})
    assert call.inputs["x"].shape == (1,) and call.inputs["y"].shape == (5,)


@needs_cc
def test_function_mode_opt_schedule_and_compare(tmp_path, capsys):
    # --function: the whole body is the region; schedule -o then opt --function --schedule is opt --function.
    gemm = KERNELS / "gemm.c"
    saved, plain, replayed = tmp_path / "g.json", tmp_path / "plain.c", tmp_path / "replayed.c"
    code, out, _ = run(capsys, "schedule", gemm, "--function", "kernel_gemm", "-o", saved)
    assert code == 0 and "(kernel_gemm)" in out
    assert cli_main(["opt", str(gemm), "--function", "kernel_gemm", "-o", str(plain)]) == 0
    assert cli_main(["opt", str(gemm), "--function", "kernel_gemm", "--schedule", str(saved),
                     "-o", str(replayed)]) == 0
    assert b"polytile opt:" in plain.read_bytes() and replayed.read_bytes() == plain.read_bytes()
    code, out, _ = run(capsys, "compare", gemm, "--function", "kernel_gemm", "--dims", "ni=20,nj=21,nk=22",
                       "--repeat", "1", "--warmup", "0", "-q")
    assert code == 0 and next(ln for ln in out.splitlines() if ln.startswith("opt ")).split()[2] == "ok"


TWO_FUNCTIONS = """void scale(int n, double a, double *restrict x) {
  int i;
#pragma scop
  for (i = 0; i < n; i++)
    x[i] = a * x[i];
#pragma endscop
}

void shift(int m, double (*restrict y)[m]) {
  int i, j;
#pragma scop
  for (i = 1; i < m; i++)
    for (j = 0; j < m; j++)
      y[i][j] = y[i - 1][j] + 1.0;
#pragma endscop
}
"""


@needs_cc
def test_compare_two_functions_one_table_and_file_each(tmp_path, capsys):
    p = tmp_path / "two.c"
    p.write_text(TWO_FUNCTIONS)
    code, out, _ = run(capsys, "compare", p, "--dims", "n=30,m=12", "--scalar", "a=0.5", "--repeat", "1",
                       "--warmup", "0", "-q", "-o", tmp_path / "r.json")
    assert code == 0, out
    assert ": scale()  (n=30; a=0.5)" in out and ": shift()  (m=12)" in out and "y[12x12]" in out
    assert json.loads((tmp_path / "r.scale.json").read_text())["provenance"]["function"] == "scale"
    assert json.loads((tmp_path / "r.shift.json").read_text())["provenance"]["function"] == "shift"
