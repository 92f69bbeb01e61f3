"""Tests of the ``polytile`` command line (polytile.cli).

Most tests call ``main([...])`` in-process (fast, and capsys sees the output);
two run ``python -m polytile`` in a subprocess to prove the entry point.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import islpy as isl
import numpy as np
import pytest

from polytile import cli, config

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Compiled kernels go to a temporary cache, for in-process calls and subprocesses alike."""
    cache = tmp_path_factory.getbasetemp() / "cli-cache"
    cache.mkdir(exist_ok=True)
    monkeypatch.setenv("POLYTILE_CACHE_DIR", str(cache))
    with config.override(cache_dir=cache):
        yield cache


def run_cli(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------
# compile
# ---------------------------------------------------------------------------


def test_compile_prints_c_with_entry_and_parallel_loop(capsys):
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", "M=16,N=8,K=4")
    assert code == 0, err
    assert re.search(r"\bint pt_matmul\s*\(", out)
    assert "#pragma omp parallel for" in out
    # stdout is the C alone (redirectable); the signature report goes to stderr.
    assert "entry: pt_matmul(A: input float32[16x4], B: input float32[4x8], C: output float32[16x8])" in err
    assert "entry:" not in out


def test_compile_output_file_and_build(capsys, tmp_path):
    dest = tmp_path / "mm.c"
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", "M=16,N=8,K=4", "-o", dest, "--build")
    assert code == 0, err
    text = dest.read_text()
    assert "pt_matmul" in text and "#pragma omp parallel for" in text
    assert f"wrote {dest}" in out
    lib = re.search(r"^library: (.+)$", out, re.M)
    assert lib and Path(lib.group(1)).is_file()


def test_compile_dims_with_spaces_repeated_and_dtype(capsys):
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", "M=5, N=6", "--dims", "K=7",
                             "--dtype", "float64", "--dtypes", "B=int32")
    assert code == 0, err
    assert "A: input float64[5x7], B: input int32[7x6], C: output float64[5x6]" in err


def test_compile_unwritable_output_is_a_clean_error(capsys, tmp_path):
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "-o", tmp_path / "no" / "such" / "dir.c")
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("polytile: error: cannot write")


def test_unknown_target_is_a_user_error(capsys):
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--target", "fpga")
    assert code == 1
    assert "polytile: error: unknown target 'fpga'" in err


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name, dims", [("matmul", "M=24,N=16,K=8"), ("conv2d", "N=1,H=9,W=7,CI=3,KH=2,KW=3,CO=5")])
def test_run_check_passes(capsys, name, dims):
    code, out, err = run_cli(capsys, "run", EX / f"{name}.tile", "--dims", dims, "--check", "--repeat", "2")
    assert code == 0, out + err
    assert "PASS" in out and "FAIL" not in out
    assert "GFLOP/s" in out
    assert "max_abs_err <= 0.0001 * max(1, max|ref|)" in out  # the tolerance is stated


def test_run_uses_the_files_dims_line(capsys):
    code, out, err = run_cli(capsys, "run", EX / "conv2d.tile", "--check", "--repeat", "1", "--warmup", "0")
    assert code == 0, out + err
    # The first `// dims:` line of conv2d.tile, announced on stderr.
    assert "no --dims given: using N=2, H=16, W=16, CI=4, KH=3, KW=3, CO=8" in err
    assert re.search(r"^O\s+2x14x14x8\s+float32\s+0\s+\S+\s+PASS$", out, re.M)


def test_run_table_and_flops(capsys):
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dims", "M=8,N=4,K=3", "--repeat", "3")
    assert code == 0, err
    assert re.search(r"^output\s+shape\s+dtype$", out, re.M)
    assert re.search(r"^C\s+8x4\s+float32$", out, re.M)
    assert "flops    192 (2 per contraction point)" in out  # 8*4*3 points
    assert re.search(r"median [0-9.]+ ms, min [0-9.]+ ms per call over 3 run\(s\)", out)


def test_run_integer_dtype_is_checked_exactly(capsys):
    code, out, err = run_cli(capsys, "run", EX / "matmul_bias_relu.tile", "--dims", "M=9,K=5,N=14",
                             "--dtype", "int32", "--check", "--repeat", "1")
    assert code == 0, out + err
    assert re.search(r"^Y\s+9x14\s+int32\s+0\s+exact\s+PASS$", out, re.M)


def test_run_scalar_inputs_and_several_outputs(capsys):
    # gemm has rank-0 inputs (Alpha[], Beta[]); frobenius has two rank-0 outputs.
    code, out, err = run_cli(capsys, "run", EX / "gemm.tile", "--check", "--repeat", "1", "--dtype", "float64")
    assert code == 0, out + err
    assert "Alpha float64[scalar]" in out
    code, out, err = run_cli(capsys, "run", EX / "frobenius.tile", "--check", "--repeat", "1", "--inputs", "normal")
    assert code == 0, out + err
    assert re.search(r"^SS\s+scalar\s+float32", out, re.M) and re.search(r"^Norm\s+scalar\s+float32", out, re.M)


def test_run_shape_option_for_an_any_rank_input(capsys):
    code, out, err = run_cli(capsys, "run", EX / "elementwise_chain.tile", "--dims", "N=5", "--shape", "X=3x1",
                             "--check", "--repeat", "1", "--inputs", "normal")
    assert code == 0, out + err
    assert re.search(r"^Z\s+3x5\s+float32", out, re.M)


def test_run_fail_exits_1(capsys, monkeypatch):
    from polytile import reference

    real = reference.run

    def off_by_one(program, *arrays):
        return real(program, *arrays) + 1

    monkeypatch.setattr(reference, "run", off_by_one)
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dims", "M=4,N=3,K=2", "--check", "--repeat", "1")
    assert code == 1
    assert re.search(r"^C\s+4x3\s+float32\s+1\s+\S+\s+FAIL$", out, re.M)
    assert "12 of 12 elements differ; worst at [0, 0]" in out
    assert out.rstrip().endswith("FAIL")


def test_positive_inputs_from_the_file():
    hints = cli.read_hints(EX / "geomean.tile", (EX / "geomean.tile").read_text())
    assert hints.positive and hints.dims == {"M": 32, "N": 16}
    target = cli.Target(EX / "geomean.tile", None, hints, {}, ((50, 7),), ("float32",), "")
    for kind in ("int", "normal"):
        (a,) = cli.make_inputs(target, kind, seed=1)
        assert a.dtype == np.float32 and a.min() >= 1 and a.max() <= 4
    hints.positive = False
    (a,) = cli.make_inputs(target, "int", seed=1)
    assert a.min() < 0 and set(np.unique(a)) <= set(range(-4, 5))


def test_inputs_keep_rank_zero():
    target = cli.Target(Path("x.tile"), None, cli.FileHints(), {}, ((), (2, 3)), ("int64", "float64"), "")
    s, m = cli.make_inputs(target, "int", seed=0)
    assert s.shape == () and s.dtype == np.int64 and m.shape == (2, 3)


# ---------------------------------------------------------------------------
# check_output and the flop count
# ---------------------------------------------------------------------------


def test_check_output_rules():
    ref = np.array([[1.0, -np.inf], [np.nan, 1000.0]], np.float32)
    assert cli.check_output("O", ref.copy(), ref).ok  # equal infinities and NaNs agree
    near = ref.copy()
    near[1, 1] += 0.05  # within 1e-4 * 1000
    assert cli.check_output("O", near, ref).ok
    far = ref.copy()
    far[1, 1] += 0.5
    c = cli.check_output("O", far, ref)
    assert not c.ok and "worst at [1, 1]" in c.detail
    nan = ref.copy()
    nan[0, 0] = np.nan
    assert not cli.check_output("O", nan, ref).ok
    ints = np.arange(6, dtype=np.int64)
    assert cli.check_output("I", ints.copy(), ints).ok
    assert cli.check_output("I", ints.copy(), ints).tol_text == "exact"
    off = ints.copy()
    off[3] += 1
    assert not cli.check_output("I", off, ints).ok
    assert not cli.check_output("I", ints.astype(np.int32), ints).ok  # dtype mismatch is a failure
    assert not cli.check_output("I", ints[:5], ints).ok  # shape mismatch too


def test_count_points_box_scan_and_limit(monkeypatch):
    box = isl.Set("{ S[i, j, k] : 0 <= i < 100 and 0 <= j < 200 and 0 <= k < 300 }")
    assert cli.count_points(box) == 100 * 200 * 300
    tri = isl.Set("{ S[i, k] : 0 <= k <= i < 50 }")
    assert cli.count_points(tri) == 50 * 51 // 2
    strided = isl.Set("{ S[i] : 0 <= i < 10 and exists q : i = 2q }")
    assert cli.count_points(strided) == 5
    assert cli.count_points(isl.Set("{ S[i] : 0 <= i < 0 }")) == 0
    monkeypatch.setattr(cli, "COUNT_SCAN_LIMIT", 10)
    assert cli.count_points(tri) is None  # too big to scan now: skipped, not slow
    assert cli.count_points(box) == 100 * 200 * 300  # boxes never scan


# ---------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------


def test_show_prints_program_scop_deps_schedule(capsys):
    code, out, err = run_cli(capsys, "show", EX / "matmul.tile", "--dims", "M=4,N=5,K=3")
    assert code == 0, err
    assert "C[i, j : M, N] = +(A[i, k] * B[k, j]);" in out
    assert "domain: { S" in out
    assert "{ S0[i, j, k] -> A[i, k]" in out  # an access map
    assert "flow (RAW, memory-based):" in out and "reduction:" in out
    assert "S0[i, j, k] -> S0[i' = i, j' = j, k']" in out  # the reduction dependence
    assert "== schedule tree (isl)" in out and "mark: \"parallel" in out


def test_show_without_sizes_prints_only_the_program(capsys, tmp_path):
    f = tmp_path / "mm.tile"
    f.write_text("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }\n")
    code, out, err = run_cli(capsys, "show", f)
    assert code == 0, err
    assert "function (A[M, K], B[K, N]) -> (C) {" in out
    assert "domain" not in out
    assert "--dims M=<size>,K=<size>,N=<size>" in err


def test_show_uses_the_files_dims(capsys):
    code, out, err = run_cli(capsys, "show", EX / "softmax.tile")
    assert code == 0, err
    assert "using M=32, N=48" in err
    assert "{ S0[i, j] : 0 <= i <= 31 and 0 <= j <= 47 }" in out


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_parse_error_has_location_and_caret(capsys, tmp_path):
    f = tmp_path / "bad.tile"
    f.write_text("function (A[M]) -> (B) {\n  B = A +* 2;\n}\n")
    code, out, err = run_cli(capsys, "compile", f, "--dims", "M=4")
    assert code == 1
    lines = err.rstrip("\n").splitlines()
    assert lines[0] == f"{f}:2:10: error: expected an expression, found '*'"  # no "polytile: error:" prefix
    assert lines[1] == "    B = A +* 2;"
    assert lines[2] == "           ^"
    assert out == ""


def test_semantic_error_in_show(capsys, tmp_path):
    f = tmp_path / "sem.tile"
    f.write_text("function (A[M]) -> (B) {\n  B = Q * 2;\n}\n")
    code, out, err = run_cli(capsys, "show", f)
    assert code == 1
    assert err.startswith(f"{f}:2:") and "Q" in err and "^" in err


def test_missing_dims_names_them(capsys, tmp_path):
    f = tmp_path / "mm.tile"
    f.write_text("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }\n")
    code, out, err = run_cli(capsys, "run", f)
    assert code == 1
    assert err.startswith("polytile: error: dimensions M, K, N")
    assert "pass --dims M=<size>,K=<size>,N=<size>" in err
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", "M=4,N=3")
    assert code == 1
    assert "dimension K of" in err and "--dims K=<size>" in err


def test_missing_shape_for_any_rank_input(capsys):
    code, out, err = run_cli(capsys, "run", EX / "elementwise_chain.tile", "--dims", "N=3")
    assert code == 1
    assert "input X is declared without dimensions: pass --shape X=" in err


@pytest.mark.parametrize("bad", ["M=abc", "M", "M=-3", "=4", "M=4,,N"])
def test_bad_dims_syntax(capsys, bad):
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", bad)
    assert code == 2
    assert "argument --dims:" in err


def test_bad_dims_message_names_the_item(capsys):
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dims", "M=64,N=abc")
    assert code == 2
    assert "bad item 'N=abc'" in err


def test_unknown_dtype(capsys):
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dtype", "float16")
    assert code == 2
    assert "invalid choice: 'float16'" in err
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dtypes", "A=complex64")
    assert code == 2
    assert "unknown dtype 'complex64' for A" in err


def test_dtypes_and_shape_must_name_inputs(capsys):
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dtypes", "Q=int32")
    assert code == 2
    assert "polytile run: error: --dtypes names Q" in err and "the inputs are A, B" in err
    code, out, err = run_cli(capsys, "show", EX / "matmul.tile", "--shape", "Z=2x2")
    assert code == 2
    assert "--shape names Z" in err


def test_missing_file(capsys, tmp_path):
    code, out, err = run_cli(capsys, "run", tmp_path / "nope.tile")
    assert code == 1
    assert err.strip() == f"polytile: error: no such Tile file: {tmp_path / 'nope.tile'}"
    code, out, err = run_cli(capsys, "show", tmp_path)
    assert code == 1 and "not a file" in err


def test_non_utf8_file(capsys, tmp_path):
    f = tmp_path / "bin.tile"
    f.write_bytes(b"\xff\xfe\x00garbage")
    code, out, err = run_cli(capsys, "show", f)
    assert code == 1 and "is not UTF-8 text" in err


def test_bad_header_comment_points_at_it(capsys, tmp_path):
    f = tmp_path / "h.tile"
    f.write_text("// dims: M=4, N=x\nfunction (A[M, N]) -> (B) { B = A * 2; }\n")
    code, out, err = run_cli(capsys, "show", f)
    assert code == 1
    assert err.startswith(f"{f}:1:9: error: bad `// dims:` line: bad item 'N=x'")


def test_internal_errors_are_not_swallowed(monkeypatch):
    def boom(args):
        raise RuntimeError("a polytile bug")

    monkeypatch.setattr(cli, "cmd_show", boom)
    with pytest.raises(RuntimeError, match="a polytile bug"):
        cli.main(["show", str(EX / "matmul.tile")])


# ---------------------------------------------------------------------------
# Help, version, verbosity
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--help"], ["compile", "--help"], ["run", "--help"], ["show", "--help"]])
def test_help(capsys, argv):
    code, out, err = run_cli(capsys, *argv)
    assert code == 0
    assert "usage: polytile" in out and "examples:" in out
    # Every example in the epilog names a file that exists.
    for path in re.findall(r"polytile \w+ (examples/\S+\.tile)", out):
        assert (ROOT / path).is_file(), path


def test_no_command_prints_help(capsys):
    code, out, err = run_cli(capsys)
    assert code == 2 and "usage: polytile" in err


def test_version(capsys):
    import polytile

    code, out, err = run_cli(capsys, "--version")
    assert code == 0 and out.strip() == f"polytile {polytile.__version__}"


def test_verbose_sets_debug_only_for_the_command(capsys):
    before = config.get_config().debug
    code, out, err = run_cli(capsys, "show", EX / "matmul.tile", "--dims", "M=4,N=5,K=3", "-v")
    assert code == 0
    assert "[polytile:pipeline] lower" in err
    assert "[polytile:lower]" not in err  # level 1 only: no IR dumps
    assert config.get_config().debug == before
    code, out, err = run_cli(capsys, "-v", "show", EX / "matmul.tile", "--dims", "M=4,N=5,K=3")
    assert "[polytile:pipeline] lower" in err


def test_option_parsers():
    assert cli.parse_dims("M=64, N=48,K=32") == {"M": 64, "N": 48, "K": 32}
    assert cli.parse_dims("#out=3") == {"out": 3}
    assert cli.parse_shapes("X=6x1, S=scalar") == {"X": (6, 1), "S": ()}
    assert cli.parse_dtypes("A=float64,B=int32") == {"A": "float64", "B": "int32"}
    for bad in ("M=1.5", "M=", "1=2"):
        with pytest.raises(ValueError):
            cli.parse_dims(bad)
    with pytest.raises(ValueError):
        cli.parse_shapes("X=3x")


# ---------------------------------------------------------------------------
# The real entry point
# ---------------------------------------------------------------------------


def _python_m(*argv):
    env = dict(os.environ)
    env.pop("POLYTILE_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "polytile", *map(str, argv)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def test_python_m_polytile_run_check():
    r = _python_m("run", "examples/matmul.tile", "--dims", "M=16,N=8,K=4", "--check", "--repeat", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout


def test_python_m_polytile_errors(tmp_path):
    f = tmp_path / "bad.tile"
    f.write_text("function (A[M]) -> (B) {\n  B = A +* 2;\n}\n")
    r = _python_m("show", f)
    assert r.returncode == 1
    assert f"{f}:2:10: error:" in r.stderr and "Traceback" not in r.stderr
    r = _python_m("compile", "examples/matmul.tile", "--dims", "M=abc")
    assert r.returncode == 2 and "argument --dims" in r.stderr
