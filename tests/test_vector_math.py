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


def _far_values(dtype):
    """exp's arguments around where its result stops being a normal number, and far beyond."""
    big = {"float32": (-104.0, -103.97208, -87.33654, 88.72284, 89.0), "float64": (-746.0, -745.1332, -708.4, 709.78, 710.0)}[dtype]
    edges = np.concatenate([np.nextafter(np.array(big, dtype), -np.inf), np.array(big, dtype),
                            np.nextafter(np.array(big, dtype), np.inf)])
    rng = np.random.default_rng(9)
    x = np.concatenate([edges, [np.inf, -np.inf, np.nan, -1e9, 1e9, -1e300 if dtype == "float64" else -3e38],
                        rng.uniform(-2 * abs(big[0]), 2 * big[-1], 4000), rng.standard_normal(4000)]).astype(dtype)
    return x[rng.permutation(x.size)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exp_far_outside_is_bitwise_exps_own(dtype):
    """pt_expf/pt_exp send lanes whose result is exactly 0 or inf around glibc's vector exp (whose scalar
    callout made a masked softmax 10x slower): every result, NaN, subnormal and the edges of both
    thresholds included, is bitwise that of the same kernel built without the guard
    (``-DPT_NO_GUARDED_EXP``: glibc's vector exp called directly), and of the llvm target."""
    from polytile.config import DEFAULT_CFLAGS

    src = "function (X[N]) -> (Y) { Y = exp(X); }"
    x = _far_values(dtype)
    guarded = polytile.compile(src)
    assert "pt_exp" in guarded.source(x)
    plain = polytile.compile(src, cflags=DEFAULT_CFLAGS + ("-DPT_NO_GUARDED_EXP",))
    got, want = guarded(x), plain(x)
    np.testing.assert_array_equal(got.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}"))
    np.testing.assert_array_equal(polytile.compile(src, target="llvm")(x).view(f"u{x.itemsize}"),
                                  want.view(f"u{x.itemsize}"))
    with np.errstate(all="ignore"):
        ref = np.exp(x.astype(np.float64))
    far = ~(np.abs(x.astype(np.float64)) <= abs(float(np.log(np.finfo(dtype).tiny))) + 20)
    np.testing.assert_array_equal(got[far & ~np.isnan(x)], ref[far & ~np.isnan(x)].astype(dtype))


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
