"""Elementwise Tile code at vector speed: innermost parallel loops outlined by chunks (one vectorisable
loop per thread, ``AstPrinter._outline_chunks``) and libm calls through glibc's vector variants
(``codegen.c_expr.vector_math_prelude``), checked against numpy on ordinary and special values."""
from __future__ import annotations

import numpy as np
import pytest

import polytile
from polytile.config import override

FUNCS = ["exp", "log", "tanh", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "erf"]


def _values(n, dtype, rng):
    x = rng.uniform(-3, 3, n).astype(dtype)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 80.0, -80.0]  # specials: signs, overflow, NaN
    return x


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("func", FUNCS)
def test_vector_math_matches_numpy(func, dtype, target):
    rng = np.random.default_rng(7)
    x = _values(100_003, dtype, rng)  # odd: vector loops end in a remainder
    src = f"function (X[N]) -> (Y) {{ Y = {func}(X); }}"
    with np.errstate(all="ignore"):
        want = polytile.reference(src, x)
    got = polytile.compile(src, target=target)(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    # glibc's vector variants are within 4 ulp; numpy's own SIMD functions differ from libm too
    tol = 8 * np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("target", ["openmp", "llvm"])
def test_pow_two_arguments(target):
    rng = np.random.default_rng(8)
    a = rng.uniform(0, 4, 4099).astype(np.float32)
    b = rng.uniform(-2, 2, 4099).astype(np.float32)
    src = "function (A[N], B[N]) -> (Y) { Y = pow(A, B); }"
    np.testing.assert_allclose(polytile.compile(src, target=target)(a, b), polytile.reference(src, a, b), rtol=1e-6)


def test_the_llvm_target_calls_the_vector_variants_the_machine_has():
    from polytile.runtime.llvm_engine import optimise
    from polytile.targets.llvm import _vector_math

    table = _vector_math()
    if "tanhf" not in table or "expf" not in table:
        pytest.skip("no glibc vector variants of tanhf/expf here (libmvec, x86-64)")
    k = polytile.compile("function (X[N]) -> (Y) { Y = tanh(X) * exp(-X); }", target="llvm")
    ir_text = k.source(shapes=[(4096,)])
    assert "pt.vm.tanhf" in ir_text and "vector-function-abi-variant" in ir_text
    assert "llvm.compiler.used" in ir_text  # the declarations survive until the vectoriser runs
    optimised = str(optimise(ir_text))
    assert any(f"@{v.name}(" in optimised for v in table["tanhf"]), optimised  # a vector call, not 16 scalar ones


def test_without_vector_variants_the_llvm_code_calls_libm():
    from polytile.codegen import llvm as llvm_codegen
    from polytile.codegen.llvm_vmath import candidates

    src = "function (X[N]) -> (Y) { Y = tanh(X); }"
    k = polytile.compile(src, target="llvm")
    spec = k.specialize_shapes([(64,)], ["float32"], build=False)
    plain = llvm_codegen.generate(spec.scop, spec.schedule.tree()).text
    assert "@\"tanhf\"" in plain or "@tanhf" in plain
    assert "pt.vm." not in plain and "compiler.used" not in plain
    table = {"tanhf": candidates("tanhf", 4, 1, "d")}
    mapped = llvm_codegen.generate(spec.scop, spec.schedule.tree(), vector_math=table).text
    assert "_ZGV_LLVM_N8v_pt.vm.tanhf(_ZGVdN8v_tanhf)" in mapped


def test_the_declarations_go_to_tile_kernels_that_call_libm():
    text = polytile.compile("function (X[N]) -> (Y) { Y = tanh(X) * exp(-X); }").source(shapes=[(4096,)])
    assert "#pragma omp declare simd notinbranch\nfloat expf(float);" in text
    assert "float tanhf(float);" in text and "double exp(double);" not in text  # only what it calls
    assert "declare simd" not in polytile.compile("function (X[N]) -> (Y) { Y = X * 2; }").source(shapes=[(4096,)])


def _far_values(func, dtype):
    """Arguments where exp's or log's result stops being a normal number, their neighbours, and random ones."""
    rng = np.random.default_rng(9)
    if func == "exp":
        big = {"float32": (-104.0, -103.97208, -87.33654, 88.72284, 89.0),
               "float64": (-746.0, -745.1332, -708.4, 709.78, 710.0)}[dtype]
        extra = [-1e9, 1e9, -1e300 if dtype == "float64" else -3e38]
        spread = rng.uniform(-2 * abs(big[0]), 2 * big[-1], 4000)
    else:
        tiny = float(np.finfo(dtype).tiny)
        big = (tiny, float(np.finfo(dtype).smallest_subnormal), float(np.finfo(dtype).max), 1.0)
        extra = [0.0, -0.0, -1.0, -1e-30, -np.finfo(dtype).max] * 20
        spread = np.where(rng.random(4000) < 0.3, 0.0, rng.random(4000))
    edges = np.concatenate([np.nextafter(np.array(big, dtype), -np.inf), np.array(big, dtype),
                            np.nextafter(np.array(big, dtype), np.inf)])
    special = np.concatenate([edges, [np.inf, -np.inf, np.nan, -np.nan], extra])
    rest = np.concatenate([spread, rng.standard_normal(4000)])
    # A multiple of 64 in all: every element in a full vector, whichever width each build's loops take (a
    # remainder may run the scalar function in one build and a narrower variant in another, 1 ulp apart).
    x = np.concatenate([special, rest[: (special.size + rest.size) // 64 * 64 - special.size]]).astype(dtype)
    return x[rng.permutation(x.size)]


@pytest.mark.parametrize("func", ["exp", "log"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_guarded_math_is_bitwise_the_functions_own(func, dtype):
    """pt_expf/pt_logf (and the doubles) send lanes whose result is exact and known (exp: 0 or inf far
    outside; log: -inf, NaN, inf at zero, below it, at inf) around glibc's vector variants, whose scalar
    callout made a masked softmax 10x and a log of probabilities with zeros 19x slower.  Every result,
    NaN, subnormal and the edges of the thresholds included, is bitwise that of the same kernel built
    without the guard (``-DPT_NO_GUARDED_MATH``: glibc's vector function called directly), and of the
    llvm target."""
    from polytile.config import DEFAULT_CFLAGS

    src = f"function (X[N]) -> (Y) {{ Y = {func}(X); }}"
    x = _far_values(func, dtype)
    u = f"u{x.itemsize}"
    guarded = polytile.compile(src)
    assert f"pt_{func}" in guarded.source(x)
    plain = polytile.compile(src, cflags=DEFAULT_CFLAGS + ("-DPT_NO_GUARDED_MATH",))
    with np.errstate(all="ignore"):
        got, want, jit = guarded(x), plain(x), polytile.compile(src, target="llvm")(x)
        ref = getattr(np, func)(x.astype(np.float64))
    np.testing.assert_array_equal(got.view(u), want.view(u))
    np.testing.assert_array_equal(jit.view(u), want.view(u))
    if func == "exp":
        far = ~(np.abs(x.astype(np.float64)) <= abs(float(np.log(np.finfo(dtype).tiny))) + 20)
    else:
        far = (x <= 0) | (x == np.inf)
    far &= ~np.isnan(x)
    np.testing.assert_array_equal(got[far], ref[far].astype(dtype))


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
@pytest.mark.parametrize("n", [1, 17, 100_003])
def test_chunked_innermost_parallel_loops_cover_every_element(n, threads):
    # pt_chunk splits the loop per thread; every element is written once, whatever the thread count.
    src = "function (X[N], Y[N]) -> (Z) { Z = X * Y + X; }"
    rng = np.random.default_rng(n)
    x, y = rng.integers(-9, 10, n).astype(np.float32), rng.integers(-9, 10, n).astype(np.float32)
    k = polytile.compile(src, min_parallel_work=0)
    assert ("pt_chunk(" in k.source(x, y)) == (n > 1)  # one element: isl emits no loop
    with override(num_threads=threads):
        np.testing.assert_array_equal(k(x, y), x * y + x)


def test_an_innermost_parallel_loop_is_outlined_by_chunks():
    text = polytile.compile("function (X[N]) -> (Y) { Y = exp(X); }").source(shapes=[(1 << 20,)])
    assert "pt_chunk(" in text and "const long pt_lo, const long pt_hi" in text
    # a parallel loop with loops inside keeps its per-iteration body function...
    text = polytile.compile("function (X[N, M, L]) -> (Y) { Y = exp(X); }").source(shapes=[(64, 128, 128)])
    assert "pt_chunk(" not in text and "const long c0)" in text
    # ... unless its body is one row's sum: each thread's chunk of rows, eight at a time (c_accumulate.jam_rows)
    text = polytile.compile("examples/matvec.tile").source(shapes=[(4096, 4096), (4096,)])
    assert "pt_chunk(" in text and "const long pt_lo, const long pt_hi" in text and "reduction(+:pt_acc7)" in text
