"""The ``opt`` cache of the C optimiser (:mod:`polytile.c_optimiser.result_cache`).

* optimising the same file with the same options twice optimises once: the
  second call is a hit, with the same output (and, for ``polytile opt``, the
  same printed notes; ``--verify`` still builds and compares on a hit);
* any change of the input (the file's bytes, an included header) or of an
  option is a miss;
* a damaged document is a miss, and a cache that cannot be used never fails
  the optimisation;
* a result whose code generation ran out of time is not kept.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from polytile import c_optimiser, c_runner, config
from polytile.c_optimiser import optimize_c, optimize_regions, result_cache
from polytile.cli import main as cli_main

KERNELS = Path(__file__).resolve().parent / "c_kernels"
GCC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(GCC is None, reason="no C compiler")
#: A preset, not "host": the tile sizes then do not depend on the machine running the tests.
HW = "x86-avx512"


@pytest.fixture
def cache(tmp_path):
    """A private, empty cache directory for one test, and zeroed counters."""
    d = tmp_path / "cache"
    with config.override(cache_dir=d):
        result_cache.stats.reset()
        yield d


@pytest.fixture
def gemm(tmp_path) -> Path:
    p = tmp_path / "gemm.c"
    p.write_bytes((KERNELS / "gemm.c").read_bytes())
    return p


def documents(cache_dir: Path):
    return sorted((cache_dir / "opt").glob("*.json"))


def test_the_second_identical_call_is_a_hit_with_the_same_output(cache, gemm, monkeypatch):
    first = optimize_c(gemm, hardware=HW)
    assert (result_cache.stats.misses, result_cache.stats.stores, result_cache.stats.hits) == (1, 1, 0)
    assert len(documents(cache)) == 1

    def must_not_run(*a, **k):
        raise AssertionError("optimised again on a cache hit")

    monkeypatch.setattr(c_optimiser.file, "optimize_region", must_not_run)
    assert optimize_c(gemm, hardware=HW) == first
    assert result_cache.stats.hits == 1
    # The same result through optimize_regions: the regions carry their text and notes, no schedule.
    out, [r] = optimize_regions(gemm, hardware=HW, cache=True)
    assert out.decode() == first and r.text is not None and r.schedule is None
    assert any(n.startswith("tiled ") for n in r.notes) and r.cscop.function == "kernel_gemm"
    # cache=False optimises (here: reaches the patched optimiser).
    with pytest.raises(AssertionError, match="optimised again"):
        optimize_c(gemm, hardware=HW, cache=False)


def test_a_hit_returns_the_notes_of_the_miss(cache, gemm):
    out, results = optimize_regions(gemm, hardware=HW, cache=True)
    out2, results2 = optimize_regions(gemm, hardware=HW, cache=True)
    assert result_cache.stats.hits == 1 and out2 == out
    assert [(r.text, r.notes, r.cscop.lines) for r in results2] == [(r.text, r.notes, r.cscop.lines) for r in results]


@pytest.mark.parametrize("change", [
    {"tile": False}, {"parallel": False}, {"fusion": "max"}, {"hardware": "x86-avx2"}, {"reassociate": True},
    {"params": {"ni": 64}}, {"assume_no_alias": True}, {"function": "kernel_gemm"}, {"pure": ["f"]},
    {"cpp_args": ["-DUNUSED=1"]}, {"schedule": [{"op": "base", "kind": "original"}]},
])
def test_any_other_option_is_a_miss(cache, gemm, change):
    base = optimize_c(gemm, hardware=HW)
    other = optimize_c(gemm, **{"hardware": HW, **change})
    assert result_cache.stats.hits == 0 and result_cache.stats.misses == 2
    assert other == optimize_c(gemm, **{"hardware": HW, **change}, cache=False)
    assert len(documents(cache)) == 2
    assert optimize_c(gemm, hardware=HW) == base and result_cache.stats.hits == 1


def test_a_changed_source_or_path_is_a_miss(cache, gemm, tmp_path):
    optimize_c(gemm, hardware=HW)
    gemm.write_bytes(gemm.read_bytes().replace(b"C[i][j] *= beta;", b"C[i][j] *= beta * 2.0;"))
    assert "beta * 2.0" in optimize_c(gemm, hardware=HW)
    gemm.write_bytes(gemm.read_bytes() + b"/* a comment */\n")
    optimize_c(gemm, hardware=HW)
    # Another path to the same bytes: located notes name the path, so it is another key too.
    copy = tmp_path / "sub" / "gemm.c"
    copy.parent.mkdir()
    copy.write_bytes(gemm.read_bytes())
    optimize_c(copy, hardware=HW)
    assert result_cache.stats.hits == 0 and result_cache.stats.misses == 4 and len(documents(cache)) == 4


def test_a_changed_header_is_a_miss(cache, tmp_path):
    (tmp_path / "sizes.h").write_text("#define N 64\n")
    src = tmp_path / "k.c"
    src.write_text('#include "sizes.h"\nvoid kernel(double A[restrict N][N], double B[restrict N][N]) {\n  int i, j;\n#pragma scop\n'
                   "  for (i = 0; i < N; i++)\n    for (j = 0; j < N; j++)\n      B[i][j] = 2.0 * A[i][j];\n"
                   "#pragma endscop\n}\n")
    assert "N != 64" in optimize_c(src, hardware=HW)
    (tmp_path / "sizes.h").write_text("#define N 32\n")
    text = optimize_c(src, hardware=HW)
    assert "N != 32" in text and "N != 64" not in text
    assert result_cache.stats.hits == 0 and result_cache.stats.misses == 2


def test_a_damaged_document_is_a_miss(cache, gemm):
    want = optimize_c(gemm, hardware=HW)
    [doc] = documents(cache)
    text = doc.read_text()
    doc.write_text(text[: len(text) // 2])  # truncated
    assert optimize_c(gemm, hardware=HW) == want
    assert result_cache.stats.hits == 0 and result_cache.stats.misses == 2 and result_cache.stats.stores == 2
    # A document whose hash matches but whose content is not an optimiser result (written by hand).
    key = doc.stem
    doc.unlink()
    from polytile.runtime.json_cache import json_put

    json_put("opt", key, {"format": result_cache.FORMAT, "output": "garbage", "regions": [{"where": 1}]})
    assert optimize_c(gemm, hardware=HW) == want
    assert result_cache.stats.hits == 0 and result_cache.stats.misses == 3
    assert optimize_c(gemm, hardware=HW) == want and result_cache.stats.hits == 1


def test_an_unusable_cache_never_fails_the_optimisation(tmp_path, gemm):
    want = optimize_c(gemm, hardware=HW, cache=False)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # writable by others: never trusted, never read or written
    blocked = tmp_path / "a_file"
    blocked.write_text("not a directory")
    for cache_dir in (shared, blocked, blocked / "below"):
        with config.override(cache_dir=cache_dir):
            result_cache.stats.reset()
            assert optimize_c(gemm, hardware=HW) == want
            assert optimize_c(gemm, hardware=HW) == want
            assert (result_cache.stats.hits, result_cache.stats.stores) == (0, 0)
    assert not any(shared.iterdir())


def test_a_result_that_ran_out_of_time_is_not_kept(cache, gemm, monkeypatch):
    from polytile.c_optimiser import region

    calls = []
    real = region.with_deadline

    def slow_once(work, seconds):
        calls.append(seconds)
        return None if len(calls) == 1 else real(work, seconds)  # the first attempt "takes too long"

    monkeypatch.setattr(region, "with_deadline", slow_once)
    out, [r] = optimize_regions(gemm, hardware=HW, cache=True)
    assert r.timed_out and any("took over" in n for n in r.notes) and r.text is not None
    assert result_cache.stats.stores == 0 and not documents(cache)


def run(capsys, *argv):
    capsys.readouterr()
    code = cli_main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_polytile_opt_prints_the_same_on_a_hit(cache, capsys, tmp_path):
    src = tmp_path / "mixed.c"
    src.write_text("void kernel(int n, double A[n], double *p) {\n  int i;\n#pragma scop\n"
                   "  for (i = 0; i < n; i++) A[i] = A[i] * 2.0;\n#pragma endscop\n"
                   "#pragma scop\n  for (i = 0; i < n; i++) A[i] = *p;\n#pragma endscop\n}\n")
    first = run(capsys, "opt", src, "--skip-nonaffine", "--hardware", HW, "-v")
    second = run(capsys, "opt", src, "--skip-nonaffine", "--hardware", HW, "-v")
    assert first[0] == 0 and "left as it is" in first[2]
    assert second == first and result_cache.stats.hits == 1


@needs_cc
def test_opt_verify_still_builds_and_compares_on_a_hit(cache, capsys, gemm, monkeypatch):
    verified = []
    real = c_runner.verify

    def counting(*a, **k):
        verified.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(c_runner, "verify", counting)
    out_c = gemm.with_name("gemm.opt.c")
    for _ in range(2):
        code, out, err = run(capsys, "opt", gemm, "-o", out_c, "--verify", "--hardware", HW)
        assert code == 0 and "agree bitwise" in err, err
    assert len(verified) == 2 and result_cache.stats.hits == 1
    # A cached result that computes something else is caught on the hit by --verify: the cache holds the
    # optimisation only, never the verdict.
    [doc] = documents(cache)
    data = json.loads(doc.read_text())
    # Every copy: a region may run its parallel or its serial code (polytile.c_optimiser.team).
    wrong = data["doc"]["output"].replace("alpha * A[i][k]", "alpha * 2.0 * A[i][k]")
    assert wrong != data["doc"]["output"]
    from polytile.runtime.json_cache import json_put

    json_put("opt", doc.stem, {**data["doc"], "output": wrong})
    out_c.unlink()
    code, out, err = run(capsys, "opt", gemm, "-o", out_c, "--verify", "--hardware", HW)
    assert code == 1 and "differs" in err and not out_c.exists() and result_cache.stats.hits == 2
