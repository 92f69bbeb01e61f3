"""The PolyBench harness's pure helpers (benchmarks/bench_polybench.py): kernel discovery on a fake tree,
dump comparison, timer parsing, ratios and geometric means.  The real suite is not run here."""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def pb():
    spec = importlib.util.spec_from_file_location("bench_polybench", ROOT / "benchmarks" / "bench_polybench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_polybench", module)
    spec.loader.exec_module(module)
    return module


def _touch(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _fake_tree(root: Path) -> None:
    _touch(root / "utilities" / "polybench.c")
    _touch(root / "utilities" / "polybench.h")
    _touch(root / "utilities" / "template-for-new-benchmark.c")  # not under a category: not a kernel
    for rel in ("linear-algebra/blas/gemm/gemm", "stencils/jacobi-2d/jacobi-2d", "datamining/covariance/covariance",
                "medley/nussinov/nussinov"):
        _touch(root / f"{rel}.c")
        _touch(root / f"{rel}.h")
    _touch(root / "medley" / "nussinov" / "Nussinov.orig.c")  # no header of its own: not a kernel
    _touch(root / "linear-algebra" / "kernels" / "lonely" / "lonely.c")


def test_discover_finds_kernels_with_headers_in_category_order(pb, tmp_path):
    _fake_tree(tmp_path)
    pb.check_checkout(tmp_path)
    kernels = pb.discover(tmp_path)
    assert [k.name for k in kernels] == ["covariance", "gemm", "nussinov", "jacobi-2d"]
    gemm = kernels[1]
    assert gemm.category == "linear-algebra/blas"
    assert gemm.header == gemm.source.with_suffix(".h") and gemm.folder.name == "gemm"


def test_select_and_checkout_errors(pb, tmp_path):
    _fake_tree(tmp_path)
    kernels = pb.discover(tmp_path)
    assert [k.name for k in pb.select(kernels, ["jacobi-2d", "gemm", "gemm"])] == ["jacobi-2d", "gemm"]
    assert pb.select(kernels, None) == kernels
    with pytest.raises(ValueError, match="unknown kernel.*nope"):
        pb.select(kernels, ["nope"])
    with pytest.raises(ValueError, match="not a PolyBench"):
        pb.check_checkout(tmp_path / "linear-algebra")


DUMP = ("==BEGIN DUMP_ARRAYS==\nbegin dump: C\n0.50 1.25 \n2.00 \nend   dump: C\n"
        "begin dump: x\n7 8 \nend   dump: x\n==END   DUMP_ARRAYS==\n")


def test_identical_dumps_are_bitwise(pb):
    r = pb.compare_dumps(DUMP, DUMP)
    assert r["verdict"] == "bitwise" and r["differ"] == 0 and r["values"] == 5


def test_a_last_digit_difference_is_different_unless_tolerated(pb):
    other = DUMP.replace("1.25", "1.26")
    r = pb.compare_dumps(DUMP, other)
    assert r["verdict"] == "DIFFERENT" and r["where"] == "C[1]: 1.25 vs 1.26"
    # One unit of the last printed digit is what rounding can do to two nearby values.
    r = pb.compare_dumps(DUMP, other, rtol=1e-6)
    assert r["verdict"] == "close" and r["differ"] == 1 and math.isclose(r["max_rel"], 0.01 / 1.26)
    # Two units, or a change in an integer, is beyond it.
    assert pb.compare_dumps(DUMP, DUMP.replace("1.25", "1.27"), rtol=1e-6)["verdict"] == "DIFFERENT"
    r = pb.compare_dumps(DUMP, DUMP.replace("7 8", "7 9"), rtol=1e-6)
    assert r["verdict"] == "DIFFERENT" and r["where"] == "x[1]: 8 vs 9"
    # A large relative tolerance accepts larger moves.
    assert pb.compare_dumps(DUMP, DUMP.replace("2.00", "2.10"), rtol=0.1)["verdict"] == "close"


def test_structural_differences_are_different(pb):
    r = pb.compare_dumps(DUMP, DUMP.replace("2.00 \n", ""), rtol=1.0)
    assert r["verdict"] == "DIFFERENT" and "tokens" in r["where"]
    r = pb.compare_dumps(DUMP, DUMP.replace("dump: x", "dump: y"), rtol=1.0)
    assert r["verdict"] == "DIFFERENT"
    assert pb.compare_dumps(DUMP, DUMP.replace("0.50", "nan"), rtol=1.0)["verdict"] == "DIFFERENT"


def test_parse_time_and_error_line(pb):
    assert pb.parse_time("0.375836\n") == pytest.approx(0.375836)
    assert pb.parse_time("[PolyBench] note\n1.5\n\n") == 1.5
    assert pb.parse_time("") is None and pb.parse_time("Segmentation fault\n") is None
    assert pb.error_line("\n  gemm.c:3:1: error: bad\n   ^\n") == "gemm.c:3:1: error: bad"
    assert pb.error_line("Traceback (most recent call last):\n  File x\nKeyError: 'S1'\n") == "KeyError: 'S1'"
    assert pb.error_line("") == "(no message)"


def test_ratio_geomean_rotate_summarise(pb):
    assert pb.ratio(2.0, 0.5) == 4.0
    assert pb.ratio(None, 1.0) is None and pb.ratio(1.0, None) is None and pb.ratio(1.0, 0.0) is None
    assert pb.geomean([4.0, 1.0, None]) == pytest.approx(2.0)
    assert pb.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert pb.geomean([None]) is None and pb.geomean([]) is None
    assert pb.rotate(["a", "b", "c"], 1) == ["b", "c", "a"]
    assert pb.rotate(["a", "b", "c"], 4) == ["b", "c", "a"] and pb.rotate([], 2) == []
    assert pb.summarise([3.0, None, 1.0, 2.0]) == {"min": 1.0, "median": 2.0, "n": 3}
    assert pb.summarise([None]) == {"min": None, "median": None, "n": 0}


def test_commands_are_argument_lists_outside_the_checkout(pb, tmp_path):
    _fake_tree(tmp_path)
    gemm = pb.select(pb.discover(tmp_path), ["gemm"])[0]
    cmd = pb.optimise_cmd(gemm, tmp_path, "SMALL", tmp_path / "out" / "gemm.c", ["--reassociate"])
    assert cmd[1:4] == ["-m", "polytile", "opt"] and "--assume-no-alias" in cmd and cmd[-1] == "--reassociate"
    assert cmd[cmd.index("-I") + 1] == str(tmp_path / "utilities") and "SMALL_DATASET" in cmd
    exe = tmp_path / "build" / "gemm"
    b = pb.build_cmd("gcc", ["-O2"], gemm.source, gemm, tmp_path, ["POLYBENCH_TIME"], exe)
    assert b[:2] == ["gcc", "-O2"] and "-DPOLYBENCH_TIME" in b and b[b.index("-o") + 1] == str(exe)
    assert str(tmp_path / "utilities" / "polybench.c") in b and b[-1] == "-lm"


def test_variants_keep_the_baseline_and_name_what_they_leave_out(pb):
    vs = [pb.Variant(n, "gcc", (), "original") for n in ("gcc-O3", "graphite", "polly", "polytile", "reassoc")]
    keep, notes = pb.pick_variants(vs, ["polytile", "reassoc"])
    assert [v.name for v in keep] == ["gcc-O3", "polytile", "reassoc"]
    assert notes == ["not timed (--variants): graphite, polly"]
    keep, notes = pb.pick_variants(vs, ["graphite", "polly", "polytile", "reassoc"])
    assert keep == vs and notes == []
    args = pb.make_parser().parse_args(["/tmp/x", "--variants", "polytile"])
    assert args.variants == ["polytile"]
    with pytest.raises(SystemExit):
        pb.make_parser().parse_args(["/tmp/x", "--variants", "icc"])
