"""The CUDA target: GPU mapping, CUDA source built by nvcc, and the CPU emulation checked against the oracle.

* Mapping (``polytile.scheduling.gpu``): the band of dependence-free loops is
  mapped, x on the output's unit-stride loop, blocks within the hardware
  limits, reductions sequential in the thread; matmul and conv2d pinned.
* Emulation: every example, at every ``// dims:`` line, run through the
  mapped kernels on the CPU (blocks and threads in reverse order) and
  compared with ``polytile.reference`` -- exact on integer-valued inputs
  (tolerance only for the examples in ``numpy_programs.INEXACT``); a second
  run with small blocks and ``max_grid=2`` forces partial blocks and
  grid-stride loops on every mapped axis.
* nvcc (skipped when it is absent): a few examples through
  ``compile_cuda`` (shared library and PTX for sm_90), and every example at
  every size in one translation unit (one nvcc run).
* Without a GPU, calling the real kernel raises a clear PolytileError; with
  one (``-m gpu``), results match the oracle.
"""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import polytile
from polytile import runtime
from polytile.codegen import cuda as cuda_codegen
from polytile.config import get_config
from polytile.targets.cuda import compile_cuda, compile_ptx, cuda_source, gpu_limits, no_device_reason
from polytile.errors import PolytileError
from polytile.pipeline import load_program

from numpy_programs import INEXACT, TOLERANCE, example_cases, example_paths, input_shapes, make_inputs

PATHS = example_paths()
CASES = [(p, n) for p in PATHS for n in range(len(example_cases(p)))]
HAVE_NVCC = get_config().nvcc is not None
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (install the CUDA toolkit or set POLYTILE_NVCC)")
HAVE_GPU = shutil.which("nvidia-smi") is not None


def _case(path, n):
    prog = load_program(path)
    case = example_cases(path)[n]
    shapes = input_shapes(prog, case)
    return prog, case, shapes


def _check(path, prog, got, arrays):
    want = polytile.reference(prog, *arrays)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if path.stem in INEXACT:
            np.testing.assert_allclose(g, w, **TOLERANCE)
        else:
            np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------------------
# Mapping
# ---------------------------------------------------------------------------


def _maps(path, shapes, **kw):
    _, maps = cuda_source(path, shapes, ["float32"] * len(shapes), emulate=True, **kw)
    return maps


def test_matmul_mapping():
    """With a forced block size (256 threads): the axes and block shape (the model's choice: test_cuda_cost)."""
    m = _maps("examples/matmul.tile", [(4096, 4096), (4096, 4096)], threads=256)
    assert len(m) == 2  # C = 0, then the contraction
    fill, mm = m
    assert fill.statements == ("Z0",) and mm.statements == ("S0",)
    x, y = mm.axes
    assert (x.axis, [lp.name for lp in x.loops]) == ("x", ["j"])  # j indexes C's unit-stride dimension
    assert (y.axis, [lp.name for lp in y.loops]) == ("y", ["i"])
    assert mm.block == (32, 8, 1) and mm.grid == (128, 512, 1)
    assert mm.sequential == ("k",)  # the reduction stays in the thread
    assert "sequential in each thread: k" in mm.describe()
    assert "x: j[0:4096] -> blockIdx.x * 32 + threadIdx.x (128 blocks)" in mm.describe()


def test_conv2d_mapping():
    # NHWC input, HWIO filter: O[n, y, x, co]
    m = _maps("examples/conv2d.tile", [(8, 66, 66, 64), (3, 3, 64, 128)], threads=256)
    conv = m[-1]
    assert [lp.name for lp in conv.axes[0].loops] == ["co"]
    assert [lp.name for lp in conv.axes[1].loops] == ["x"]
    assert [lp.name for lp in conv.axes[2].loops] == ["n", "y"]  # linearised on z
    assert conv.block[0] == 32 and conv.threads <= 256
    assert set(conv.sequential) == {"ky", "kx", "ci"}


def test_block_limits_and_warp_multiple():
    lim = gpu_limits("nvidia-h100")
    assert lim.warp_size == 32 and lim.max_threads_per_block == 1024 and lim.arch == "sm_90"
    for path in PATHS:
        prog, case, shapes = _case(path, 0)
        for m in _maps(path, shapes):
            assert m.threads <= lim.max_threads_per_block
            for a, lim_g in zip(m.axes, (2 ** 31 - 1, 65535, 65535)):
                assert 1 <= a.grid <= lim_g and a.grid * a.block >= 1
            if m.axes and m.axes[0].total >= 32:
                assert m.axes[0].block % 32 == 0, m.describe()


def test_max_grid_forces_grid_stride():
    m = _maps("examples/matmul.tile", [(100, 7), (7, 300)], max_grid=2, threads=64)[1]
    assert m.grid == (2, 2, 1) and all(a.strided for a in m.axes)
    assert "grid-stride" in m.describe()
    src, _ = cuda_source("examples/matmul.tile", [(100, 7), (7, 300)], ["float32"] * 2, max_grid=2, threads=64)
    assert re.search(r"for \(long pt_bx = pt_block_x; pt_bx < \d+; pt_bx \+= 2\)", src.text)


def test_hardware_grid_limit_forces_grid_stride():
    # i has 600000 rows at 8 per block (256-thread blocks): 75000 blocks > 65535 on y.
    m = _maps("examples/matmul.tile", [(600000, 4), (4, 64)], threads=256)[1]
    x, y = m.axes
    assert (y.blocks, y.grid, y.strided) == (75000, 65535, True) and not x.strided
    assert m.grid == (2, 65535, 1)


def test_not_a_gpu_descriptor():
    with pytest.raises(PolytileError, match="not a GPU descriptor"):
        gpu_limits("x86-avx2")


def test_sequential_nest_is_one_thread():
    m = _maps("examples/cumsum.tile", [(37,)])
    assert any(not k.axes or k.sequential for k in m)
    dot = _maps("examples/dot.tile", [(50,), (50,)])
    assert dot[-1].axes == () and dot[-1].grid == (1, 1, 1) and "one thread" in dot[-1].describe()


# ---------------------------------------------------------------------------
# Emulation against the oracle
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["default", "model-strided", "tiny", "shared"])
@pytest.mark.parametrize("path,n", CASES, ids=[f"{p.stem}-{n}" for p, n in CASES])
def test_emulation_matches_oracle(path, n, variant):
    """default: the cost model's blocks, steps and promotion; model-strided: the same with at most 2 blocks
    per axis (grid-stride loops around promoted kernels); tiny/shared: forced 64-thread blocks."""
    prog, case, shapes = _case(path, n)
    rng = np.random.default_rng(1000 + n)
    arrays = make_inputs(prog, case, rng)
    kw = {"default": {}, "model-strided": dict(max_grid=2), "tiny": dict(threads=64, max_grid=2),
          "shared": dict(threads=64, max_grid=2, shared=True)}[variant]
    k = compile_cuda(prog, shapes, [a.dtype for a in arrays], emulate=True, **kw)
    _check(path, prog, k(*arrays), arrays)
    if variant != "default":  # partial blocks on some axis, grid-stride where there is more than 2 blocks
        for m in k.mappings:
            for a in m.axes:
                assert a.grid <= 2 and (a.block <= 64 or variant == "model-strided")


# ---------------------------------------------------------------------------
# nvcc
# ---------------------------------------------------------------------------

NVCC_SUBSET = ["matmul", "conv2d", "softmax", "triu", "dot", "masked_max"]


@needs_nvcc
@pytest.mark.parametrize("name", NVCC_SUBSET)
def test_nvcc_builds(name):
    path = f"examples/{name}.tile"
    prog, case, shapes = _case(path, len(example_cases(path)) - 1)
    k = compile_cuda(prog, shapes, ["float32"] * len(shapes), max_grid=3, shared=name in ("matmul", "dot"))
    assert k.library_path.is_file() and k.source.lang == "cuda"
    assert k.source.text.count("__global__") == len(k.mappings)
    assert f'extern "C" int {k.source.entry}_device(' in k.source.text
    assert "cudaMalloc" in k.source.text and "cudaMemcpyDeviceToHost" in k.source.text


@needs_nvcc
def test_ptx():
    ptx = compile_ptx("examples/matmul.tile", [(64, 32), (32, 48)], ["float32"] * 2)
    assert ".target sm_90" in ptx and ".entry pt_matmul_k1(" in ptx


@pytest.mark.parametrize("name,promoted", [("matmul", ["A", "B"]), ("batched_matmul", ["X", "Y"]),
                                           ("matvec", ["X"]), ("gemm", ["A", "B"]), ("min_plus", ["A", "B"])])
def test_shared_plans(name, promoted):
    from polytile.targets.cuda import _specialize

    path = f"examples/{name}.tile"
    prog, case, shapes = _case(path, 0)
    _, scop, sched, _, maps = _specialize(prog, shapes, ["float32"] * len(shapes), "nvidia-h100", None, None)
    plans = [cuda_codegen.shared_plan(scop, sched, m)[0] for m in maps]
    got = sorted(t.array for p in plans if p is not None for t in p.tiles)
    assert got == sorted(promoted)
    assert all(p.nbytes <= 48 * 1024 for p in plans if p is not None)


def test_shared_matmul_emulation_partial_tiles():
    """70 = 32 + 32 + 6 reduction steps, rows and columns not multiples of the block, grid-stride on y."""
    A = np.random.default_rng(0).integers(-4, 5, (40, 70)).astype(np.float64)
    B = np.random.default_rng(1).integers(-4, 5, (70, 33)).astype(np.float64)
    k = compile_cuda("examples/matmul.tile", [A.shape, B.shape], ["float64"] * 2, emulate=True, threads=64,
                     max_grid=2, shared=True)
    assert "shared memory" in k.source.text and "pt_s1[32][32]" in k.source.text
    np.testing.assert_array_equal(k(A, B), A @ B)


@needs_nvcc
def test_shared_ptx():
    ptx = compile_ptx("examples/matmul.tile", [(256, 256), (256, 256)], ["float32"] * 2, shared=True)
    body = ptx[ptx.index(".entry pt_matmul_k1("):]
    assert ".shared" in body and "bar.sync" in body


@needs_nvcc
def test_ptx_keeps_the_accumulator_in_a_register():
    """The reduction accumulates into its output cell; with ``__restrict__`` arrays nvcc keeps it in a
    register across the sequential k loop: one global store per thread, inputs through the read-only path."""
    ptx = compile_ptx("examples/matmul.tile", [(256, 256), (256, 256)], ["float32"] * 2)
    body = ptx[ptx.index(".entry pt_matmul_k1("):]
    body = body[:body.index("\n}\n")]
    assert body.count("st.global") == 1
    assert "ld.global.nc" in body


@pytest.mark.slow
@needs_nvcc
def test_nvcc_builds_every_example_in_one_unit():
    """Every example at every size -- float32 with the cost model's blocks, steps and promotion, float64
    (first size) with 256-thread blocks and the default promotion -- each in its own namespace, compiled by
    one nvcc run for sm_90 and once more to PTX."""
    from polytile.targets.cuda import _mappings, _specialize

    parts = [cuda_codegen.cuda_prelude()]
    count = 0
    promoted = 0
    for path, n in CASES:
        prog, case, shapes = _case(path, n)
        for dt in ("float32", "float64"):
            if dt == "float64" and n > 0:
                continue
            threads = None if dt == "float32" else 256
            _, scop, sched, lim, _ = _specialize(prog, shapes, [dt] * len(shapes), "nvidia-h100", threads, None)
            maps, _ = _mappings(scop, sched, lim, "nvidia-h100", threads, None if dt == "float32" else True, None)
            promoted += sum(m.shared is not None for m in maps)
            src = cuda_codegen.generate(scop, sched, maps, entry=f"pt_ex{count}", prelude=False)
            parts.append(f"namespace pt_ns{count} {{\n{src.text}\n}}\n")
            count += 1
    text = "\n".join(parts)
    lib = runtime.build(text, lang="cuda", flags=cuda_codegen.nvcc_flags("sm_90"), name_hint="all_examples")
    assert lib.is_file() and count >= len(PATHS) and promoted > len(PATHS) // 2
    ptx = runtime.build(text, lang="cuda", flags=cuda_codegen.nvcc_flags("sm_90", ptx=True), name_hint="all_examples_ptx")
    body = ptx.read_text()
    assert ".target sm_90" in body and body.count(".entry ") >= count


# ---------------------------------------------------------------------------
# Running the real kernel
# ---------------------------------------------------------------------------


@needs_nvcc
@pytest.mark.skipif(HAVE_GPU, reason="a GPU is present")
def test_no_gpu_raises_clear_error():
    k = compile_cuda("examples/matmul.tile", [(8, 4), (4, 8)], ["float32"] * 2)
    with pytest.raises(PolytileError, match="no CUDA device is present"):
        k(np.ones((8, 4), np.float32), np.ones((4, 8), np.float32))
    assert no_device_reason() is not None


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not HAVE_GPU, reason="no GPU (nvidia-smi not found)")
@pytest.mark.parametrize("name", NVCC_SUBSET)
def test_gpu_matches_oracle(name):
    path = f"examples/{name}.tile"
    from pathlib import Path

    for n in range(len(example_cases(path))):
        prog, case, shapes = _case(path, n)
        arrays = make_inputs(prog, case, np.random.default_rng(n))
        k = compile_cuda(prog, shapes, [a.dtype for a in arrays], max_grid=3)
        _check(Path(path), prog, k(*arrays), arrays)


# ---------------------------------------------------------------------------
# Scops with real (non-reduction) dependences
# ---------------------------------------------------------------------------


def _row_scan(M=11, N=37):
    """A[i][j] = A[i][j-1] + B[i][j]: rows independent, columns a loop-carried flow."""
    from polytile.poly.from_isl import scop_from_isl

    return scop_from_isl("rowscan", [
        {"domain": f"{{ S[i, j] : 0 <= i < {M} and 1 <= j < {N} }}", "write": "{ S[i, j] -> A[i, j] }",
         "reads": ["{ S[i, j] -> A[i, j - 1] }", "{ S[i, j] -> B[i, j] }"]},
    ], {"A": ((M, N), "float64"), "B": ((M, N), "float64")})


def _run(k, scop, rng):
    from polytile.poly.from_isl import execute

    arrays = {a.name: rng.integers(-4, 5, size=a.shape).astype(a.dtype) for a in scop.arrays}
    return k.run_named(arrays), execute(scop, arrays)


@pytest.mark.parametrize("kw", [{}, dict(threads=4, max_grid=2)])
def test_row_scan_maps_rows_only(kw):
    from polytile.targets.cuda import compile_scop_cuda

    scop = _row_scan()
    k = compile_scop_cuda(scop, emulate=True, **kw)
    (m,) = k.mappings
    assert [lp.name for a in m.axes for lp in a.loops] == ["i"] and m.sequential == ("j",)
    got, want = _run(k, scop, np.random.default_rng(3))
    np.testing.assert_array_equal(got["A"], want["A"])


def test_emulation_catches_an_illegal_mapping():
    """Mapping the carried loop j onto threads: the reverse-order emulation gives wrong sums."""
    from polytile.targets.cuda import compile_scop_cuda
    from polytile.scheduling.gpu import GpuMapping, GridAxis, MappedLoop

    scop = _row_scan()
    good = compile_scop_cuda(scop, emulate=True).mappings[0]
    i_loop = good.axes[0].loops[0]
    j_dim = i_loop.dim + 2  # the next loop of the 2d+1 schedule
    bad = GpuMapping(0, good.statements, (GridAxis("x", (MappedLoop(j_dim, "j", 1, 36),), 32, 2, 2),
                                          GridAxis("y", (i_loop,), 8, 2, 2)))
    k = compile_scop_cuda(scop, emulate=True, mappings=[bad])
    got, want = _run(k, scop, np.random.default_rng(3))
    assert not np.array_equal(got["A"], want["A"])


def _jacobi1d(T=4, N=20):
    from polytile.poly.from_isl import scop_from_isl

    return scop_from_isl("jacobi1d", [
        {"domain": f"{{ S[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ S[t, i] -> B[i] }",
         "reads": ["{ S[t, i] -> A[i - 1] }", "{ S[t, i] -> A[i] }", "{ S[t, i] -> A[i + 1] }"]},
        {"domain": f"{{ U[t, i] : 0 <= t < {T} and 1 <= i < {N - 1} }}", "write": "{ U[t, i] -> A[i] }",
         "reads": ["{ U[t, i] -> B[i] }"]},
    ], {"A": ((N,), "float64"), "B": ((N,), "float64")}, schedule="{ S[t, i] -> [t, 0, i]; U[t, i] -> [t, 1, i] }")


@pytest.mark.parametrize("kw", [{}, dict(threads=4, max_grid=2)])
def test_time_loop_launches_per_iteration(kw):
    """jacobi-1d with a shared time loop: t carries the dependences, so the host runs it and launches
    one kernel per sweep (S, then U) per t, each mapping i onto threads; exact against the Scop's execution."""
    from polytile.targets.cuda import compile_scop_cuda

    scop = _jacobi1d()
    k = compile_scop_cuda(scop, emulate=True, **kw)
    s_map, u_map = k.mappings
    for m, name in ((s_map, "S"), (u_map, "U")):
        assert m.statements == (name,) and [lp.name for a in m.axes for lp in a.loops] == ["i"]
        assert [(h.name, h.lo, h.hi) for h in m.host] == [("t", 0, 3)]
        assert "launched for each t in [0, 3]" in m.describe()
    assert s_map.host == u_map.host  # one host loop around both launches, not two loops
    assert k.source.text.count("for (long pt_h") == 1
    got, want = _run(k, scop, np.random.default_rng(5))
    for name in ("A", "B"):
        np.testing.assert_array_equal(got[name], want[name])


def test_host_loop_order_matters():
    """Running the host loop's sweeps as one kernel each over all t (no host loop) would be wrong:
    the emulation of that mapping differs from the Scop's execution."""
    from polytile.targets.cuda import compile_scop_cuda
    from polytile.scheduling.gpu import GpuMapping

    scop = _jacobi1d()
    good = compile_scop_cuda(scop, emulate=True).mappings
    bad = [GpuMapping(m.index, m.statements, m.axes, m.sequential) for m in good]  # host loops dropped
    k = compile_scop_cuda(scop, emulate=True, mappings=bad)
    got, want = _run(k, scop, np.random.default_rng(5))
    assert not np.array_equal(got["A"], want["A"])


@needs_nvcc
def test_host_loop_cuda_source_builds():
    from polytile.targets.cuda import compile_scop_cuda

    k = compile_scop_cuda(_jacobi1d(T=3, N=40))
    text = k.source.text
    assert "for (long pt_h1 = 0; pt_h1 <= 2; pt_h1++) {" in text
    assert re.search(r"pt_jacobi1d_k0<<<.*>>>\(A, B, pt_h1\);", text)
    assert k.library_path.is_file()


def test_prefix_sum_inside_a_time_loop_stays_one_thread():
    """Nothing inside the carried loop is parallel: one one-thread kernel, no host loop."""
    from polytile.targets.cuda import compile_scop_cuda
    from polytile.poly.from_isl import scop_from_isl

    scop = scop_from_isl("scan2", [
        {"domain": "{ S[t, i] : 0 <= t < 3 and 1 <= i < 9 }", "write": "{ S[t, i] -> A[i] }",
         "reads": ["{ S[t, i] -> A[i - 1] }", "{ S[t, i] -> A[i] }"]},
    ], {"A": ((9,), "float64")})
    k = compile_scop_cuda(scop, emulate=True)
    (m,) = k.mappings
    assert m.axes == () and m.host == () and "one thread" in m.describe()
    got, want = _run(k, scop, np.random.default_rng(2))
    np.testing.assert_array_equal(got["A"], want["A"])
