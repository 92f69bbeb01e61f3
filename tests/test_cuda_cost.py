"""The GPU cost model (polytile.cost.gpu) and the choices it drives; shared-memory promotion generalised.

* occupancy: hand-computed cases of CUDA's occupancy calculator on the H100
  descriptor, and out-of-resources errors naming the resource, need and limit;
* registers: the estimate against ptxas (nvcc, no GPU needed);
* traffic: promotion lowers the predicted global traffic (matmul, conv2d);
* choices: block size, steps and promotion follow the descriptor (a
  descriptor with less shared memory or fewer registers changes them; H200's
  bandwidth lowers memory-bound predictions);
* promotion on vs off: every order-preserving step box of several
  reduction kernels gives the results of the unpromoted kernel under
  cuda-emulate (exactly on integer-valued inputs, to rounding on floats).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from polytile import hardware
from polytile.cost import gpu as gpucost
from polytile.config import get_config
from polytile.targets.cuda import _mappings, _specialize, compile_cuda, cuda_source, ptxas_registers
from polytile.errors import PolytileError
from polytile.scheduling.gpu import OutOfResources, promotion_plan, reduction_extents, step_candidates

H100 = hardware.load("nvidia-h100")
H200 = hardware.load("nvidia-h200")
needs_nvcc = pytest.mark.skipif(get_config().nvcc is None, reason="nvcc not found")

MM = ("examples/matmul.tile", [(4096, 4096), (4096, 4096)])
CONV = ("examples/conv2d.tile", [(1, 56, 56, 64), (3, 3, 64, 64)])  # NHWC 1x56x56x64, 3x3x64 -> 64


def _spec(path, shapes, dtype="float32", threads=None, max_grid=None):
    _, scop, sched, lim, maps = _specialize(path, shapes, [dtype] * len(shapes), "nvidia-h100", threads, max_grid)
    return scop, sched, lim, maps


# ---------------------------------------------------------------------------
# Occupancy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("threads,regs,smem,want", [
    # 8 warps x 32 regs x 32 lanes = 8192 registers/block -> 8 blocks by registers and by threads: 64/64 warps
    (256, 32, 0, (8, 64, 1.0, "threads")),
    # 64 regs: 2048 per warp, 16384 per block -> 4 blocks, 32 warps
    (256, 64, 0, (4, 32, 0.5, "registers")),
    # 16 KiB + 1 KiB reserved per block: 233472 // 17408 = 13 blocks of 4 warps
    (128, 32, 16384, (13, 52, 0.8125, "shared memory")),
    # 32-thread blocks: 32 blocks/SM at most -> 32 warps
    (32, 16, 0, (32, 32, 0.5, "blocks")),
    # 33 registers round up to 1280 per warp (256-register units): 65536 // (1280 * 32) = 1 block of 1024
    (1024, 33, 0, (1, 32, 0.5, "registers")),
    # 100 KiB shared: 233472 // (102400 + 1024) = 2 blocks
    (256, 24, 102400, (2, 16, 0.25, "shared memory")),
])
def test_occupancy_hand_computed(threads, regs, smem, want):
    o = gpucost.occupancy(H100, threads, regs, smem)
    assert (o.blocks_per_sm, o.warps_per_sm, o.fraction, o.limiter) == want


@pytest.mark.parametrize("kw,resource", [
    (dict(threads=2048, registers=32), "threads per block"),
    (dict(threads=128, registers=300), "registers per thread"),
    (dict(threads=128, registers=32, shared_bytes=300000), "bytes of shared memory per block"),
])
def test_occupancy_out_of_resources(kw, resource):
    with pytest.raises(OutOfResources, match=resource) as e:
        gpucost.occupancy(H100, **kw)
    assert e.value.resource == resource and e.value.needed > e.value.limit


def test_too_large_tile_is_an_error_naming_resource_need_and_limit():
    # 1024-thread blocks (32 x 32) and k in steps of 4096: A[32][4096] + B[4096][32] floats = 1 MiB > 227 KiB.
    with pytest.raises(PolytileError, match=r"out of resources: kernel1 \(S0, tiles A, B\) needs 1048576 bytes "
                                            r"of shared memory per block; the limit is 232448"):
        cuda_source(*MM, ["float32"] * 2, threads=1024, steps={"k": 4096})
    scop, sched, lim, maps = _spec(*MM, threads=1024)
    with pytest.raises(OutOfResources):
        promotion_plan(scop, sched, maps[1], {"k": 4096}, shared_bytes=H100.shared_memory_per_block_bytes)


def test_choose_rejects_plans_beyond_the_descriptor():
    small = dataclasses.replace(H100, shared_memory_per_block_bytes=8192, shared_memory_per_sm_bytes=65536)
    scop, sched, lim, _ = _spec(*CONV)
    c = gpucost.choose(scop, sched, small)
    conv = c.mappings[-1]
    assert conv.shared is not None and conv.shared.nbytes <= 8192
    assert any("needs" in r and "the limit is 8192" in r for r in c.rejected)


# ---------------------------------------------------------------------------
# Registers and traffic
# ---------------------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize("name,shapes", [
    ("matmul", [(256, 256), (256, 256)]), ("conv2d", [(1, 20, 20, 16), (3, 3, 16, 32)]),
    ("batched_matmul", [(4, 64, 64), (4, 64, 64)]), ("matvec", [(256, 256), (256,)]),
])
def test_register_estimate_near_ptxas(name, shapes):
    path = f"examples/{name}.tile"
    src, maps = cuda_source(path, shapes, ["float32"] * len(shapes))
    got = ptxas_registers(src)
    scop, sched, lim, _ = _spec(path, shapes)
    for m in maps:
        if not m.sequential:
            continue  # fills: a handful of registers either way, never the occupancy limit
        est = gpucost.registers(scop, m)
        real = got[f"{src.entry}_k{m.index}"]
        assert real / 2 <= est <= real * 2, (m.describe(), est, real)


@pytest.mark.parametrize("path,shapes,promoted", [(MM[0], MM[1], {"A", "B"}), (CONV[0], CONV[1], {"I", "F"})])
def test_promotion_reduces_predicted_traffic(path, shapes, promoted):
    scop, sched, lim, maps = _spec(path, shapes, threads=256)
    m = maps[-1]
    ext = reduction_extents(scop, sched, m)
    plain = gpucost.estimate(scop, sched, m, H100)
    for steps in step_candidates(ext):
        try:
            plan, _ = promotion_plan(scop, sched, m, steps, shared_bytes=H100.shared_memory_per_block_bytes)
        except OutOfResources:
            continue
        assert {t.array for t in plan.tiles} == promoted
        est = gpucost.estimate(scop, sched, m.with_shared(plan), H100)
        assert est.traffic_bytes < plain.traffic_bytes / 4, (steps, est.traffic_bytes, plain.traffic_bytes)
        assert est.shared_bytes == plan.nbytes and est.time_s < plain.time_s


def test_matmul_traffic_by_hand():
    """Promoted 32x32 blocks, k in steps: each block reads its A rows and B columns once per step:
    traffic = (M*K/32 + K*N/32 per block column/row) -> 2 * 4096^3 / 32 floats, plus C read and written once."""
    scop, sched, lim, maps = _spec(*MM, threads=1024)
    m = maps[1]
    plan, _ = promotion_plan(scop, sched, m, {"k": 32})
    est = gpucost.estimate(scop, sched, m.with_shared(plan), H100)
    n = 4096
    want = 2 * n ** 3 / 32 * 4 + 2 * n * n * 4
    assert est.traffic_bytes == pytest.approx(want)
    assert est.flops == 2 * n ** 3


# ---------------------------------------------------------------------------
# Choices follow the descriptor
# ---------------------------------------------------------------------------


def test_chosen_matmul_and_conv2d_mappings():
    scop, sched, lim, _ = _spec(*MM)
    mm = gpucost.choose(scop, sched, H100).mappings[1]
    assert {t.array for t in mm.shared.tiles} == {"A", "B"} and mm.block[0] == 32
    assert mm.shared.nbytes <= H100.shared_memory_per_block_bytes
    scop, sched, lim, _ = _spec(*CONV)
    conv = gpucost.choose(scop, sched, H100).mappings[-1]
    assert {t.array for t in conv.shared.tiles} == {"I", "F"}
    assert [v for v, *_ in conv.shared.steps] == ["ky", "kx", "ci"]
    assert "shared memory" in conv.describe() and "bytes/block" in conv.describe()


def test_choices_follow_the_descriptor():
    scop, sched, lim, _ = _spec(*CONV)
    base = gpucost.choose(scop, sched, H100).mappings[-1]
    # Less shared memory per block: smaller tiles.
    tight = dataclasses.replace(H100, shared_memory_per_block_bytes=4096, shared_memory_per_sm_bytes=32768)
    small = gpucost.choose(scop, sched, tight).mappings[-1]
    assert small.shared is not None and small.shared.nbytes <= 4096 < base.shared.nbytes
    # A quarter of the registers: the model no longer picks blocks that do not fit.
    few = dataclasses.replace(H100, registers_per_sm=8192)
    c = gpucost.choose(scop, sched, few)
    for m, e in zip(c.mappings, c.estimates):
        assert e.registers * m.threads <= 8192


def test_h200_bandwidth_lowers_memory_bound_predictions():
    scop, sched, lim, _ = _spec("examples/transpose.tile", [(4096, 4096)])
    c100 = gpucost.choose(scop, sched, H100)
    c200 = gpucost.choose(scop, sched, H200)
    assert [e.bound for e in c100.estimates] == ["global memory"] * len(c100.estimates)
    assert c200.time_s < c100.time_s
    # only the bandwidth differs between the two descriptors: the ratio of the memory-bound times
    assert c100.time_s / c200.time_s == pytest.approx(4800 / 3350, rel=0.1)


def test_model_describe_in_kernel():
    k = compile_cuda("examples/matmul.tile", [(64, 48), (48, 40)], ["float32"] * 2, emulate=True)
    text = k.describe()
    assert "occupancy" in text and "predicted" in text and "registers" in text


# ---------------------------------------------------------------------------
# Promotion on vs off: same results
# ---------------------------------------------------------------------------

PROMOTABLE = [
    ("conv2d", [(2, 11, 9, 5), (3, 2, 5, 7)]),
    ("conv2d_strided", None), ("conv2d_same", None), ("conv1d", None), ("depthwise_conv", None),
    ("matmul", [(37, 45), (45, 29)]), ("batched_matmul", None), ("gemm", None), ("matvec", None),
    ("min_plus", None), ("trmv", None),
]


def _shapes(name, shapes):
    if shapes is not None:
        return shapes
    from numpy_programs import example_cases, input_shapes
    from polytile.pipeline import load_program

    path = f"examples/{name}.tile"
    return input_shapes(load_program(path), example_cases(path)[0])


@pytest.mark.parametrize("name,shapes", PROMOTABLE, ids=[n for n, _ in PROMOTABLE])
def test_promotion_on_and_off_same_results(name, shapes):
    """Every order-preserving step box (the first 4) with 64-thread blocks and at most 2 blocks per axis:
    exactly equal on integer-valued inputs (any indexing error shows), and equal to float rounding on
    random floats (each thread sums in the unpromoted order; only gcc's FMA contraction may differ)."""
    path = f"examples/{name}.tile"
    shapes = _shapes(name, shapes)
    from polytile.pipeline import load_program

    prog = load_program(path)
    rng = np.random.default_rng(7)
    exact = [rng.integers(-4, 5, s).astype(np.float32) for s in shapes]
    floats = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    dtypes = [np.float32] * len(shapes)
    plain = compile_cuda(prog, shapes, dtypes, emulate=True, threads=64, max_grid=2, shared=False)

    def run(k, arrays):
        out = k(*arrays)
        return out if isinstance(out, tuple) else (out,)

    want_exact, want_float = run(plain, exact), run(plain, floats)
    scop, sched, lim, maps = _spec(path, shapes, threads=64, max_grid=2)
    tried = 0
    for m in maps:
        ext = reduction_extents(scop, sched, m)
        if not ext:
            continue
        for steps in step_candidates(ext)[:4]:
            k = compile_cuda(prog, shapes, dtypes, emulate=True, threads=64, max_grid=2, steps=steps)
            if not any(x.shared is not None for x in k.mappings):
                continue
            for g, w in zip(run(k, exact), want_exact):
                np.testing.assert_array_equal(g, w)
            for g, w in zip(run(k, floats), want_float):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
            tried += 1
    assert tried >= 1


def test_host_loop_kernels_pay_a_launch_per_iteration():
    """jacobi-1d's sweeps run once per t: the estimate counts T launches and the work of all of them once."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_cuda import _jacobi1d
    from polytile.targets.cuda import compile_scop_cuda

    T, N = 10, 100000
    k = compile_scop_cuda(_jacobi1d(T=T, N=N), emulate=True)
    for m, e in zip(k.mappings, k.estimates):
        assert e.launches == T and e.time_s >= T * gpucost.LAUNCH_S
        flops_per_instance = 2 if m.statements == ("S",) else 0  # S adds three loads (two adds), U copies
        assert e.flops == flops_per_instance * T * (N - 2)
