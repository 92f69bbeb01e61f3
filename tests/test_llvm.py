"""The llvm target (LLVM IR from isl's AST, JIT-compiled in-process by llvmlite) against the oracle.

* every example, every ``// dims:`` case, float64/float32 (and int32 where exact), with the same
  rules and tolerances as the C target's test (tests/test_examples_compiled.py);
* held-out shapes: sizes 1, primes and larger than a tile, for matmul, conv2d, elementwise programs
  and the four reductions, in every dtype the C target supports;
* the C helpers' edge cases (NaN max/min, division by 0 and MIN / -1, float -> int conversion of
  NaN/inf/huge values, shifts by the width or more, narrow wrap-around), bit for bit against the C
  target when a C compiler is there, and against the oracle;
* parallel loops on libgomp's threads (a worker thread really starts; parallel reductions combine);
* register tiles as LLVM vectors and packed panels, on odd shapes;
* the CLI (``--target llvm``) and the default target without a C compiler.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import polytile
from polytile import config

from numpy_programs import example_cases, example_paths, make_inputs
from test_examples_compiled import F32_TOL, F64_TOL, float_inexact, integer_exact

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
HAVE_CC = shutil.which(os.environ.get("POLYTILE_CC") or os.environ.get("CC") or "cc") is not None or \
    shutil.which("gcc") is not None
ALL_DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


def _tuple(x):
    return tuple(x) if isinstance(x, tuple) else (x,)


def _values(rng, shape, dtype: str, lo=-4, hi=4) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("uint"):
        lo = max(lo, 0)
    return rng.integers(lo, hi + 1, shape).astype(dtype)


def _same_as_oracle(k, arrays, inexact=False, tol=None):
    got = _tuple(k(*[a.copy() for a in arrays]))
    want = _tuple(polytile.reference(k.program, *[a.copy() for a in arrays]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if inexact:
            np.testing.assert_allclose(g, w, **tol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


# ---------------------------------------------------------------------------
# every example
# ---------------------------------------------------------------------------


@lru_cache(maxsize=None)
def kernel(path, target="llvm"):
    return polytile.compile(path, target=target, min_parallel_work=0)


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.stem)
def test_example_matches_oracle(path):
    k = kernel(path)
    program = k.program
    dtypes = ["float64", "float32"] + (["int32"] if integer_exact(program) else [])
    for n, case in enumerate(example_cases(path)):
        for dt in dtypes:
            rng = np.random.default_rng(zlib.crc32(f"{path.stem}:{n}:{dt}".encode()))
            arrays = make_inputs(program, case, rng, np.dtype(dt))
            inexact = float_inexact(program) and dt != "int32"
            _same_as_oracle(k, arrays, inexact, F32_TOL if dt == "float32" else F64_TOL)


# ---------------------------------------------------------------------------
# held-out shapes and every dtype
# ---------------------------------------------------------------------------

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"
CONV = (EXAMPLES / "conv2d.tile").read_text()
REDUCE = "function (X[M, N]) -> (O) {{ O[i : M] = {op}(X[i, j]); }}"
ELEMWISE = "function (A[M, N], B[N]) -> (C) { C = A * B + A - B; }"


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 13, 31), (97, 257, 13), (257, 31, 97)])
def test_matmul_held_out_shapes(m, k, n, rng):
    # A preset descriptor (register tiles of <8 x float>, packs) and no autotiling: the host's
    # autotiler spends seconds per shape, and the examples run with it already.
    for hw in ("x86-avx2", None):
        kern = polytile.compile(MATMUL, target="llvm", hardware=hw)
        for dt in ("float32", "float64", "int32") if hw is None else ("float32",):
            _same_as_oracle(kern, [_values(rng, (m, k), dt), _values(rng, (k, n), dt)])


@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_every_dtype(dt, rng):
    """Elementwise arithmetic, the four reductions and a matmul in each dtype, on awkward shapes."""
    elem = polytile.compile(ELEMWISE, target="llvm")
    for m, n in ((1, 1), (13, 97)):
        try:
            _same_as_oracle(elem, [_values(rng, (m, n), dt), _values(rng, (n,), dt)])
        except polytile.PolytileError as exc:  # a program the oracle refuses for this dtype
            pytest.skip(f"{dt}: {exc}")
    for op in ("+", "*", ">", "<"):
        k = polytile.compile(REDUCE.format(op=op), target="llvm", min_parallel_work=0)
        for m, n in ((1, 1), (7, 257)):
            # Products of values in {-1, 1} stay exact in every dtype (and never reach inf).
            x = _values(rng, (m, n), dt, *((-1, 1) if op == "*" else (-4, 4)))
            if op == "*" and dt != "bool":
                x[x == 0] = 1
            _same_as_oracle(k, [x])
    if dt != "bool":
        mm = polytile.compile(MATMUL, target="llvm", hardware=None)
        _same_as_oracle(mm, [_values(rng, (13, 31), dt), _values(rng, (31, 7), dt)])


@pytest.mark.parametrize("dims", ["N=1,H=1,W=1,CI=1,KH=1,KW=1,CO=1", "N=2,H=13,W=7,CI=3,KH=3,KW=2,CO=5",
                                  "N=1,H=31,W=31,CI=17,KH=3,KW=3,CO=33"])
def test_conv2d_held_out_shapes(dims, rng):
    k = polytile.compile(CONV, target="llvm", hardware="x86-avx2")
    d = dict(kv.split("=") for kv in dims.split(","))
    d = {a: int(b) for a, b in d.items()}
    i = _values(rng, (d["N"], d["H"], d["W"], d["CI"]), "float32")
    f = _values(rng, (d["KH"], d["KW"], d["CI"], d["CO"]), "float32")
    _same_as_oracle(k, [i, f])


# ---------------------------------------------------------------------------
# the helpers' edge cases, against the C target and the oracle
# ---------------------------------------------------------------------------


def _both(text: str, arrays, oracle: bool = True):
    """The llvm kernel's outputs; equal bit for bit to the openmp kernel's (when there is a C compiler)
    and, with ``oracle``, to the reference interpreter's."""
    got = _tuple(polytile.compile(text, target="llvm")(*arrays))
    if HAVE_CC:
        c = _tuple(polytile.compile(text, target="openmp")(*arrays))
        for g, w in zip(got, c):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=f"llvm vs C: {text}")
    if oracle:
        want = _tuple(polytile.reference(text, *arrays))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, np.asarray(w), err_msg=f"llvm vs oracle: {text}")
    return got


@pytest.mark.parametrize("dt", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_integer_division_pinned(dt):
    info = np.iinfo(dt)
    a = np.array([7, -7, info.min, info.min, info.max, 0, 5, info.max], dtype=dt) if info.min < 0 else \
        np.array([7, 9, 0, info.max, info.max, 3, 1, 2], dtype=dt)
    b = np.array([2, 2, -1, 0, -1, 0, -3, 1], dtype=dt) if info.min < 0 else \
        np.array([2, 0, 0, 1, 7, 0, 3, 2], dtype=dt)
    out = _both("function (A[N], B[N]) -> (C) { C = A / B; }", [a, b])[0]
    assert out[3 if info.min < 0 else 1] == 0  # x / 0 == 0
    if info.min < 0:
        assert out[2] == info.min  # MIN / -1 wraps


@pytest.mark.parametrize("dt", ["int8", "int32", "int64", "uint8", "uint16", "uint64"])
def test_shifts_masked_by_width(dt):
    w = np.dtype(dt).itemsize * 8
    a = np.array([1, 3, 5, 7, 100, 1, 2, 3], dtype=dt)
    if dt.startswith("int"):
        a[1] = -3
    b = np.array([0, 1, w - 1, w, w + 1, 2 * w + 3, 3, 1], dtype=dt)
    _both("function (A[N], B[N]) -> (C, D) { C = A << B; D = A >> B; }", [a, b], oracle=False)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 2.0 ** 63, -(2.0 ** 63), 3.7, -3.7, 0.5, -0.5, 2.5,
                    -2.5, 0.0, -0.0, 255.0, 256.0, -129.0, 1e19, 9.3e18])


@pytest.mark.parametrize("to", ["as_int(X, 8)", "as_int(X, 32)", "as_int(X, 64)", "as_uint(X, 8)", "as_uint(X, 64)",
                                "as_bool(X, 8)"])
def test_float_to_integer_conversion(to):
    for dt in ("float64", "float32"):
        x = SPECIAL.astype(dt)
        _both(f"function (X[N]) -> (Y) {{ Y = {to}; }}", [x], oracle=False)


def test_nan_max_min_and_rounding():
    x = np.array([np.nan, 1.0, -2.0, np.nan, 0.5, -0.5, 2.5, -2.5, -0.0, 3.0], dtype=np.float32)
    y = np.array([1.0, np.nan, np.nan, np.nan, -0.5, 0.5, 2.5, 1.5, 0.0, -3.0], dtype=np.float32)
    _both("function (X[N], Y[N]) -> (A, B, C, D) { A = max(X, Y); B = min(X, Y); C = round(X); D = abs(X); }",
          [x, y], oracle=False)
    m = np.array([[1.0, np.nan, 3.0], [2.0, 5.0, -1.0], [np.nan, np.nan, 0.0]], dtype=np.float64)
    # The reductions propagate NaN as numpy's maximum/minimum do (pt_max_*).
    _both("function (X[M, N]) -> (O) { O[i : M] = >(X[i, j]); }", [m])
    _both("function (X[M, N]) -> (O) { O[i : M] = <(X[i, j]); }", [m])


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "uint16", "bool"])
def test_narrow_wraparound(dt):
    info = np.iinfo(dt) if dt != "bool" else None
    if info is None:
        a = np.array([True, True, False, False])
        b = np.array([True, False, True, False])
    else:
        a = np.array([info.max, info.min, info.max, 3], dtype=dt)
        b = np.array([1, np.array(-1).astype(dt) if info.min < 0 else 1, info.max, 2], dtype=dt)
    _both("function (A[N], B[N]) -> (C, D, E) { C = A + B; D = A * B; E = A - B; }", [a, b])


def test_math_builtins_against_c():
    """libm results (exp, log, tanh, pow, ...) as the C target computes them."""
    x = np.linspace(0.1, 4.0, 23).astype(np.float32)
    y = np.linspace(-2.0, 2.0, 23).astype(np.float32)
    text = ("function (X[N], Y[N]) -> (A, B, C) { A = exp(Y) + log(X) * tanh(Y); B = pow(X, Y) + sqrt(X) - "
            "sigmoid(Y); C = sin(X) * cos(Y) + recip(X) + floor(Y) - ceil(Y); }")
    got = _tuple(polytile.compile(text, target="llvm")(x, y))
    want = _tuple(polytile.reference(text, x, y))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
    if HAVE_CC:
        c = _tuple(polytile.compile(text, target="openmp")(x, y))
        for g, w in zip(got, c):
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("d", [2, 3, 8])
@pytest.mark.parametrize("n", [16, 64, 67])
def test_floor_division_in_indices(d, n):
    """``I[(i - 5) / 2]`` at N = 64: LLVM 14's loop vectoriser hit an assertion on the old floor division
    (a select of two divisions) and aborted the process."""
    text = f"function (I[N]) -> (O) {{ O[i : N] = +(I[(i - 5) / {d}]); }}"
    x = np.arange(-7.0, n - 7.0, dtype=np.float32)
    np.testing.assert_array_equal(polytile.compile(text, target="llvm")(x), polytile.reference(text, x))


@pytest.mark.parametrize("expr", ["pow(X, 2)", "pow(X, 2.5)", "pow(2.0, X)", "pow(X, 3) + exp(X)"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_math_builtins_with_a_constant_argument(expr, dt):
    """``pow(X, 2)``: LLVM's interprocedural passes dropped the constant argument of the vector-math
    wrapper, its two-argument vector mapping no longer matched, and the verifier aborted the process."""
    x = np.linspace(0.5, 3.0, 67).astype(dt)
    text = f"function (X[N]) -> (A) {{ A = {expr}; }}"
    np.testing.assert_allclose(polytile.compile(text, target="llvm")(x), polytile.reference(text, x), rtol=2e-6)


# ---------------------------------------------------------------------------
# parallel loops, register tiles, packs
# ---------------------------------------------------------------------------


def test_parallel_loops_start_a_libgomp_team():
    """A kernel with a parallel loop runs on two threads: a libgomp worker exists after the call."""
    script = textwrap.dedent("""
        import os, numpy as np, polytile
        k = polytile.compile("examples/matmul.tile", target="llvm", min_parallel_work=0)
        A = np.ones((64, 48), np.float32); B = np.ones((48, 40), np.float32)
        spec = k.specialize(A, B)
        assert '@"GOMP_parallel"(' in spec.source.text
        before = len(os.listdir("/proc/self/task"))
        C = k(A, B)
        after = len(os.listdir("/proc/self/task"))
        assert (C == 48).all()
        print(before, after)
    """)
    env = dict(os.environ, POLYTILE_NUM_THREADS="2", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="",
               PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split())
    assert after == before + 1, (before, after)  # the team's second thread


def test_parallel_reduction_combines_private_copies(rng, monkeypatch):
    monkeypatch.setenv("POLYTILE_NUM_THREADS", "2")
    with config.override(num_threads=2):
        s = polytile.schedule(EXAMPLES / "matmul.tile", dims="M=5,N=3,K=301")
        s = s.reorder("C", ["k", "i", "j"]).parallel("C", "k", reduction=True)
        for dt in ("float64", "int32"):
            k = polytile.compile(EXAMPLES / "matmul.tile", target="llvm", schedule=s, min_parallel_work=0)
            A, B = _values(rng, (5, 301), dt), _values(rng, (301, 3), dt)
            text = k.specialize(A, B).source.text
            assert "GOMP_critical_start" in text and '@"GOMP_parallel"(' in text
            _same_as_oracle(k, [A, B])


def test_register_tiles_are_llvm_vectors_and_packs_are_used(rng):
    """x86-avx2's register tile holds <8 x float> accumulators; odd shapes take the edge code too."""
    k = polytile.compile(MATMUL, target="llvm", hardware="x86-avx2")
    A, B = _values(rng, (97, 131), "float32"), _values(rng, (131, 77), "float32")
    spec = k.specialize(A, B)
    assert "regtile" in spec.schedule.describe()
    text = spec.source.text
    assert "<8 x float>" in text and "regtile not applied" not in text
    assert "aligned_alloc" in text  # the packed panels' buffers
    _same_as_oracle(k, [A, B])
    k64 = polytile.compile(MATMUL, target="llvm", hardware="x86-avx2")
    _same_as_oracle(k64, [_values(rng, (33, 65), "float64"), _values(rng, (65, 17), "float64")])


def test_out_argument_and_repeated_calls(rng):
    k = polytile.compile(MATMUL, target="llvm")
    A, B = _values(rng, (9, 5), "float32"), _values(rng, (5, 6), "float32")
    C = np.empty((9, 6), np.float32)
    assert k(A, B, out=C) is C
    np.testing.assert_array_equal(C, A @ B)
    np.testing.assert_array_equal(k(A, B), A @ B)


# ---------------------------------------------------------------------------
# the CLI and the default target
# ---------------------------------------------------------------------------


def _cli(*args, env=None):
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "polytile", *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=120)


def test_cli_run_with_llvm_target():
    out = _cli("run", "examples/matmul.tile", "--dims", "M=64,N=64,K=64", "--check", "--target", "llvm")
    assert out.returncode == 0, out.stderr
    assert "PASS" in out.stdout


def test_default_target_without_a_c_compiler(rng):
    from polytile import targets

    with config.override(cc="/nonexistent/cc"):
        assert targets.default_name() == "llvm"
        k = polytile.compile(MATMUL)
        assert k.options.target == "llvm"
        A, B = _values(rng, (3, 4), "float32"), _values(rng, (4, 2), "float32")
        np.testing.assert_array_equal(k(A, B), A @ B)
    if HAVE_CC:
        assert targets.default_name() == "openmp"
    out = _cli("run", "examples/matmul.tile", "--dims", "M=8,N=8,K=8", "--check", env={"POLYTILE_CC": "/nonexistent"})
    assert out.returncode == 0, out.stderr
    assert "PASS" in out.stdout


def test_unsupported_construct_is_a_polytile_error():
    from polytile.codegen.llvm_body import UnsupportedConstruct, value_type

    with pytest.raises(UnsupportedConstruct, match="float16"):
        value_type("float16")
    assert issubclass(UnsupportedConstruct, polytile.PolytileError)


# ---------------------------------------------------------------------------
# Review findings: no libgomp, entry names, out of memory
# ---------------------------------------------------------------------------

MM = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"


def test_packs_under_parallel_loops_without_libgomp(monkeypatch, rng):
    """No OpenMP runtime: parallel loops run serially and per-thread packs use thread 0's slice; the
    code must not call into libgomp at all (an unresolved omp_* was called at address 0)."""
    from polytile.runtime import jit

    monkeypatch.setattr(jit, "gomp", lambda: None)
    k = polytile.compile(MM, target="llvm", hardware="x86-avx2")
    A, B = (rng.integers(-4, 5, s).astype(np.float32) for s in ((96, 80), (80, 112)))
    spec = k.specialize(A, B)
    assert "pack" in spec.schedule.describe() and "parallel" in spec.schedule.describe()
    assert "omp_get" not in spec.source.text and "GOMP_" not in spec.source.text
    np.testing.assert_array_equal(k(A, B), A @ B)


def test_unresolved_symbols_are_refused_not_called():
    from polytile.errors import PolytileEnvironmentError
    from polytile.runtime import jit

    text = textwrap.dedent("""
        declare i32 @pt_no_such_function_anywhere()
        define i32 @pt_entry() {
          %r = call i32 @pt_no_such_function_anywhere()
          ret i32 %r
        }
    """)
    with pytest.raises(PolytileEnvironmentError, match="pt_no_such_function_anywhere"):
        jit.compile_ir(text, "pt_entry", 0)


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("name", ["par0", "max_float32", "threads"])
def test_program_names_that_match_generated_helpers(tmp_path, target, name, rng):
    """A program called par0 (par0.tile) once clashed with the outlined loop pt_par0."""
    path = tmp_path / f"{name}.tile"
    path.write_text(MM + "\n")
    A, B = (rng.integers(-4, 5, s).astype(np.float32) for s in ((64, 48), (48, 80)))
    k = polytile.compile(str(path), target=target, min_parallel_work=0)
    np.testing.assert_array_equal(k(A, B), A @ B)


def test_out_of_memory_return_code_is_an_environment_error():
    from polytile.errors import ENTRY_ENOMEM, PolytileEnvironmentError
    from polytile.runtime.loader import raise_for_return

    with pytest.raises(PolytileEnvironmentError, match="out of memory"):
        raise_for_return("pt_x", ENTRY_ENOMEM)
    with pytest.raises(polytile.PolytileError, match="error code 3"):
        raise_for_return("pt_x", 3)


def test_jit_kernels_compiled_once_per_process(rng):
    """A second Kernel of the same program and signature reuses the JIT-compiled code (no disk cache)."""
    from polytile import kernel as kernel_mod

    A, B = (rng.integers(-4, 5, s).astype(np.float32) for s in ((33, 17), (17, 29)))
    text = MM + " // once"
    before = len(kernel_mod._JIT_LAUNCHERS)
    np.testing.assert_array_equal(polytile.compile(text, target="llvm")(A, B), A @ B)
    assert len(kernel_mod._JIT_LAUNCHERS) == min(before + 1, kernel_mod.JIT_LAUNCHERS_KEPT)
    key = next(reversed(kernel_mod._JIT_LAUNCHERS))
    first = kernel_mod._JIT_LAUNCHERS[key]
    np.testing.assert_array_equal(polytile.compile(text, target="llvm")(A, B), A @ B)
    assert kernel_mod._JIT_LAUNCHERS[key] is first
