"""ASan + UBSan on a few examples and C kernels at odd shapes (the CI slice of tests/fuzz/sanitize.py).

Six Tile examples and four C kernels (as written and as ``polytile opt`` writes them) are built with
``-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -fopenmp`` and run in
worker subprocesses preloaded with gcc's ASan runtime (``LD_PRELOAD``, ``ASAN_OPTIONS=detect_leaks=0``),
at shapes with sizes of 1, primes and sizes just past a tile.  Any sanitizer report, crash, Python
error or wrong result fails the test, naming the case and quoting the report.  The whole campaign (every
example, every kernel, more shapes) is ``python tests/fuzz/sanitize.py``.

Skipped only when the toolchain genuinely has no sanitizer runtime (no gcc, or gcc without libasan /
libubsan); any other failure to build or load a sanitized library fails.
"""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
KERNELS = HERE / "c_kernels"


def _load_sanitize():
    spec = importlib.util.spec_from_file_location("polytile_fuzz_sanitize", HERE / "fuzz" / "sanitize.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


san = _load_sanitize()


def _runtime_missing() -> str:
    """Why the sanitizer runtime is missing ('' when it is there)."""
    if shutil.which("gcc") is None:
        return "no gcc"
    if san.sanitizer_runtime() is None:
        return "gcc has no libasan.so (gcc -print-file-name=libasan.so)"
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "p.c"
        src.write_text("int p(int x) { return x + 1; }\n")
        r = subprocess.run(["gcc", *san.TILE_FLAGS, "-o", str(Path(d) / "libp.so"), str(src)],
                           capture_output=True, text=True)
        if r.returncode != 0 and ("asan" in r.stderr or "ubsan" in r.stderr):
            return f"gcc cannot link the sanitizer runtime: {r.stderr.strip()[:200]}"
    return ""


_MISSING = _runtime_missing()
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"sanitizer runtime missing: {_MISSING}")


def _tile(name, label, dims, dtype="float64", options="default", named=None):
    return {"kind": "tile", "file": str(EXAMPLES / name), "label": label, "dims": dims,
            "named_shapes": named or {}, "positive": name in ("geomean.tile", "math_builtins.tile"),
            "dtype": dtype, "options": options}


def _c(name, label, sizes, scalars=None, alias=False):
    return {"kind": "c", "file": str(KERNELS / name), "label": label, "sizes": sizes, "scalars": scalars or {},
            "assume_no_alias": alias}


TILE_CASES = [
    _tile("matmul.tile", "primes", {"M": 7, "K": 13, "N": 3}),
    _tile("conv2d.tile", "plus1", {"N": 3, "H": 17, "W": 17, "CI": 5, "KH": 4, "KW": 4, "CO": 9}, "float32"),
    _tile("softmax.tile", "ones", {"M": 1, "N": 1}),
    _tile("maxpool.tile", "primes", {"N": 7, "H": 3, "W": 5, "C": 11}, "float32", "smart"),
    _tile("stencil2d.tile", "plus1", {"B": 3, "H": 33, "W": 25}, "float64", "smart"),
    _tile("slice_update.tile", "primes", {"M": 17, "N": 13, "R": 5, "C": 7}, "int32"),
]

C_CASES = [
    _c("gemm.c", "primes", {"ni": 7, "nj": 3, "nk": 5}),
    _c("jacobi-2d.c", "33", {"tsteps": 3, "n": 33}),
    _c("lu.c", "ones", {"n": 1}),
    _c("features.c", "primes", {"n": 13}),
]


def test_cases_exist():
    for case in TILE_CASES + C_CASES:
        assert Path(case["file"]).exists(), case["file"]


@pytest.mark.parametrize("kind", ["tile", "c"])
def test_sanitizers_clean(kind, tmp_path):
    libasan = san.sanitizer_runtime()
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    ok, why = san.sanitizer_works(libasan, str(cache))
    assert ok, why  # the runtime is there (else skipped): a failure to load is a real problem
    cases = TILE_CASES if kind == "tile" else C_CASES
    records = san.run_group(cases, san.worker_env(libasan, str(cache)), timeout=120, workdir=tmp_path)
    assert len(records) == len(cases)
    bad = [r for r in records if r["status"] != "ok"]
    assert not bad, "\n\n".join(f"{r['status']}: {san._describe(r['case'])}\n{r['detail']}" for r in bad)
