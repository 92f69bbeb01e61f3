"""Tests of the ``polytile`` command line (polytile.cli).

Most tests call ``main([...])`` in-process (fast, and capsys sees the output);
two run ``python -m polytile`` in a subprocess to prove the entry point.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import islpy as isl
import numpy as np
import pytest

import polytile
from polytile import cli, config
from polytile.cli import model_commands  # where `polytile show`'s handler lives

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Compiled kernels go to a temporary cache, for in-process calls and subprocesses alike."""
    cache = tmp_path_factory.getbasetemp() / "cli-cache"
    cache.mkdir(mode=0o700, exist_ok=True)  # private whatever the umask: polytile refuses a group-writable cache
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
    # Large enough for a parallel region to pay (cost.parallel_work): 2^21 multiply-adds.
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", "M=256,N=128,K=64")
    assert code == 0, err
    assert re.search(r"\bint pt_matmul\s*\(", out)
    assert "#pragma omp parallel for" in out
    # stdout is the C alone (redirectable); the signature report goes to stderr.
    assert "entry: pt_matmul(A: input float32[256x64], B: input float32[64x128], C: output float32[256x128])" in err
    assert "entry:" not in out


def test_compile_output_file_and_build(capsys, tmp_path):
    dest = tmp_path / "mm.c"
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", "M=256,N=128,K=64", "-o", dest, "--build")
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
    # relu(x) is x < 0 ? 0.0 : x in PlaidML, so an int32 program's relu is float32 (still exact here).
    assert re.search(r"^Y\s+9x14\s+float32\s+0\s+\S+\s+PASS$", out, re.M), out


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
    from polytile import interpreter as reference

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
    code, out, err = run_cli(capsys, "show", EX / "matmul.tile", "--dims", "M=256,N=128,K=64")
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
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dtype", "bfloat16")
    assert code == 2
    assert "invalid choice: 'bfloat16'" in err
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


def test_internal_errors_exit_70_with_one_line(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("a polytile bug")

    monkeypatch.setattr(model_commands, "cmd_show", boom)
    monkeypatch.delenv("POLYTILE_DEBUG", raising=False)
    code, out, err = run_cli(capsys, "show", EX / "matmul.tile")
    assert code == 70
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("polytile: internal error: RuntimeError: a polytile bug")
    assert "this is a bug in polytile" in line and "-v" in line
    # -v shows where it happened.
    code, out, err = run_cli(capsys, "show", EX / "matmul.tile", "-v")
    assert code == 70 and "Traceback (most recent call last)" in err and "in boom" in err


# ---------------------------------------------------------------------------
# Help, version, verbosity
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--help"], ["compile", "--help"], ["run", "--help"], ["show", "--help"],
                                  ["deps", "--help"], ["schedule", "--help"], ["compare", "--help"]])
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
    assert cli.parse_dims("M=64\tN=1") == {"M": 64, "N": 1}
    assert cli.parse_dims("#out=3") == {"out": 3}
    assert cli.parse_shapes("X=6x1, S=scalar") == {"X": (6, 1), "S": ()}
    assert cli.parse_dtypes("A=float64,B=int32") == {"A": "float64", "B": "int32"}
    for bad in ("M=1.5", "M=", "1=2"):
        with pytest.raises(ValueError):
            cli.parse_dims(bad)
    with pytest.raises(ValueError):
        cli.parse_shapes("X=3x")


def test_parse_dims_is_the_pipelines(monkeypatch):
    """One dims parser: the CLI checks its stricter syntax, then converts with pipeline.parse_dims."""
    from polytile import pipeline

    calls = []
    real = pipeline.parse_dims

    def spy(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(pipeline, "parse_dims", spy)
    assert cli.parse_dims("#M=3 N=4") == {"M": 3, "N": 4}
    assert calls == ["#M=3,N=4"]
    for bad in ("M=-3", "1=2", ""):  # the API would accept or ignore these; the command line refuses them
        with pytest.raises(ValueError):
            cli.parse_dims(bad)
    assert len(calls) == 1


# ---------------------------------------------------------------------------
# deps
# ---------------------------------------------------------------------------


def _section(out: str, title: str) -> str:
    """The lines of `polytile deps` output under ``title:`` up to the next blank line."""
    start = out.index(f"\n{title}:") + 1
    end = out.find("\n\n", start)
    return out[start:] if end < 0 else out[start:end]


def test_deps_prints_each_relation_and_the_reduction(capsys):
    code, out, err = run_cli(capsys, "deps", EX / "matmul.tile", "--dims", "M=4,N=5,K=3")
    assert code == 0, err
    assert "specialised to M=4, K=3, N=5" in out  # dims in the order the header introduces them
    assert "  S0: C[i, j : M, N] = +(A[i, k] * B[k, j])" in out  # statement legend
    for title in ("flow (RAW, memory-based)", "flow (RAW, value-based)", "anti (WAR)", "output (WAW)",
                  "reduction"):
        assert f"\n{title}:" in out
    red = _section(out, "reduction")
    # (isl may print the order constraint either way round)
    assert "{ S0[i, j, k] -> S0[i' = i, j' = j, k'] : " in red and re.search(r"k < k'|k' > k", red)
    assert "Z0" not in red  # the initialisation is not part of the reduction
    value = _section(out, "flow (RAW, value-based)")
    # one isl map per statement pair: Z0 -> S0 (first k) and S0 -> S0 (next k)
    assert re.search(r"^  \{ Z0\[o0, o1\] -> S0\[i = o0, j = o1, k = 0\]", value, re.M)
    assert re.search(r"^  \{ S0\[i, j, k\] -> S0\[i' = i, j' = j, k' = 1 \+ k\]", value, re.M)


def test_deps_of_an_elementwise_program_has_no_reduction(capsys):
    code, out, err = run_cli(capsys, "deps", EX / "matmul_bias_relu.tile")
    assert code == 0, err
    assert _section(out, "reduction").splitlines()[1].strip().startswith("{ S0[")
    assert "E1[" in _section(out, "flow (RAW, memory-based)")  # C flows into the elementwise statement
    assert "(none)" in _section(out, "anti (WAR)") or "S0" in _section(out, "anti (WAR)")


# ---------------------------------------------------------------------------
# schedule, compile/run --schedule
# ---------------------------------------------------------------------------

TILE_STEPS = [{"op": "tile", "stmt": "C", "sizes": {"i": 8, "j": 8}}, {"op": "parallel", "stmt": "C", "loop": "i_t"}]
MM_DIMS = "M=24,N=16,K=8"


def _write(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_schedule_default_prints_loop_tree_and_isl_tree(capsys):
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", "M=64,N=32,K=16", "--no-tile")
    assert code == 0, err
    assert "== schedule (loop tree)" in out and "== schedule tree (isl)" in out
    assert re.search(r"^for i in \[0, 63\]:  \[parallel\]$", out, re.M)
    assert "domain: \"{ Z0[o0, o1]" in out
    assert "array contraction" not in out  # nothing to contract in matmul


def test_schedule_shows_and_saves_what_compile_runs(capsys, tmp_path):
    # At 256^3 the autotiler blocks matmul; `schedule` must show that schedule, not the untiled one,
    # and replaying its -o file must give compile's C byte for byte.
    dims = "M=256,N=256,K=256"
    dest = tmp_path / "sched.json"
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", dims, "-o", dest)
    assert code == 0, err
    assert "regtile" in out and "tile(" in out
    code, plain, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", dims)
    assert code == 0, err
    code, replayed, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", dims, "--schedule", dest)
    assert code == 0, err
    assert replayed == plain
    # --no-tile (or --hardware none) is the untiled default, also as compile builds it.
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", dims, "--no-tile")
    assert code == 0, err
    assert "regtile" not in out and re.search(r"^for i in \[0, 255\]:  \[parallel\]$", out, re.M)
    code, out2, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", dims, "--hardware", "none")
    assert code == 0, err
    assert out2 == out


def test_schedule_apply_prints_and_saves(capsys, tmp_path):
    steps = _write(tmp_path / "steps.json", TILE_STEPS)
    dest = tmp_path / "sched.json"
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", MM_DIMS, "--apply", steps, "-o", dest)
    assert code == 0, err
    assert re.search(r"^for i_t in \[0, 2\]:  \[parallel\]$", out, re.M)
    assert re.search(r"^  for j_t in \[0, 1\]:$", out, re.M)
    assert "floor((i)/8)" in out  # the isl tree has the tile loop
    assert f"wrote {dest} (4 steps)" in out
    doc = json.loads(dest.read_text())
    assert [s["op"] for s in doc["steps"]] == ["base", "auto_parallel", "tile", "parallel"]
    assert doc["steps"][2] == {"op": "tile", "stmt": "C", "sizes": {"i": 8, "j": 8}}
    assert doc["meta"]["shapes"] == [[24, 8], [8, 16]] and doc["meta"]["dtypes"] == ["float32", "float32"]


def test_saved_schedule_compiles_to_the_same_c_as_the_schedule_object(capsys, tmp_path):
    from polytile import pipeline

    sched = pipeline.schedule(EX / "matmul.tile", dims=MM_DIMS).tile("C", i=8, j=8).parallel("C", "i_t")
    kernel = polytile.compile(EX / "matmul.tile", schedule=sched)
    want = kernel.source(shapes=[(24, 8), (8, 16)], dtypes=["float32", "float32"])

    steps = _write(tmp_path / "steps.json", TILE_STEPS)
    saved = tmp_path / "sched.json"
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", MM_DIMS, "--apply", steps, "-o", saved)
    assert code == 0, err
    c_file = tmp_path / "mm.c"
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", MM_DIMS, "--schedule", saved, "-o", c_file)
    assert code == 0, err
    assert c_file.read_text() == want  # byte-identical
    assert "floor" in want or "/ 8" in want or "8 *" in want  # and it is tiled


def test_compile_schedule_uses_the_saved_shapes(capsys, tmp_path):
    # A copy of matmul without `// dims:` lines: the schedule's meta gives the sizes (and dtypes).
    src = tmp_path / "mm.tile"
    src.write_text("function (A[M, K], B[K, N]) -> (C) {\n  C[i, j : M, N] = +(A[i, k] * B[k, j]);\n}\n")
    steps = _write(tmp_path / "steps.json", TILE_STEPS)
    saved = tmp_path / "sched.json"
    code, out, err = run_cli(capsys, "schedule", src, "--dims", "M=20,N=12,K=5", "--dtype", "float64",
                             "--apply", steps, "-o", saved)
    assert code == 0, err
    code, out, err = run_cli(capsys, "compile", src, "--schedule", saved)
    assert code == 0, err
    assert f"using the input shapes saved in {saved}: A=20x5, B=5x12" in err
    assert "entry: pt_mm(A: input float64[20x5], B: input float64[5x12], C: output float64[20x12])" in err
    code, out, err = run_cli(capsys, "run", src, "--schedule", saved, "--check", "--repeat", "1", "--warmup", "0")
    assert code == 0, out + err
    assert re.search(r"^C\s+20x12\s+float64\s+0\s+\S+\s+PASS$", out, re.M)


def test_run_with_a_bare_step_list_and_with_fusion(capsys, tmp_path):
    steps = _write(tmp_path / "steps.json", TILE_STEPS)
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dims", MM_DIMS, "--schedule", steps,
                             "--check", "--repeat", "1", "--dtype", "int32")
    assert code == 0, out + err
    assert "PASS" in out
    code, out, err = run_cli(capsys, "run", EX / "matmul_bias_relu.tile", "--fusion", "smart", "--check",
                             "--repeat", "1")
    assert code == 0, out + err
    assert "PASS" in out


def test_compile_fusion_fuses(capsys):
    code, out, err = run_cli(capsys, "compile", EX / "matmul_bias_relu.tile", "--fusion", "none")
    assert code == 0, err
    unfused = out
    code, out, err = run_cli(capsys, "compile", EX / "matmul_bias_relu.tile", "--fusion", "smart")
    assert code == 0, err
    assert out != unfused


def test_schedule_contraction_bytes_are_reported(capsys):
    code, out, err = run_cli(capsys, "schedule", EX / "matmul_bias_relu.tile", "--dims", "M=8,K=4,N=6",
                             "--fusion", "smart")
    assert code == 0, err
    assert "== array contraction" in out
    assert "  C: 192 bytes never stored" in out  # 8 x 6 float32
    assert "memory traffic saved: at least 384 bytes" in out


def test_schedule_illegal_step_exits_1_naming_the_dependence(capsys, tmp_path):
    bad = _write(tmp_path / "bad.json", [{"op": "parallel", "stmt": "C", "loop": "k"}])
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", MM_DIMS, "--apply", bad)
    assert code == 1
    assert "illegal" in err
    assert "loop 'k' of S0 carries a dependence" in err
    assert "dependence S0 -> S0: { S0[i, j, k] -> S0[i' = i, j' = j, k']" in err
    assert "Traceback" not in err
    # compile/run --schedule refuse it the same way, before any C is generated
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--dims", MM_DIMS, "--schedule", bad)
    assert code == 1 and "illegal" in err and out == ""


def test_schedule_file_errors(capsys, tmp_path):
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--apply", tmp_path / "nope.json")
    assert code == 1 and "no such schedule file" in err
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--schedule", junk)
    assert code == 1 and f"{junk}: not valid JSON" in err
    nosteps = _write(tmp_path / "nosteps.json", {"tree": "x"})
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--schedule", nosteps)
    assert code == 1 and "no 'steps' list" in err
    unknown = _write(tmp_path / "unknown.json", [{"op": "teleport", "stmt": "C"}])
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--apply", unknown)
    assert code == 1 and "unknown schedule step 'teleport'" in err
    noloop = _write(tmp_path / "noloop.json", [{"op": "parallel", "stmt": "C", "loop": "q"}])
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--apply", noloop)
    assert code == 1 and "has no loop 'q'" in err


def test_complete_schedule_conflicting_with_fusion_is_a_usage_error(capsys, tmp_path):
    saved = tmp_path / "sched.json"
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", MM_DIMS, "-o", saved)
    assert code == 0, err
    code, out, err = run_cli(capsys, "compile", EX / "matmul.tile", "--schedule", saved, "--fusion", "max")
    assert code == 2 and "is a complete schedule whose base is base(kind='original')" in err
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--apply", saved, "--no-parallel")
    assert code == 2 and "--no-parallel" in err


def test_schedule_no_parallel(capsys):
    code, out, err = run_cli(capsys, "schedule", EX / "matmul.tile", "--dims", MM_DIMS, "--no-parallel")
    assert code == 0, err
    assert "[parallel]" not in out and "auto_parallel" not in out


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------


def _csv_rows(path: Path):
    import csv

    lines = [ln for ln in path.read_text().splitlines(keepends=True) if not ln.startswith("#")]
    return list(csv.DictReader(lines))


def test_compare_writes_csv_and_json_one_row_per_candidate(capsys, tmp_path):
    args = ["compare", EX / "matmul.tile", "--dims", "M=32,N=32,K=32", "--tile", "8,16", "--fusion", "none,smart",
            "--repeat", "2", "--warmup", "1", "-q"]
    names = ["default", "isl-none", "isl-smart", "tile8", "tile16"]
    out_csv = tmp_path / "r.csv"
    code, out, err = run_cli(capsys, *args, "-o", out_csv)
    assert code == 0, out + err
    header = re.search(r"^candidate\s+legal\s+check\s+median ms\s+min ms\s+max ms\s+GFLOP/s\s+speedup$", out, re.M)
    assert header
    for n in names:
        assert re.search(rf"^{n}\s+yes\s+ok\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+x$", out, re.M), n
    rows = _csv_rows(out_csv)
    assert [r["name"] for r in rows] == names
    assert all(r["legal"] == "yes" and r["check"] == "ok" for r in rows)
    assert float(rows[0]["speedup"]) == 1.0
    tile8 = rows[names.index("tile8")]
    assert json.loads(tile8["steps"])[-2:] == [{"op": "tile", "stmt": "C", "sizes": {"i": 8, "j": 8}},
                                               {"op": "parallel", "stmt": "C", "loop": "i_t", "reduction": False}]
    assert "for i_t in [0, 3]:  [parallel]" in tile8["schedule"]
    comments = {ln[2:].split(":", 1)[0] for ln in out_csv.read_text().splitlines() if ln.startswith("# ")}
    assert {"machine", "compiler", "flags", "numpy", "polytile", "date", "program", "dims"} <= comments

    out_json = tmp_path / "r.json"
    code, out, err = run_cli(capsys, *args, "-o", out_json)
    assert code == 0, out + err
    doc = json.loads(out_json.read_text())
    prov = doc["provenance"]
    assert prov["dims"] == {"M": 32, "N": 32, "K": 32} and "C[i, j : M, N]" in prov["program"]
    assert prov["machine"]["cpu_count"] and prov["compiler"]["version"] and prov["flags"]
    assert prov["flops"] == 2 * 32 ** 3
    assert [r["name"] for r in doc["rows"]] == names
    for r in doc["rows"]:
        assert r["check"] == "ok" and r["legal"] and len(r["times_s"]) == 2 and r["gflops"] > 0
        assert r["steps"][0]["op"] == "base" and r["schedule"].startswith("schedule of matmul")


def test_compare_reports_an_illegal_schedule_without_running_it(capsys, tmp_path):
    bad = _write(tmp_path / "kpar.json", [{"op": "parallel", "stmt": "C", "loop": "k"}])
    good = _write(tmp_path / "tiled.json", TILE_STEPS)
    code, out, err = run_cli(capsys, "compare", EX / "matmul.tile", "--dims", "M=16,N=8,K=4", "--schedules", bad,
                             good, "--repeat", "1", "--warmup", "0", "--dtype", "int32")
    assert code == 0, out + err  # an illegal candidate is a finding, not a failure
    assert re.search(r"^kpar\s+no\s+illegal\s+-\s+-\s+-\s+-\s+-$", out, re.M)
    assert re.search(r"^tiled\s+yes\s+ok\s", out, re.M)
    assert "kpar: parallel(stmt='C', loop='k', reduction=False) is illegal" in out
    assert "S0 -> S0" in out


def test_compare_mismatch_exits_1(capsys, monkeypatch):
    from polytile import interpreter as reference

    real = reference.run
    monkeypatch.setattr(reference, "run", lambda program, *arrays: real(program, *arrays) + 1)
    code, out, err = run_cli(capsys, "compare", EX / "matmul.tile", "--dims", "M=4,N=3,K=2", "--repeat", "1",
                             "--warmup", "0", "-q")
    assert code == 1
    assert re.search(r"^default\s+yes\s+MISMATCH\s", out, re.M)
    assert "12 of 12 elements differ" in out


def test_compare_bad_output_suffix_is_found_before_measuring(capsys, tmp_path):
    code, out, err = run_cli(capsys, "compare", EX / "matmul.tile", "-o", tmp_path / "r.txt")
    assert code == 2 and "name the results file .csv or .json" in err and out == ""
    code, out, err = run_cli(capsys, "compare", EX / "matmul.tile", "--fusion", "some")
    assert code == 2 and "unknown fusion choice 'some'" in err
    code, out, err = run_cli(capsys, "compare", EX / "matmul.tile", "--tile", "0")
    assert code == 2 and "bad tile size '0'" in err


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


# ---------------------------------------------------------------------------
# Size inputs: an input without dimensions used as a size takes its value from --dims
# ---------------------------------------------------------------------------

SIZED = "function (A[N], D) -> (B) {\n  B[i : D] = +(A[i + 1]);\n}\n"


def test_a_size_input_takes_its_value_from_dims(tmp_path, capsys):
    # `function (A[N], D)` with D used as a size: before, `run` asked for --shape D=..., and then for a value
    # no option could give.
    src = tmp_path / "sized.tile"
    src.write_text(SIZED)
    code, out, err = run_cli(capsys, "run", src, "--dims", "N=8,D=5", "--check", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["check"]["ok"] and doc["outputs"][0]["shape"] == [5]
    assert doc["inputs"][1] == {"name": "D", "shape": [], "dtype": "int32"} and doc["dims"]["D"] == 5
    code, out, err = run_cli(capsys, "run", src, "--dims", "N=8,D=3", "--dtype", "float64")
    assert code == 0 and "D int32 = 3 (a size)" in out, out + err
    code, out, err = run_cli(capsys, "compile", src, "--dims", "N=8,D=6")
    assert code == 0 and "B: output float32[6]" in out + err, out + err
    for command in ("schedule", "compare", "deps"):
        code, out, err = run_cli(capsys, command, src, "--dims", "N=8,D=3")
        assert code == 0 and "Traceback" not in err, (command, err)
    assert "S0[i] -> [(i)] : 0 <= i <= 2" in run_cli(capsys, "schedule", src, "--dims", "N=8,D=3")[1]


def test_size_input_mistakes_are_usage_errors(tmp_path, capsys):
    src = tmp_path / "sized.tile"
    src.write_text(SIZED)
    code, out, err = run_cli(capsys, "run", src, "--dims", "N=8")
    assert code == 1 and "size input D of" in err and "pass --dims D=<size>" in err, err
    code, out, err = run_cli(capsys, "run", src, "--dims", "N=8", "--shape", "D=scalar")
    assert code == 2 and "D is a size input" in err and "--dims D=<size>" in err, err
    code, out, err = run_cli(capsys, "run", src, "--dims", "N=8,D=3", "--dtypes", "D=float32")
    assert code == 2 and "D is a size input, an integer" in err, err


def test_the_api_takes_size_inputs_with_the_dims(tmp_path):
    from polytile import compare as compare_mod

    src = tmp_path / "sized.tile"
    src.write_text(SIZED)
    assert polytile.schedule(src, dims="N=8,D=3").scop.statement("S0").domain.count_val().to_python() == 3
    result = compare_mod.compare(src, "N=8,D=4")
    assert result.rows[0].check == "ok" and result.provenance["dims"]["D"] == 4
    result = compare_mod.compare(src, {"A": (8,), "D": ()}, sizes={"D": 2})
    assert result.rows[0].check == "ok" and result.provenance["dims"]["D"] == 2
    with pytest.raises(polytile.ShapeError, match="size input D needs a value"):
        polytile.schedule(src, dims="N=8")


@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint32", "int16", "float16", "bool"])
def test_run_checks_every_element_type_the_language_has(dtype, capsys):
    # --dtype offered float32/float64/int32/int64 only; the language (and the openmp target) has all of
    # polytile.dtypes.SUPPORTED.
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dims", "M=19,N=7,K=5", "--dtype", dtype,
                             "--check", "--repeat", "1", "--warmup", "0")
    assert code == 0 and "check against the reference interpreter: PASS" in out, out + err
    assert f"A {dtype}[19x5]" in out
    if dtype.startswith("u"):
        assert "unsigned ones non-negative" in out


def test_float16_outputs_are_checked_against_a_float16_tolerance(capsys):
    # float16 arithmetic rounds differently in C (_Float16 evaluated in float) than in numpy (per
    # operation): a 256-term dot product drifts by several units in the last place. It was held to the
    # float32 tolerance and reported as "integer/bool outputs exact".
    code, out, err = run_cli(capsys, "run", EX / "matmul.tile", "--dims", "M=32,N=32,K=256", "--dtype", "float16",
                             "--inputs", "normal", "--check", "--repeat", "1", "--warmup", "0")
    assert code == 0 and "float16 max_abs_err <= 0.01 * max(1, max|ref|)" in out, out + err
    assert "integer/bool" not in out


def test_size_input_types_and_saved_values(tmp_path, capsys, monkeypatch):
    src = tmp_path / "sized.tile"
    src.write_text(SIZED)
    # --dtype is the arrays' type: a size input stays int32 (int8 cannot hold 200: it was an OverflowError).
    code, out, err = run_cli(capsys, "run", src, "--dims", "N=300,D=200", "--dtype", "int8", "--check")
    assert code == 0 and "D int32 = 200" in out, out + err
    code, out, err = run_cli(capsys, "run", src, "--dims", "N=300,D=200", "--dtypes", "D=int8")
    assert code == 2 and "size input D=200 does not fit its type int8" in err, err
    code, out, err = run_cli(capsys, "run", src, "--dims", "N=300,D=200", "--dtypes", "D=uint8", "--check")
    assert code == 0 and "D uint8 = 200" in out, out + err
    # A saved schedule keeps the values it was made for: `run --schedule` needs no --dims (as it suggests).
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "schedule", src, "--dims", "N=8,D=3", "-o", "s.json")
    assert code == 0 and json.loads((tmp_path / "s.json").read_text())["meta"]["sizes"] == {"D": 3}
    code, out, err = run_cli(capsys, "run", src, "--schedule", "s.json", "--check")
    assert code == 0 and "D int32 = 3 (a size)" in out and "D=3" in err, out + err


@pytest.mark.parametrize("example", ["mean", "softmax", "math_builtins", "casts", "geomean"])
def test_float16_divisions_and_functions_link_and_check(example, capsys):
    # float16 went down the integer paths: pt_div_float16 / pt_cvt_float16 were called and never defined.
    code, out, err = run_cli(capsys, "run", EX / f"{example}.tile", "--dtype", "float16", "--inputs", "normal",
                             "--check", "--repeat", "1", "--warmup", "0")
    assert code == 0 and "check against the reference interpreter: PASS" in out, out + err
