"""The public API: ``polytile.compile`` / ``Kernel`` / ``polytile.reference``.

Results are checked against numpy written by hand (and against the oracle);
compiles and cache hits are counted with ``polytile.runtime.stats``.  Tests
that count compiles use a private cache directory so that kernels built by
other tests cannot turn a compile into a cache hit.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polytile
from polytile import runtime
from polytile.config import get_config, override
from polytile.errors import PolytileError, ShapeError

ROOT = Path(__file__).resolve().parent.parent
MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"


def ints(rng, shape, dtype=np.float64, lo=-4, hi=4):
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def counts():
    return runtime.stats.compiles, runtime.stats.cache_hits


@pytest.fixture
def private_cache(tmp_path):
    """A fresh, empty kernel cache for this test only."""
    with override(cache_dir=tmp_path / "cache") as cfg:
        yield cfg.cache_dir


# ---------------------------------------------------------------------------
# compile() inputs, calling conventions, outputs
# ---------------------------------------------------------------------------


def test_compile_text_path_and_pathlib(rng):
    path = ROOT / "examples" / "matmul.tile"
    A, B = ints(rng, (5, 3)), ints(rng, (3, 4))
    kernels = [polytile.compile(MATMUL), polytile.compile(str(path)), polytile.compile(path)]
    assert kernels[1].program == kernels[2].program
    assert kernels[0].program.inputs == kernels[1].program.inputs
    for k in kernels:
        assert isinstance(k, polytile.Kernel)
        np.testing.assert_array_equal(k(A, B), A @ B)
    # A Program object compiles too, and repr names the signature.
    k = polytile.compile(kernels[0].program)
    np.testing.assert_array_equal(k(A, B), A @ B)
    assert repr(k) == "<polytile.Kernel (A, B) -> (C) target=openmp>"


def test_compile_options_are_checked():
    with pytest.raises(PolytileError, match="unknown target 'cuda9'"):
        polytile.compile(MATMUL, target="cuda9")
    with pytest.raises(PolytileError, match="unknown compile option"):
        polytile.compile(MATMUL, fast=True)


def test_named_and_positional_calls_agree(rng):
    k = polytile.compile("function (X[M, N], Bias[N], S[]) -> (Y) {"
                         " T[i, j : M, N] = =(X[i, j]); Y = T * S + Bias; }")
    X, Bias, S = ints(rng, (4, 6)), ints(rng, (6,)), np.array(3.0)
    want = X * 3.0 + Bias
    results = [k(X, Bias, S), k(X=X, Bias=Bias, S=S), k(S=S, X=X, Bias=Bias), k(X, S=S, Bias=Bias)]
    for r in results:
        np.testing.assert_array_equal(r, want)
    with pytest.raises(ShapeError):
        k(X, Bias)


def test_multiple_outputs_in_header_order(rng):
    # The body defines Lo before Hi and Sum last; the header order wins.
    k = polytile.compile("""
        function (X[M, N]) -> (Sum, Hi, Lo) {
          Lo[i : M] = <(X[i, j]);
          Hi[i : M] = >(X[i, j]);
          Sum = Hi + Lo;
        }""")
    X = ints(rng, (5, 7))
    out = k(X)
    assert isinstance(out, tuple) and len(out) == 3
    s, hi, lo = out
    np.testing.assert_array_equal(hi, X.max(1))
    np.testing.assert_array_equal(lo, X.min(1))
    np.testing.assert_array_equal(s, X.max(1) + X.min(1))
    ref = polytile.reference(k.program, X)
    assert isinstance(ref, tuple) and len(ref) == 3
    for g, w in zip(out, ref):
        np.testing.assert_array_equal(g, w)


def test_single_output_is_an_array_and_scalars_are_0d(rng):
    X = ints(rng, (9,))
    r = polytile.compile("function (X[N]) -> (R) { R[] = +(X[i] * X[i]); }")(X)
    assert isinstance(r, np.ndarray) and r.shape == () and r == (X * X).sum()


def test_outputs_are_fresh_arrays(rng):
    k = polytile.compile(MATMUL)
    A, B = ints(rng, (3, 3)), ints(rng, (3, 3))
    first = k(A, B)
    first[...] = 99
    second = k(A, B)
    np.testing.assert_array_equal(second, A @ B)
    assert not np.shares_memory(first, second)
    assert not np.shares_memory(second, A) and not np.shares_memory(second, B)


def test_reference_api(rng):
    path = ROOT / "examples" / "matmul.tile"
    A, B = ints(rng, (2, 3)), ints(rng, (3, 4))
    for src in (MATMUL, str(path), path):
        np.testing.assert_array_equal(polytile.reference(src, A, B), A @ B)
        np.testing.assert_array_equal(polytile.reference(src, A, B=B), A @ B)


def test_reference_api_in_a_fresh_interpreter():
    """``polytile.reference(...)`` is a function of the package, whatever was imported before or after it."""
    code = textwrap.dedent(f"""
        import numpy as np, polytile
        A = np.ones((2, 3)); B = np.ones((3, 2))
        first = polytile.reference({MATMUL!r}, A, B)
        import polytile.interpreter
        second = polytile.reference({MATMUL!r}, A, B)
        from polytile import interpreter
        third = interpreter.run(polytile.load_program({MATMUL!r}), A, B)
        assert (first == 3).all() and (second == 3).all() and (third == 3).all()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# ---------------------------------------------------------------------------
# Specialisation and caching
# ---------------------------------------------------------------------------


def test_specialisation_recompiles_only_for_new_signatures(rng, private_cache):
    k = polytile.compile(MATMUL)
    A, B = ints(rng, (3, 4)), ints(rng, (4, 5))
    c0, h0 = counts()
    np.testing.assert_array_equal(k(A, B), A @ B)
    assert counts() == (c0 + 1, h0)
    np.testing.assert_array_equal(k(A + 1, B), (A + 1) @ B)  # same shapes, new values
    assert counts() == (c0 + 1, h0)
    A2, B2 = ints(rng, (2, 4)), ints(rng, (4, 7))
    np.testing.assert_array_equal(k(A2, B2), A2 @ B2)  # new shape
    assert counts() == (c0 + 2, h0)
    np.testing.assert_array_equal(k(A, B), A @ B)  # the first shape again: kept in the Kernel
    assert counts() == (c0 + 2, h0)
    Ai, Bi = A.astype(np.int32), B.astype(np.int32)
    r = k(Ai, Bi)  # new dtype
    assert r.dtype == np.int32 and counts() == (c0 + 3, h0)
    np.testing.assert_array_equal(r, (A @ B).astype(np.int32))
    assert len(list(private_cache.glob("*/*/*.so"))) == 3


def test_source_returns_c_without_compiling(private_cache):
    k = polytile.compile(MATMUL)
    before = counts()
    src = k.source(np.ones((4, 3), np.float32), np.ones((3, 5), np.float32))
    same = k.source(shapes=[(4, 3), (3, 5)], dtypes=["float32", "float32"])
    assert src == same
    assert counts() == before  # generating C does not build it
    assert "int pt_matmul(void *restrict a0, void *restrict a1, void *restrict a2)" in src \
        or "int pt_kernel(" in src
    assert "return 0;" in src and "float" in src
    # 60 multiply-adds cannot pay for a parallel region (cost.parallel_work); nor can 48^3 in register
    # blocks (3.2 us on one thread, 5.6 on two on Zen 5); 128^3 can (23 us against 17).
    assert "#pragma omp parallel" not in src
    k512 = polytile.compile(MATMUL, hardware="x86-avx512")  # 16 lanes (the share of a block's instance)
    assert "#pragma omp parallel for" not in k512.source(shapes=[(48, 48), (48, 48)], dtypes=["float32", "float32"])
    assert "#pragma omp parallel for" in k512.source(shapes=[(128, 128), (128, 128)], dtypes=["float32", "float32"])
    src64 = k.source(shapes=[(4, 3), (3, 5)], dtypes=["float64", "float64"])
    assert "double" in src64 and src64 != src
    # The source embeds the program so a kernel can be traced back to it.
    assert "C[i, j : M, N] = +(A[i, k] * B[k, j]);" in src


def test_source_entry_point_is_callable(tmp_path):
    """The C from ``source()`` builds on its own and its entry function computes the result."""
    k = polytile.compile(MATMUL)
    A, B = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    src = k.source(A, B)
    entry = src.split("\nint ", 1)[1].split("(", 1)[0]
    so = runtime.build(src, cache_dir=tmp_path, name_hint="standalone")
    C = np.empty((2, 4))
    runtime.load(so).function(entry, 3)(A, B, C)
    np.testing.assert_array_equal(C, A @ B)


def test_second_compile_hits_the_disk_cache(rng, private_cache):
    prog = "function (X[N], Y[N]) -> (Z) { Z[i : N] = =(X[i] * Y[i]); }"
    X, Y = ints(rng, (11,)), ints(rng, (11,))
    c0, h0 = counts()
    np.testing.assert_array_equal(polytile.compile(prog)(X, Y), X * Y)
    assert counts() == (c0 + 1, h0)
    s0 = runtime.stats.spec_hits
    k2 = polytile.compile(prog)  # a new Kernel: nothing in memory
    np.testing.assert_array_equal(k2(X, Y), X * Y)
    # Found as a specialisation: no pipeline, no build() call at all.
    assert counts() == (c0 + 1, h0) and runtime.stats.spec_hits == s0 + 1
    # The source and Scop of that signature: the pipeline runs and build() finds the library.
    k2.specialize(X, Y)
    assert counts() == (c0 + 1, h0 + 1)
    # A different cache directory has to compile again.
    with override(cache_dir=private_cache.parent / "other"):
        polytile.compile(prog)(X, Y)
        assert counts() == (c0 + 2, h0 + 1)


def test_session_cache_is_not_the_home_cache():
    assert get_config().cache_dir != Path("~/.cache/polytile").expanduser()
    assert os.environ["POLYTILE_CACHE_DIR"]
    assert Path(os.environ["POLYTILE_CACHE_DIR"]).expanduser() != Path("~/.cache/polytile").expanduser()


_CONCURRENT = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    import numpy as np
    import polytile
    from polytile import runtime
    me, other = Path(sys.argv[1]), Path(sys.argv[2])
    k = polytile.compile({prog!r})
    me.touch()
    deadline = time.time() + 60
    while not other.exists() and time.time() < deadline:   # start compiling together
        time.sleep(0.005)
    A = np.arange(24.0).reshape(4, 6); B = np.arange(30.0).reshape(6, 5) - 7
    C = k(A, B)
    print(json.dumps({{"ok": bool((C == A @ B).all()), "compiles": runtime.stats.compiles,
                      "hits": runtime.stats.cache_hits,
                      "cache": str(polytile.config.get_config().cache_dir)}}))
""")


def test_two_processes_compile_the_same_kernel_at_once(tmp_path):
    cache = tmp_path / "shared-cache"
    script = tmp_path / "worker.py"
    script.write_text(_CONCURRENT.format(prog=MATMUL))
    env = dict(os.environ, POLYTILE_CACHE_DIR=str(cache))
    flags = [tmp_path / "a.ready", tmp_path / "b.ready"]
    procs = [subprocess.Popen([sys.executable, str(script), str(flags[i]), str(flags[1 - i])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    for r in results:
        assert r["ok"] and r["cache"] == str(cache)
        assert r["compiles"] + r["hits"] == 1
    libs = list(cache.glob("*/*/*.so"))
    assert len(libs) == 1, libs
    assert not list(cache.glob("*/*/.*.tmp")), "a temporary file was left behind"


def test_subprocesses_inherit_the_session_cache():
    code = "import polytile.config as c; print(c.get_config().cache_dir)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == get_config().cache_dir


# ---------------------------------------------------------------------------
# Inputs in unusual layouts
# ---------------------------------------------------------------------------


def _layouts(rng):
    A = ints(rng, (5, 4))
    B = ints(rng, (4, 6))
    return {
        "transposed": (ints(rng, (4, 5)).T, ints(rng, (6, 4)).T),
        "negative-strides": (A[::-1, ::-1], B[::-1]),
        "strided-slices": (ints(rng, (10, 8))[::2, ::2], ints(rng, (4, 18))[:, ::3]),
        "fortran-order": (np.asfortranarray(A), np.asfortranarray(B)),
        "broadcast-view": (np.broadcast_to(ints(rng, (4,)), (5, 4)), B),
        "lists": (A.tolist(), B.tolist()),
    }


@pytest.mark.parametrize("layout", ["transposed", "negative-strides", "strided-slices", "fortran-order",
                                    "broadcast-view", "lists"])
def test_non_contiguous_inputs(layout, rng):
    A, B = _layouts(rng)[layout]
    An, Bn = np.asarray(A), np.asarray(B)
    before = (An.copy(), Bn.copy())
    k = polytile.compile(MATMUL)
    got = k(A, B)
    want = An.astype(np.float64) @ Bn.astype(np.float64)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want, err_msg=layout)
    np.testing.assert_array_equal(got, polytile.reference(k.program, An, Bn))
    np.testing.assert_array_equal(An, before[0])  # inputs untouched
    np.testing.assert_array_equal(Bn, before[1])


@pytest.mark.parametrize("native_first", [False, True], ids=["byteswapped-first", "native-first"])
def test_non_native_byte_order(native_first, rng):
    """Byte-swapped arrays give the right answer or a ShapeError, never silently wrong numbers.

    The answer must not depend on whether the kernel already holds a
    specialisation for the native dtype of the same shapes.
    """
    k = polytile.compile(MATMUL)
    A, B = ints(rng, (5, 4)), ints(rng, (4, 6))
    if native_first:
        np.testing.assert_array_equal(k(A, B), A @ B)
    As, Bs = A.astype(">f8"), B.astype(">f8")
    assert As.dtype.byteorder == ">" and np.array_equal(As, A)
    try:
        got = k(As, Bs)
    except ShapeError as exc:
        assert ">f8" in exc.message or "byte order" in exc.message
        rejected = True
    else:
        np.testing.assert_array_equal(got, A @ B)
        rejected = False
    # Both orders of calls must agree on accepting or rejecting.
    fresh = polytile.compile(MATMUL)
    if native_first:
        with pytest.raises(ShapeError) if rejected else _no_error():
            fresh(As, Bs)
    else:
        fresh(A, B)
        with pytest.raises(ShapeError) if rejected else _no_error():
            r = fresh(As, Bs)
            np.testing.assert_array_equal(r, A @ B)


class _no_error:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_transposed_view_in_elementwise_and_contraction(rng):
    k = polytile.compile("function (X[M, N], Y[M, N]) -> (Z, S) { Z = X - 2 * Y; S[j : N] = +(X[i, j] * Y[i, j]); }")
    base = ints(rng, (6, 3))
    X, Y = base.T, ints(rng, (3, 6))
    Z, S = k(X, Y)
    np.testing.assert_array_equal(Z, X - 2 * Y)
    np.testing.assert_array_equal(S, (X * Y).sum(0))


# ---------------------------------------------------------------------------
# Names that are keywords in C or isl
# ---------------------------------------------------------------------------

# Index variable names (lowercase class, or $ to force it) that isl or C would misread.
INDEX_NAMES = ["mod", "floor", "ceil", "min", "max", "exists", "and", "or", "not", "int", "for", "return",
               "double", "c0", "a0", "o0", "i0", "$Floor", "$Mod", "$Exists", "$Infty", "$Rat", "$True",
               "$NaN", "nan", "rat", "implies", "$Min", "$And", "$Or", "$Not", "$Ceil", "ceild", "floord", "$Floord",
               "$CEILD"]
# Tensor / dimension names (uppercase class, or # to force it).
TENSOR_NAMES = ["#double", "#int", "#for", "#void", "#return", "#restrict", "#main", "#floor", "#mod", "#exists",
                "#NULL", "#INFINITY", "#c0", "#a0", "#pt_max_float64", "#floord", "#static", "#if", "#A_1", "#v_int"]


def _idx_id(name):
    return name.replace("$", "S_")


@pytest.mark.parametrize("name", INDEX_NAMES, ids=_idx_id)
def test_keyword_index_names(name, rng):
    k = polytile.compile(f"function (A[M, N], X[N]) -> (Y) {{ Y[$I : M] = +(A[$I, {name}] * X[{name}]); }}")
    A, X = ints(rng, (3, 5)), ints(rng, (5,))
    np.testing.assert_array_equal(k(A, X), A @ X)


@pytest.mark.parametrize("name", TENSOR_NAMES, ids=lambda n: n.lstrip("#"))
def test_keyword_tensor_and_dimension_names(name, rng):
    # The same name as an input tensor in one program, as a dimension and an output in another.
    k1 = polytile.compile(f"function ({name}[M, N]) -> (O) {{ O[i : M] = >({name}[i, j]); }}")
    k2 = polytile.compile(f"function (A[M, {name}]) -> ({name}_out) {{"
                          f" T[i : {name}] = +(A[j, i]); {name}_out = T * {name}; }}")
    A = ints(rng, (4, 6))
    np.testing.assert_array_equal(k1(A), A.max(1))
    np.testing.assert_array_equal(k2(A), A.sum(0) * 6)


def test_keyword_names_together(rng):
    """Several keyword names in one program: tensors, dimensions, index variables, outputs."""
    src = """
        function (#double[#int, #void], #return[#void]) -> (#float, #while) {
          #float[mod, $Floor : #int, 1] = +(#double[mod, exists] * #return[exists]);
          #while = #float * #void;
        }"""
    A, b = ints(rng, (3, 4)), ints(rng, (4,))
    F, W = polytile.compile(src)(A, b)
    np.testing.assert_array_equal(F, (A @ b)[:, None])
    np.testing.assert_array_equal(W, (A @ b)[:, None] * 4)


# ---------------------------------------------------------------------------
# Empty domains
# ---------------------------------------------------------------------------


def test_output_of_size_zero():
    k = polytile.compile(
        "function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {"
        " O[n, y, x, co : N, H - KH + 1, W - KW + 1, CO] = +(I[n, y + ky, x + kx, ci] * F[ky, kx, ci, co]); }")
    I = np.ones((2, 3, 5, 2))
    F = np.ones((4, 2, 2, 3))  # KH = H + 1: no valid output row
    O = k(I, F)
    assert O.shape == (2, 0, 4, 3) and O.dtype == np.float64
    ref = polytile.reference(k.program, I, F)
    assert ref.shape == O.shape and ref.dtype == O.dtype


@pytest.mark.parametrize("agg", ["+", "*", ">", "<", "="])
def test_constraint_excluding_every_point_gives_zeros(agg, rng):
    k = polytile.compile(f"function (I[N]) -> (O) {{ O[i : N] = {agg}(I[i]), i + N < N; }}")
    I = ints(rng, (6,))
    O = k(I)
    np.testing.assert_array_equal(O, np.zeros(6))  # unreached cells are 0, not the identity
    np.testing.assert_array_equal(O, polytile.reference(k.program, I))


@pytest.mark.parametrize("agg", ["+", "*", ">", "<", "="])
def test_two_dimensional_contraction_with_an_empty_domain(agg, rng):
    # A[i + j, i + N] never lies inside A: no point runs.  The "=" aggregation's transpose tiling
    # asked for the extent of a loop with no points and stopped with an internal error.
    k = polytile.compile(f"function (A[M, N]) -> (O) {{ O[i, j : N, M] = {agg}(A[i + j, i + N]); }}")
    A = ints(rng, (4, 5))
    np.testing.assert_array_equal(k(A), np.zeros((5, 4)))
    np.testing.assert_array_equal(k(A), polytile.reference(k.program, A))


@pytest.mark.parametrize("agg", ["+", "*", ">", "<"])
@pytest.mark.parametrize("target", ["openmp", "llvm"])
def test_bool_matrix_products_on_the_host_descriptor(agg, target, rng):
    # The host descriptor's vector lanes for bool: an unknown element type stopped the compile.
    k = polytile.compile(f"function (A[M, K], B[K, N]) -> (C) {{ C[i, j : M, N] = {agg}(A[i, k] * B[k, j]); }}",
                         target=target)
    A, B = rng.random((37, 41)) < 0.3, rng.random((41, 29)) < 0.3
    out, ref = k(A, B), polytile.reference(k.program, A, B)
    assert out.dtype == ref.dtype
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("agg", ["+", ">", "="])
def test_empty_domain_keeps_the_default(agg, rng):
    k = polytile.compile(f"function (I[N], D[N]) -> (O) {{ O[i : N] = {agg}(I[i + N]) default D; }}")
    I, D = ints(rng, (5,)), ints(rng, (5,))
    np.testing.assert_array_equal(k(I, D), D)


def test_empty_input_reductions():
    X = np.zeros((0,))
    for agg in ("+", ">", "*"):
        k = polytile.compile(f"function (X[L]) -> (R) {{ R[] = {agg}(X[i]); }}")
        r = k(X)
        assert r.shape == () and r == 0.0, agg  # no point reaches the scalar: it stays 0
    k = polytile.compile("function (X[M, N]) -> (R) { R[i : M] = >(X[i, j]); }")
    r = k(np.zeros((3, 0)))
    np.testing.assert_array_equal(r, np.zeros(3))
    np.testing.assert_array_equal(r, polytile.reference(k.program, np.zeros((3, 0))))


def test_dir_lists_the_api_and_reprs_are_one_line():
    """``dir(polytile)`` shows the lazily imported API; the objects a user prints fit one line."""
    import polytile

    names = set(dir(polytile))
    assert {"compile", "Kernel", "reference", "schedule", "parse", "optimize_c", "PolytileError"} <= names
    src = "function (A[N]) -> (B) { B = A * 2; }"
    s = polytile.schedule(src, dims="N=8")
    k = polytile.compile(src)
    spec = k.specialize(np.ones(4, np.float32))
    for obj in (s, k, spec):
        text = repr(obj)
        assert "\n" not in text and len(text) < 200, text
    assert "auto_parallel()" in repr(s) and "Schedule" in repr(s)


def test_compile_docstring_documents_every_option():
    import dataclasses

    from polytile import options

    doc = polytile.compile.__doc__
    for field in dataclasses.fields(options.Options):
        assert f"``{field.name}``" in doc, field.name
    for name in options.TARGETS:
        assert f'``"{name}"``' in doc, name


def test_min_parallel_work_decides_which_loops_keep_their_parallel_region():
    shapes, dtypes = [(4, 3), (3, 5)], ["float32", "float32"]
    assert "#pragma omp parallel" not in polytile.compile(MATMUL).source(shapes=shapes, dtypes=dtypes)
    assert "#pragma omp parallel" in polytile.compile(MATMUL, min_parallel_work=0).source(shapes=shapes, dtypes=dtypes)
    big = [(64, 64), (64, 64)]
    assert "#pragma omp parallel" not in polytile.compile(MATMUL, min_parallel_work=10**9).source(shapes=big,
                                                                                                    dtypes=dtypes)
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(polytile.PolytileError, match="min_parallel_work"):
            polytile.compile(MATMUL, min_parallel_work=bad)


# Two temporaries (E, T) between the input and the output: the launcher allocates them per call or keeps them.
CHAIN = "function (X[N]) -> (Z) { E = exp(-abs(X)); T = X * X; Z = E + T; }"


@pytest.mark.parametrize("target", ["openmp", "llvm"])
def test_temporaries_are_kept_for_the_next_call(monkeypatch, target):
    """A launcher keeps its temporaries (specialization.KEEP_TEMPS_BYTES): a second call allocates only
    its output, so it does not page-fault its temporaries in again when malloc gave them back."""
    from polytile import specialization

    made = []
    real = specialization._empty
    monkeypatch.setattr(specialization, "_empty", lambda shape, dt, name: made.append(name) or real(shape, dt, name))
    k = polytile.compile(CHAIN, target=target)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(5000).astype(np.float32) for _ in range(3)]
    outs = [k(x) for x in xs]
    for x, z in zip(xs, outs):
        np.testing.assert_allclose(z, polytile.reference(CHAIN, x), rtol=1e-5)
    assert len({id(z) for z in outs}) == 3  # outputs are the caller's: fresh each call
    temps = [n for n in made if n != "Z"]
    assert made.count("Z") == 3 and len(temps) == len(set(temps)) >= 1, made


def test_concurrent_calls_do_not_share_temporaries():
    """A call takes the kept temporaries and gives them back after: calls of one kernel from several
    threads at once each get their own (wrong results if two shared them)."""
    from concurrent.futures import ThreadPoolExecutor

    k = polytile.compile(CHAIN)
    rng = np.random.default_rng(4)
    xs = [rng.integers(-3, 4, 200_000).astype(np.float32) for _ in range(16)]
    want = [polytile.reference(CHAIN, x) for x in xs]
    k(xs[0])
    with ThreadPoolExecutor(4) as ex:
        for _ in range(5):
            got = list(ex.map(k, xs))
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("call, kind", [
    (lambda: polytile.compile(ROOT / "examples" / "matmul.tile", target="x"), ValueError),
    (lambda: polytile.compile(ROOT / "examples" / "matmul.tile", fusion="x"), ValueError),
    (lambda: polytile.compile(ROOT / "examples" / "matmul.tile", min_parallel_work=-1), ValueError),
    (lambda: polytile.compile(ROOT / "examples" / "matmul.tile", hardware="no-such-preset"), ValueError),
    (lambda: polytile.compile(ROOT / "examples" / "matmul.tile", bogus=1), TypeError),
    (lambda: polytile.compile("no_such_program.tile"), FileNotFoundError),
    (lambda: polytile.compile(ROOT / "examples" / "matmul.tile", schedule="no_such_schedule.json"), FileNotFoundError),
    (lambda: polytile.schedule(ROOT / "examples" / "matmul.tile", dims="garbage"), ValueError),
])
def test_bad_arguments_raise_what_python_users_catch(call, kind):
    # Each was a bare PolytileError, which `except ValueError` (or TypeError, FileNotFoundError) missed.
    with pytest.raises(kind) as info:
        call()
    assert isinstance(info.value, polytile.PolytileError)


def test_options_that_read_as_something_else_are_refused():
    # parallel="no" is a true string, and M given twice kept the last value: both silently ran
    # something other than what was asked.
    with pytest.raises(ValueError, match="parallel must be True or False"):
        polytile.compile(ROOT / "examples" / "matmul.tile", parallel="no")
    with pytest.raises(ValueError, match="given twice"):
        polytile.schedule(ROOT / "examples" / "matmul.tile", dims="M=3,N=4,K=2,M=5")
    assert polytile.schedule(ROOT / "examples" / "matmul.tile", dims="M=3,N=4,K=2,M=3") is not None
    polytile.compile(ROOT / "examples" / "matmul.tile", parallel=np.False_)
