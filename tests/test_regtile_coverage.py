"""Register tiles the code generator used to drop.  Column operands whose column axis is not their last (``B[j][k]`` of ``A @ B.T``, an OIHW filter):
the register tile reads them from a packed sliver, where they are unit-stride, or gathers each
vector lane by lane where no sliver serves (codegen/microkernel.Plan.strided).  Before, such a
load made the micro-kernel fall back to the generic nest: ``A @ B.T`` at 1024^3 took 839 ms
against 5 ms for ``A @ B``.  Exact on small integers, both code generators, every register dtype."""
from __future__ import annotations

import numpy as np
import pytest

import polytile
from polytile import autotile, hardware

DTYPES = ["float32", "float64", "int32", "int64"]
PROGRAMS = {
    "abt": ("function (A[M, K], B[N, K]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[j, k]); }",
            "M=37,N=53,K=29", [(37, 29), (53, 29)], lambda A, B: A @ B.T),
    "atbt": ("function (A[K, M], B[N, K]) -> (C) { C[i, j : M, N] = +(A[k, i] * B[j, k]); }",
             "M=37,N=53,K=29", [(29, 37), (53, 29)], lambda A, B: A.T @ B.T),
    "conv_oihw": ("function (I[N, H, W, CI], F[CO, KH, KW, CI]) -> (O) {\n"
                  "  O[n, y, x, co : N, H - KH + 1, W - KW + 1, CO] = +(I[n, y + ky, x + kx, ci] * F[co, ky, kx, ci]);\n}",
                  "N=1,H=13,W=21,CI=19,KH=3,KW=3,CO=35", [(1, 13, 21, 19), (35, 3, 3, 19)], None),
}


def _inputs(name, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-3, 4, size=s).astype(dtype) for s in PROGRAMS[name][2]]


def _write(tmp_path, name):
    path = tmp_path / f"{name}.tile"
    path.write_text(PROGRAMS[name][0])
    return str(path)


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_default_schedule_runs_the_register_tile(tmp_path, name, dtype, target):
    path = _write(tmp_path, name)
    arrays = _inputs(name, dtype)
    k = polytile.compile(path, hardware="x86-avx512", target=target)
    got = k(*arrays)
    np.testing.assert_array_equal(got, polytile.reference(path, *arrays))
    if PROGRAMS[name][3] is not None:
        np.testing.assert_array_equal(got, PROGRAMS[name][3](*arrays))
    src = k.source(*arrays)
    assert "not applied" not in src, [ln for ln in src.splitlines() if "not applied" in ln]
    if target == "openmp":
        assert "acc_0_0" in src


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pack", [True, False])
def test_unpacked_and_edge_blocks_gather_the_strided_operand(tmp_path, pack, dtype, target):
    """Tile sizes that leave partial blocks at every edge, with and without the packs: the edge
    blocks and the unpacked blocks gather B[j][k] lane by lane."""
    path = _write(tmp_path, "abt")
    M, N, K = 29, 45, 13
    hw = hardware.load("x86-avx2")
    lanes = hw.vector_lanes(dtype)
    s = polytile.schedule(path, dims=f"M={M},N={N},K={K}")
    r = autotile.roles(s, "S0")
    cfg = autotile.TileConfig(r.stmt, r.i, r.j, r.k, 12, 40, 8, 5, 2 * lanes, lanes, "jki", f"{r.i}_t", pack=pack)
    k = polytile.compile(path, schedule=autotile.apply(s, cfg), target=target)
    rng = np.random.default_rng(7)
    A = rng.integers(-3, 4, size=(M, K)).astype(dtype)
    B = rng.integers(-3, 4, size=(N, K)).astype(dtype)
    np.testing.assert_array_equal(k(A, B), A @ B.T)
    src = k.source(A, B)
    assert "not applied" not in src
    if target == "openmp":
        gathered = [ln for ln in src.splitlines() if " = (pt_v" in ln and "{B[" in ln]
        assert gathered, "no gathered column vector in the generated C"
        assert ("pt_pk" in src) == pack


def _checked_matmul(shape, dtype, target, seed):
    """The default AVX-512 kernel of ``A @ B`` at ``(M, N, K)``: exact on small integers, with no register
    tile dropped by the code generator; ``(kernel, A, B)``."""
    M, N, K = shape
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, size=(M, K)).astype(dtype)
    B = rng.integers(-3, 4, size=(K, N)).astype(dtype)
    k = polytile.compile("examples/matmul.tile", hardware="x86-avx512", target=target)
    np.testing.assert_array_equal(k(A, B), A @ B)
    src = k.source(A, B)
    assert "not applied" not in src, [ln for ln in src.splitlines() if "not applied" in ln]
    return k, A, B


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float64", "int32"])
@pytest.mark.parametrize("shape", [(37, 53, 29), (1, 64, 64), (1, 300, 77), (64, 1, 64)])
def test_blocks_of_one_row_run_the_register_tile(shape, dtype, target):
    """Row tiles of one row (mr = 1; a single-row matrix): isl leaves the block's row loop out and the
    statement's row is the tile loop's iterator (or 0).  The register tile still applies (it fell back to
    the generic nest before, e.g. float64 37 x 53 x 29 on AVX-512)."""
    _checked_matmul(shape, dtype, target, seed=shape[0])


SAME = "examples/conv2d_same.tile"


def test_padded_convolution_runs_its_tied_reduction_around_the_blocks():
    """A "same" convolution skips the reads outside the image: its domain ties kx to the block rows x
    (0 <= x + kx - 1 < W).  That reduction loop runs outside the register blocks, where the rows a block
    covers may depend on it; a valid convolution keeps every reduction loop inside."""
    s = polytile.schedule(SAME, dims="N=1,H=56,W=56,CI=64,CO=64")
    r = autotile.roles(s, "S0")
    assert (r.i, r.j, r.k, r.reductions, r.outside) == ("x", "co", "ci", ("ky", "kx"), ("kx",))
    cfg = autotile.TileConfig(r.stmt, r.i, r.j, r.k, 28, 64, 32, 4, 32, 16, "jki", "co_t")
    names = autotile.blocked_order(r, cfg)
    assert names.index("kx") < names.index("co_t1") < names.index("x_t1") < names.index("ky") < names.index("ci")
    valid = polytile.schedule("examples/conv2d.tile", dims="N=1,H=28,W=28,CI=16,KH=3,KW=3,CO=32")
    assert autotile.roles(valid, "S0").outside == ()


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("shapes", [[(1, 13, 21, 19), (3, 3, 19, 35)], [(2, 5, 1, 3), (3, 3, 3, 7)],
                                    [(1, 9, 40, 8), (3, 3, 8, 48)]])
def test_padded_convolution_runs_the_register_tile(shapes, dtype, target):
    """The default schedule of conv2d_same keeps its register tile (it was dropped: "block bounds depend
    on the reduction loops"; 2.7 ms at 56x56x64x64, now 0.45 ms), exact at odd sizes with edge blocks
    where kx moves the block's first and last row."""
    rng = np.random.default_rng(len(shapes[0]))
    arrays = [rng.integers(-3, 4, size=s).astype(dtype) for s in shapes]
    k = polytile.compile(SAME, hardware="x86-avx512", target=target)
    np.testing.assert_array_equal(k(*arrays), polytile.reference(SAME, *arrays))
    src = k.source(*arrays)
    assert "not applied" not in src, [ln for ln in src.splitlines() if "not applied" in ln]
    if target == "openmp" and shapes[0][2] >= 16:
        assert "acc_0_0" in src


GAP = "function (I[N, H, W, C]) -> (O) { S[n, c : N, C] = +(I[n, y, x, c]); O = S / (H * W); }"


@pytest.mark.parametrize("target", ["openmp", "llvm"])
def test_reductions_without_reuse_are_not_blocked(tmp_path, target):
    """Global average pooling reads every element once: a register block has nothing to reuse and only
    broke the unit-stride stream (0.51 ms at 8x28x28x512 against numpy's 0.24; now 0.08).  It is not
    blocked; vector_inner puts the channel loop innermost.  Exact on small integers."""
    path = tmp_path / "gap.tile"
    path.write_text(GAP)
    s = polytile.schedule(str(path), dims="N=8,H=5,W=7,C=40")
    assert autotile.roles(s, "S0") is None
    k = polytile.compile(str(path), target=target)
    I = np.random.default_rng(2).integers(-9, 10, (3, 5, 7, 40)).astype(np.float32)
    np.testing.assert_array_equal(k(I), polytile.reference(str(path), I))
    sched = k.specialize(I).schedule
    assert sched.loop_names("S0")[-1] == "c" and "regtile" not in sched.describe()


def test_of_equal_reduction_loops_the_later_is_the_register_tiles():
    """A first-layer convolution (CI = KH = KW = 3): k is ci, the loop along the arrays' last axis,
    not ky (whose steps stride whole image rows)."""
    s = polytile.schedule("examples/conv2d.tile", dims="N=1,H=30,W=30,CI=3,KH=3,KW=3,CO=64")
    r = autotile.roles(s, "S0")
    assert r.k == "ci" and r.reductions == ("ky", "kx")


@pytest.mark.parametrize("hw_name", ["x86-avx2", "x86-avx512"])
def test_a_packed_transposed_operand_is_modelled_in_its_packed_layout(hw_name):
    """B[j][k] reaches the register tile through a pack in which j is the last axis, so A @ B.T costs
    what A @ B costs and gets the same blocking (its own pick ran 1.2x slower: 5.9 against 4.8 ms at
    1024^3, the model seeing every B vector as a gather)."""
    from polytile.cost import predict_config
    hw = hardware.load(hw_name)
    dims = "M=512,N=512,K=512"
    plain = polytile.schedule("examples/matmul.tile", dims=dims)
    abt = polytile.schedule("examples/matmul_abt.tile", dims=dims)
    _, (mm,) = autotile.autotile(plain, hw)
    _, (tr,) = autotile.autotile(abt, hw)
    assert (tr.mc, tr.nc, tr.kc, tr.mr, tr.nr, tr.order, tr.parallel) == \
        (mm.mc, mm.nc, mm.kc, mm.mr, mm.nr, mm.order, mm.parallel)
    assert predict_config(abt, tr, hw).time_s == pytest.approx(predict_config(plain, mm, hw).time_s, rel=1e-6)
    # unpacked, the gathers stay in the model
    unpacked = autotile.TileConfig(**{**tr.to_json(), "pack": False})
    assert predict_config(abt, unpacked, hw).time_s > 2 * predict_config(abt, tr, hw).time_s


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("shape", [(37, 53, 29), (300, 200, 64), (9, 37, 1)])
def test_one_segment_blocks_zero_their_own_cells(shape, dtype, target):
    """With kc covering all of k and an output larger than the last cache, the output is zeroed block by
    block right before its only reduction segment (autotile.zero_per_block), not in a pass before
    (skinny 4096x64 @ 64x4096: 9.9 -> 8.5 ms, numpy 9.0).  Forced here at small sizes (cache of 0
    bytes): every cell still starts at 0, partial blocks included."""
    M, N, K = shape
    hw = hardware.load("x86-avx512")
    s = polytile.schedule("examples/matmul.tile", dims=f"M={M},N={N},K={K}")
    r = autotile.roles(s, "S0")
    lanes = hw.vector_lanes(dtype)
    cfg = autotile.TileConfig(r.stmt, r.i, r.j, r.k, 16, 4 * lanes, K, 4, 2 * lanes, lanes, "jki", f"{r.j}_t")
    fused = autotile.zero_per_block(autotile.apply(s, cfg), cfg, r, 0)
    assert "fuse_first" in [st.op for st in fused.steps]
    k = polytile.compile("examples/matmul.tile", schedule=fused, target=target)
    rng = np.random.default_rng(K)
    A = rng.integers(-3, 4, size=(M, K)).astype(dtype)
    B = rng.integers(-3, 4, size=(K, N)).astype(dtype)
    np.testing.assert_array_equal(k(A, B), A @ B)


def test_the_default_zeroes_per_block_only_large_one_segment_outputs():
    """A 64 MB output with one segment gets the fused zeroing; an output that fits the cache keeps its
    pass (it never reaches memory, and the fused nest cost 100 ms of a cold llvm build of 256^3), and
    so do several segments."""
    def steps(dims):
        return [st.op for st in polytile.schedule("examples/matmul.tile", dims=dims, hardware="x86-avx512").steps]
    assert "fuse_first" in steps("M=4096,N=4096,K=64")
    assert "regtile" in steps("M=256,N=256,K=256") and "fuse_first" not in steps("M=256,N=256,K=256")
    assert "regtile" in steps("M=512,N=512,K=2048") and "fuse_first" not in steps("M=512,N=512,K=2048")


def _example_params():
    import glob
    from pathlib import Path
    for path in sorted(glob.glob("examples/*.tile")):
        yield pytest.param(Path(path), id=Path(path).stem)


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("path", list(_example_params()))
def test_no_example_schedule_asks_for_what_the_code_generator_drops(path, target):
    """Every example at every one of its dims lines, on both descriptors and two dtypes: the default
    schedule's marks (register tiles, packs, SIMD reductions) are all emitted -- none noted as not
    applied or dropped, and every register tile present in the C.  Three such silent fallbacks to the generic nest were found this way
    (A @ B.T, one-row blocks, padded convolutions), each 10-200x slower than the tile."""
    from numpy_programs import example_cases, input_shapes
    for hw_name in ("x86-avx2", "x86-avx512"):
        k = polytile.compile(str(path), hardware=hw_name, target=target)
        for case in example_cases(path):
            shapes = input_shapes(k.program, case)
            for dtype in ("float32", "int32"):
                spec = k.specialize_shapes(shapes, [dtype] * len(shapes), build=False)
                text = spec.source.text
                notes = [ln.strip() for ln in text.splitlines() if "not applied" in ln or "dropped" in ln]
                assert not notes, (hw_name, case, dtype, notes)
                # A mark can also vanish unnoted, with a loop isl leaves out (a 1x1 filter's ky and kx):
                # every register tile of the schedule is in the C source as a micro-kernel.
                if target == "openmp" and any(m[2] == "regtile" for m in spec.schedule.marks):
                    assert "acc_0_0" in text, (hw_name, case, dtype, sorted(spec.schedule.marks))


BATCHED = "function (A[B, M, K], X[B, K, N]) -> (C) { C[b, i, j : B, M, N] = +(A[b, i, k] * X[b, k, j]); }"


@pytest.mark.parametrize("dims", ["B=128,M=64,K=128,N=64", "B=64,M=32,K=32,N=32", "B=9,M=5,K=7,N=3"])
def test_a_batch_loop_is_never_the_register_blocks_rows(dims):
    # b moves every operand: as the block's rows it reuses nothing (128 x (64x128 @ 128x64) ran at 0.37x
    # of numpy with b as rows, 1.65x with i); i, which X does not move with, is the row loop even when
    # the batch is longer.
    sizes = dict(kv.split("=") for kv in dims.split(","))
    s = polytile.schedule(BATCHED, dims={k: int(v) for k, v in sizes.items()})
    r = autotile.roles(s, "S0")
    assert r is not None and (r.i, r.j, r.k) == ("i", "j", "k") and "b" in r.outer
    rng = np.random.default_rng(1)
    n = {k: int(v) for k, v in sizes.items()}
    A = rng.integers(-3, 4, (n["B"], n["M"], n["K"])).astype(np.float32)
    X = rng.integers(-3, 4, (n["B"], n["K"], n["N"])).astype(np.float32)
    np.testing.assert_array_equal(polytile.compile(BATCHED)(A, X), A @ X)


BATCHED_MATVEC = "function (A[B, M, K], X[B, K]) -> (C) { C[b, i : B, M] = +(A[b, i, k] * X[b, k]); }"


def test_no_register_block_when_no_row_loop_reuses_an_operand():
    # C[b, i] = +(A[b, i, k] * X[b, k]): b moves both operands, so a block would be one row deep with its
    # columns (A's rows) gathered; the cells are summed in SIMD lanes along the unit-stride k instead.
    s = polytile.schedule(BATCHED_MATVEC, dims=dict(B=64, M=256, K=256))
    assert autotile.roles(s, "S0") is None
    rng = np.random.default_rng(2)
    for target in ("openmp", "llvm"):
        A = rng.integers(-3, 4, (5, 37, 29)).astype(np.int32)
        X = rng.integers(-3, 4, (5, 29)).astype(np.int32)
        np.testing.assert_array_equal(polytile.compile(BATCHED_MATVEC, target=target)(A, X),
                                      np.einsum("bik,bk->bi", A, X))


@pytest.mark.parametrize("target", ["openmp", "llvm"])
def test_one_row_products_stream_their_rows_instead_of_a_one_row_block(target):
    # x @ W written as a 1 x K matrix: a block one row deep reuses nothing of W (1 x 1024 @ 1024^2 ran
    # 0.061 ms blocked, 0.025 with the rows in parallel on private copies of the small output).
    s = polytile.schedule("examples/matmul.tile", dims="M=1,K=1024,N=1024")
    assert autotile.roles(s, "S0") is None
    rng = np.random.default_rng(3)
    k = polytile.compile("examples/matmul.tile", target=target)
    for K, N in [(1024, 1024), (37, 53), (300, 40)]:
        A = rng.integers(-3, 4, (1, K)).astype(np.int32)
        W = rng.integers(-3, 4, (K, N)).astype(np.int32)
        np.testing.assert_array_equal(k(A, W), A @ W)
    A = np.ones((1, 1024), np.float32)
    W = np.ones((1024, 1024), np.float32)
    spec = k.specialize(A, W)
    assert "parallel +:C" in spec.schedule.describe()  # the rows, each thread into a private copy
    assert "regtile" not in spec.schedule.describe()


POINTWISE = "examples/conv2d.tile"


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dims", ["N=16,H=14,W=14,CI=128,KH=1,KW=1,CO=128", "N=2,H=5,W=7,CI=19,KH=1,KW=1,CO=35",
                                  "N=1,H=6,W=9,CI=1,KH=3,KW=1,CO=40"])
def test_reduction_loops_of_one_point_keep_the_register_tile(dims, target):
    """A 1x1 filter's ky and kx loops have a single point, so isl's AST has no loop for them: the register
    tile's mark sits on the first reduction loop that has one (it sat on ky and vanished with it: the
    pointwise conv 16x14x14x128 ran the generic nest, 1.0 ms against 0.25 with the tile)."""
    n = {k: int(v) for k, v in (kv.split("=") for kv in dims.split(","))}
    rng = np.random.default_rng(4)
    I = rng.integers(-3, 4, (n["N"], n["H"], n["W"], n["CI"])).astype(np.float32)
    F = rng.integers(-3, 4, (n["KH"], n["KW"], n["CI"], n["CO"])).astype(np.float32)
    k = polytile.compile(POINTWISE, target=target, hardware="x86-avx512")
    np.testing.assert_array_equal(k(I, F), polytile.reference(POINTWISE, I, F))
    if target == "openmp":
        assert "acc_0_0" in k.source(I, F)


def test_the_parallel_loop_splits_evenly_over_the_cores():
    # A 3x3 conv of a 7x7 image: 5 output rows over 2 cores keep one idle a sixth of the time; the
    # output channels' tiles split evenly.
    import dataclasses
    s = polytile.schedule(POINTWISE, dims=dict(N=1, H=7, W=7, CI=512, KH=3, KW=3, CO=512))
    hw = dataclasses.replace(hardware.load("x86-avx512"), cores=2)
    configs = autotile.candidates(s, "S0", hw)
    assert configs and all(c.parallel != "y" for c in configs)
    assert autotile.balance(5, 2) < autotile.BALANCE <= autotile.balance(4, 2)
