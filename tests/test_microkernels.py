"""The register micro-kernel chosen per hardware descriptor (issue 14): its shape follows the descriptor's
vector width, and the kernel is right on odd shapes (partial register blocks and tiles at every edge)
for every element type the register tiles hold, against the numpy oracle."""
from __future__ import annotations

import re

import numpy as np
import pytest

import polytile
from polytile import autotile, hardware
from helpers_inputs import small_int_inputs

DESCRIPTORS = ["x86-avx2", "x86-avx512", "host"]
DTYPES = ["float32", "float64", "int32", "int64"]
PROGRAMS = {
    # (program, dims): sizes that are not multiples of any block, larger than one tile
    "matmul": ("examples/matmul.tile", "M=37,N=53,K=29"),
    "conv2d": ("examples/conv2d.tile", "N=1,H=13,W=21,CI=19,KH=3,KW=3,CO=35"),
    "batched": ("examples/batched_matmul.tile", "NB=3,M=19,N=41,K=17"),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_register_block_follows_the_descriptor(name):
    path, dims = PROGRAMS[name]
    blocks = {}
    for hw_name in ("x86-avx2", "x86-avx512"):
        hw = hardware.load(hw_name)
        _, chosen = autotile.autotile(polytile.schedule(path, dims=dims), hw)
        assert chosen and chosen[0].regtile, (hw_name, chosen)
        cfg = chosen[0]
        assert cfg.lanes == hw.vector_lanes("float32") and cfg.nr % cfg.lanes == 0
        # mr x nr/lanes accumulators plus operands fit the descriptor's vector registers
        assert cfg.mr * (cfg.nr // cfg.lanes) + cfg.nr // cfg.lanes + 1 <= hw.vector_registers
        blocks[hw_name] = (cfg.mr, cfg.nr, cfg.lanes)
    assert blocks["x86-avx2"][2] == 8 and blocks["x86-avx512"][2] == 16


@pytest.mark.parametrize("hw_name", DESCRIPTORS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_micro_kernels_match_the_oracle_on_odd_shapes(name, dtype, hw_name):
    path, dims = PROGRAMS[name]
    arrays = small_int_inputs(path, dims, dtype)
    k = polytile.compile(path, hardware=hw_name)
    got = k(*arrays)
    want = polytile.reference(path, *arrays)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert "regtile" in k.specialize(*arrays).schedule.describe()


def _prefetch_guards(source: str, array: str):
    """The condition of the ``if`` that encloses each prefetch of ``array`` (the nearest one above it)."""
    import re
    lines, out = source.splitlines(), []
    for n, line in enumerate(lines):
        if f"__builtin_prefetch(&{array}[" in line:
            up = next(x for x in reversed(lines[:n + 1]) if x.strip().startswith("if ("))
            out.append(re.match(r"\s*if \((.*)\)\s*(\{.*)?$", up).group(1))
    return out


@pytest.mark.parametrize("m", [64, 100, 131])
def test_next_block_prefetch_stays_inside_the_output(m):
    """The register tile prefetches the accumulator rows of the next row block (issue 14: SGEMM's
    C tiles came from memory at every kc step); the address is formed only when those rows exist.
    Evaluate the emitted guard for every block start: true exactly when rows i0+MR .. i0+2MR-1 < M."""
    import re
    src = polytile.compile("examples/matmul.tile", hardware="x86-avx512").source(shapes=[(m, 300), (300, 256)])
    guards = _prefetch_guards(src, "C")
    assert guards, "no guarded prefetch of the output block"
    rows = sorted({int(x) for x in re.findall(r"\(pt_i0 \+ (\d+)\)", guards[0])})
    mr = rows[0]
    assert rows == [mr, 2 * mr - 1], guards[0]
    cond = guards[0].replace("&&", " and ")
    for i0 in range(0, m, mr):
        assert eval(cond, {"pt_i0": i0}) == (i0 + 2 * mr - 1 < m), (i0, cond)


@pytest.mark.parametrize("m", [500, 1030])
def test_transposing_pack_prefetches_rows_inside_the_array(m):
    """A pack of A[i][k] along i copies short rows: it prefetches the row one block ahead, guarded
    by the array's row count (no address past the array is formed)."""
    src = polytile.compile("examples/matmul.tile", hardware="x86-avx512").source(shapes=[(m, 512), (512, 512)])
    guards = _prefetch_guards(src, "A")
    assert guards and all(g.endswith(f"< {m}") for g in guards), guards


# -- edge blocks: partial register blocks run the micro-kernel (codegen/microkernel._edge_block) --------

#: (M, N, K) and tile sizes that leave partial blocks at every edge: rows left over inside every row
#: tile (mc not a multiple of mr) and at the end, columns left over inside every column tile and at the end.
EDGE_CASES = [
    ((29, 45, 13), dict(mc=12, mr=5, nc=40, kc=8)),     # 12 = 5+5+2 rows; 45 = 40 + 5 columns
    ((9, 37, 7), dict(mc=9, mr=4, nc=37, kc=7)),        # 9 = 4+4+1 rows; 37 columns: 16+16+5
    ((64, 20, 16), dict(mc=64, mr=6, nc=20, kc=16)),    # 64 = 10*6 + 4 rows; 20 columns in one tile
]


def _edge_kernel(shape, sizes, dtype, target):
    M, N, K = shape
    hw = hardware.load("x86-avx2")
    lanes = hw.vector_lanes(dtype)
    s = polytile.schedule("examples/matmul.tile", dims=f"M={M},N={N},K={K}")
    r = autotile.roles(s, "S0")
    cfg = autotile.TileConfig(r.stmt, r.i, r.j, r.k, sizes["mc"], sizes["nc"], sizes["kc"], sizes["mr"],
                              2 * lanes, lanes, "jki", f"{r.i}_t")
    return polytile.compile("examples/matmul.tile", schedule=autotile.apply(s, cfg), target=target)


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(EDGE_CASES)))
def test_edge_blocks_match_the_oracle(case, dtype, target):
    """Partial blocks -- rows repeated past the edge, columns shifted left to end at it -- give
    exactly numpy's result (small integers: exact in every dtype), on both code generators."""
    shape, sizes = EDGE_CASES[case]
    M, N, K = shape
    rng = np.random.default_rng(case)
    A = rng.integers(-3, 4, size=(M, K)).astype(dtype)
    B = rng.integers(-3, 4, size=(K, N)).astype(dtype)
    k = _edge_kernel(shape, sizes, dtype, target)
    np.testing.assert_array_equal(k(A, B), A @ B)
    if target == "openmp":
        assert "pt_et" in k.source(A, B), "no edge block in the generated C"


def test_the_llvm_target_emits_edge_blocks(monkeypatch, tmp_path):
    """The llvm register tile takes the edge path (the C target's source shows it; here the emitter is
    watched, with a cache of its own so that the kernel is generated here)."""
    from polytile import config
    from polytile.codegen import llvm_tile

    calls = []
    real = llvm_tile._edge_cells
    monkeypatch.setattr(llvm_tile, "_edge_cells", lambda *a, **kw: (calls.append(kw["load"]), real(*a, **kw))[1])
    shape, sizes = (31, 45, 13), EDGE_CASES[0][1]  # a shape no other test compiles (nor caches in memory)
    A = np.ones((shape[0], shape[2]), np.float32)
    B = np.ones((shape[2], shape[1]), np.float32)
    with config.override(cache_dir=tmp_path):
        k = _edge_kernel(shape, sizes, "float32", "llvm")
        np.testing.assert_array_equal(k(A, B), A @ B)
    assert True in calls and False in calls


def test_column_vectors_stay_in_registers():
    """Every column vector a register tile loads is wrapped in PT_IN_REGISTER (GCC otherwise folds the
    load into each row's multiply-add), and the macro is a no-op where the build's ISA lacks vectors
    that wide: an AVX-512 descriptor built without -march=native still compiles and is right."""
    path, dims = PROGRAMS["matmul"]
    arrays = small_int_inputs(path, dims, "float32")
    k = polytile.compile(path, hardware="x86-avx512")
    src = k.source(*arrays)
    assert "#define PT_IN_REGISTER(x) __asm__" in src and "defined(__AVX512F__)" in src
    loads = [ln for ln in src.splitlines() if "= *(pt_vfloat32x16 *)&" in ln and ln.strip().startswith("pt_vfloat32x16 b")]
    assert loads and all("PT_IN_REGISTER(" in ln for ln in loads)
    plain = polytile.compile(path, hardware="x86-avx512", cflags=("-O2", "-fopenmp", "-fPIC", "-shared"))
    np.testing.assert_array_equal(plain(*arrays), polytile.reference(path, *arrays))


def test_no_edge_block_where_isl_proves_every_block_full():
    """Tiles that divide the extents give block loops of exactly MR and NR iterations (no min in
    their bounds): the edge block would be dead code the compilers still read, so it is left out;
    where a block can be partial it is there."""
    sizes = dict(mc=64, mr=8, nc=64, kc=32)
    for target in ("openmp", "llvm"):
        for (M, N, K), partial in (((128, 128, 64), False), ((124, 128, 64), True)):
            k = _edge_kernel((M, N, K), sizes, "float32", target)
            A, B = np.ones((M, K), np.float32), np.ones((K, N), np.float32)
            np.testing.assert_array_equal(k(A, B), A @ B)
            if target == "openmp":
                src = k.source(A, B)
                assert "acc_0_0" in src and ("pt_et" in src) == partial, (M, N, K)


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mr, nv", [(2, 8), (3, 6), (4, 6)])
def test_wide_register_blocks_match_the_oracle(mr, nv, dtype, target):
    """Blocks six and eight vectors wide (autotile's widest, e.g. 2 x 128 floats on AVX-512), with
    partial blocks in both directions, give exactly numpy's result on both code generators."""
    lanes = hardware.load("x86-avx512").vector_lanes(dtype)
    nr = nv * lanes
    M, N, K = 3 * mr + 1, 2 * nr + lanes + 3, 11
    s = polytile.schedule("examples/matmul.tile", dims=f"M={M},N={N},K={K}")
    r = autotile.roles(s, "S0")
    cfg = autotile.TileConfig(r.stmt, r.i, r.j, r.k, 2 * mr, nr, 8, mr, nr, lanes, "jki", f"{r.j}_t")
    k = polytile.compile("examples/matmul.tile", schedule=autotile.apply(s, cfg), target=target)
    rng = np.random.default_rng(nv)
    A = rng.integers(-3, 4, size=(M, K)).astype(dtype)
    B = rng.integers(-3, 4, size=(K, N)).astype(dtype)
    np.testing.assert_array_equal(k(A, B), A @ B)


NARROW = {
    # (program, dims, dtype): fewer columns than one full-width vector of x86-avx512
    "matmul N=8": ("examples/matmul.tile", "M=37,N=8,K=29", "float32"),
    "matmul N=12": ("examples/matmul.tile", "M=40,N=12,K=33", "float32"),
    "batched 8x8": ("examples/batched_matmul.tile", "NB=9,M=8,N=8,K=19", "float32"),
    "conv CO=8": ("examples/conv2d.tile", "N=1,H=13,W=21,CI=19,KH=3,KW=3,CO=8", "float32"),
    "matmul float64 N=4": ("examples/matmul.tile", "M=37,N=4,K=29", "float64"),
    # under 32 bytes of columns: 16- and 8-byte vectors, with a reduction of at least NARROW_REDUCTION steps
    "matmul N=2": ("examples/matmul.tile", "M=37,N=2,K=40", "float32"),
    "matmul N=3": ("examples/matmul.tile", "M=29,N=3,K=35", "float32"),
    "matmul N=6": ("examples/matmul.tile", "M=43,N=6,K=33", "float32"),
    "matmul float64 N=3": ("examples/matmul.tile", "M=37,N=3,K=41", "float64"),
}


@pytest.mark.parametrize("case", sorted(NARROW))
def test_fewer_columns_than_a_vector_get_a_narrower_register_block(case):
    """On 16 float lanes, 8 columns once left the plain nest (a batch of 8x64 @ 64x8 products at 22
    GFLOP/s); a vector of half the width is still one register.  Under 32 bytes only where no
    32-byte vector fits the columns, and every narrow block has just the accumulators that hide the
    multiply-add latency (1024^2 @ 1024x4: 4 rows 0.124 ms, 8 rows 0.077, 14 rows 0.141)."""
    path, dims, dtype = NARROW[case]
    hw = hardware.load("x86-avx512")
    s = polytile.schedule(path, dims=dims, dtypes=dtype)
    _, chosen = autotile.autotile(s, hw)
    assert chosen and chosen[0].regtile, chosen
    cfg = chosen[0]
    item = np.dtype(dtype).itemsize
    cols = autotile.roles(s, "S0").extents[cfg.j]
    assert cfg.nr % cfg.lanes == 0 and (cfg.lanes <= cols or cfg.lanes < 2 * cols)
    assert item * cfg.lanes >= 32 or item * cols < 32
    if cfg.nr > cols:
        # padded columns: less than one vector of padding, the column operand packed by the block
        assert cfg.nr - cols < cfg.lanes
        assert any(p.block == cfg.nr and p.dim == 1 for p in autotile.pack_plan(s, cfg)), cfg
    nv = cfg.nr // cfg.lanes
    assert cfg.mr * nv + nv + 1 <= hw.vector_registers
    chains = 4 * hw.fma_units_per_core  # cost.constants.FMA_LATENCY x FMA units
    assert cfg.mr * nv >= chains > (cfg.mr - 1) * nv, cfg


def test_vectors_under_32_bytes_only_for_few_columns_and_a_long_reduction():
    # 4 float columns over 4 steps: 16-byte blocks ran slower than the plain nest (a batch of 4x4 products)
    hw = hardware.load("x86-avx512")
    short = polytile.schedule("examples/batched_matmul.tile", dims="NB=64,M=4,N=4,K=4")
    assert all(c.lanes * 4 >= 32 for c in autotile.candidates(short, "S0", hw))
    # the same columns over 64 steps: 4- and 2-lane blocks (1024^2 @ 1024x4: 0.35 ms plain, 0.08 blocked)
    long = polytile.schedule("examples/batched_matmul.tile", dims="NB=64,M=8,N=4,K=64")
    assert {c.lanes for c in autotile.candidates(long, "S0", hw)} == {4, 2}
    # 12 columns (48 bytes) have a 32-byte vector: nothing narrower; and one 16-lane vector, padded
    wide = polytile.schedule("examples/matmul.tile", dims="M=64,N=12,K=64")
    assert {c.lanes for c in autotile.candidates(wide, "S0", hw)} == {8, 16}


PADDED = {
    # (program, dims): columns that cannot shift left; every block reads zero-padded packed slivers
    "matmul N=3": ("examples/matmul.tile", "M=29,N=3,K=35"),
    "matmul N=12": ("examples/matmul.tile", "M=37,N=12,K=40"),
    "matmul N=53": ("examples/matmul.tile", "M=37,N=53,K=41"),
    "A @ B.T N=10": ("function (A[M, K], B[N, K]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[j, k]); }", "M=45,N=10,K=50"),
    "conv CO=6": ("examples/conv2d.tile", "N=2,H=9,W=11,CI=5,KH=3,KW=3,CO=6"),
    "batched N=5": ("examples/batched_matmul.tile", "NB=3,M=19,N=5,K=40"),
}


@pytest.mark.parametrize("case", sorted(PADDED))
def test_few_columns_run_one_padded_block(case):
    """Columns fewer than a block's, and no room to shift it left: one block reads the column operand's
    packed slivers, zero past the array (1024^2 @ 1024x12: two 8-lane blocks 0.16 ms, one padded
    16-lane block 0.09).  The generated C runs the padded branch, and every copy into the packed
    buffer writes zeros past the array, in both the inside and the clipped copy (no memset of the whole
    buffer by the calling thread: SGEMM 100^3 12 us of 34)."""
    path, dims = PADDED[case]
    hw = hardware.load("x86-avx512")
    s = polytile.schedule(path, dims=dims)
    _, chosen = autotile.autotile(s, hw)
    cfg = chosen[0]
    cols = autotile.roles(s, cfg.stmt).extents[cfg.j]
    assert cfg.nr > cols and cfg.nr - cols < cfg.lanes < 2 * cols, cfg
    k = polytile.compile(path, hardware="x86-avx512")
    arrays = small_int_inputs(path, dims, "float32")
    text = k.source(*arrays)
    assert "!pt_eshift" in text and "__builtin_memset(pt_pkbuf" not in text
    assert len(re.findall(r"pt_pk\d+\[[^\]]+\] = 0;", text)) >= 2, text


@pytest.mark.parametrize("hw", ["x86-avx512", "x86-avx2"])
@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(PADDED))
def test_padded_blocks_match_the_oracle(case, dtype, target, hw):
    path, dims = PADDED[case]
    arrays = small_int_inputs(path, dims, dtype)
    k = polytile.compile(path, hardware=hw, target=target)
    np.testing.assert_array_equal(k(*arrays), polytile.reference(path, *arrays))


def test_padding_needs_packable_column_operands():
    from polytile.cost.nest import pads_columns

    def st(src, dims):
        return polytile.schedule(src, dims=dims).scop.statement("S0")
    plain = st("examples/matmul.tile", "M=8,N=3,K=8")
    assert pads_columns(plain, "i", "j")
    # an operand moving with rows and columns (X[i, j]) would be read past the columns
    both = st("function (X[M, N], B[K, N]) -> (C) { C[i, j : M, N] = +(X[i, j] * B[k, j]); }", "M=8,N=3,K=8")
    assert not pads_columns(both, "i", "j")
    # a one-axis column operand is never packed
    vec = st("function (A[M, K], V[N]) -> (C) { C[i, j : M, N] = +(A[i, k] * V[j]); }", "M=8,N=3,K=8")
    assert not pads_columns(vec, "i", "j")


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(NARROW))
def test_narrow_register_blocks_match_the_oracle(case, dtype, target):
    path, dims, _ = NARROW[case]
    arrays = small_int_inputs(path, dims, dtype)
    k = polytile.compile(path, hardware="x86-avx512", target=target)
    np.testing.assert_array_equal(k(*arrays), polytile.reference(path, *arrays))


# PlaidML's op library writes channels-first convolutions (NCHW input, HWIO filter): the register
# block's columns are then an image axis, which the reduction's kernel offset also moves (x1 + k1).
CHANNELS_FIRST = {
    "nchw": ("""function (I[N, CI, L0, L1], K[LK0, LK1, CI, CO]) -> (O) {
        O[n, co, x0, x1: N, CO, L0 - LK0 + 1, L1 - LK1 + 1] = +(I[n, ci, x0 + k0, x1 + k1] * K[k0, k1, ci, co]);
    }""", [(2, 6, 7, 45), (3, 3, 6, 20)]),
    "ncl": ("""function (I[N, CI, L0], K[LK0, CI, CO]) -> (O) {
        O[n, co, x0: N, CO, L0 - LK0 + 1] = +(I[n, ci, x0 + k0] * K[k0, ci, co]);
    }""", [(3, 5, 70), (4, 5, 11)]),
}


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("name", sorted(CHANNELS_FIRST))
def test_channels_first_convolutions_run_their_edge_blocks(name, dtype, target):
    """An edge block's shifted columns are checked before the reduction loops bind their iterators:
    the check once named ``k1`` there, and the kernel did not compile (C) or raised (llvm)."""
    src, shapes = CHANNELS_FIRST[name]
    rng = np.random.default_rng(5)
    args = [rng.integers(-3, 4, size=s).astype(dtype) for s in shapes]
    k = polytile.compile(src, target=target)
    np.testing.assert_array_equal(k(*args), polytile.reference(src, *args))
    if target == "openmp":
        assert "pt_et" in k.source(*args), "no edge block in the generated C"


def test_channels_first_register_blocks_take_channels_as_rows():
    """Rows over the output channels reuse each image vector across the block (the filter is a
    broadcast scalar per row); rows over an image axis load a vector per accumulator.  NCHW 1x64x56x56
    3x3 -> 64 on the Zen 5 VM: 1.27 -> 0.60 ms (exploratory)."""
    src = CHANNELS_FIRST["nchw"][0]
    s = polytile.schedule(src, shapes={"I": (1, 8, 30, 40), "K": (3, 3, 8, 16)})  # 28 rows of the image, 16 channels
    r = autotile.roles(s, "S0")
    assert (r.i, r.j) == ("co", "x1"), r


# PlaidML 0.7.0's op library spells the same convolutions with unit factors and a padding constant
# (tests/conformance/plaidml_0.7.0/conv.jsonl), "same" padding tying each kernel offset to its image axis.
PLAIDML_NCHW = """function (I[N, CI, L0, L1], K[LK0, LK1, CI, CO]) -> (O) {
    Pad0 = %s;
    Pad1 = %s;
    O[n, co, x0, x1: N, CO, %s, %s] = +(I[n, ci, %s*x0 + 1*k0 - Pad0, %s*x1 + 1*k1 - Pad1]*K[k0, k1, ci, co]);
}"""
PLAIDML_FORMS = {
    "valid": PLAIDML_NCHW % ("0", "0", "(L0 - 3 + 1) / 1", "(L1 - 3 + 1) / 1", 1, 1),
    "same": PLAIDML_NCHW % ("(max(0, ((L0 + 1 - 1) / 1 - 1) * 1 + 3 - L0)) / 2",
                            "(max(0, ((L1 + 1 - 1) / 1 - 1) * 1 + 3 - L1)) / 2", "(L0 + 1 - 1) / 1", "(L1 + 1 - 1) / 1",
                            1, 1),
    # stride 2: the image's columns 2*x1 + k1 are gathered lane by lane (microkernel.column_axis, stepped)
    "strided": PLAIDML_NCHW % ("0", "0", "(L0 - 3 + 2) / 2", "(L1 - 3 + 2) / 2", 2, 2),
}


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("form", sorted(PLAIDML_FORMS))
def test_plaidml_spelled_convolutions_get_register_blocks(form, target):
    """``1*x1 + 1*k1 - Pad1`` lowers to ``x1 + k1 - 1`` (or ``x1 + k1``), a unit stride along the
    block's columns: before, the register tile fell back to the plain nest (NCHW 1x64x56x56 3x3 -> 64:
    4.5 ms valid, 4.8 ms same; with it 0.59 and 1.38 on the Zen 5 VM, exploratory).  With stride 2 the
    index is 2*x1 + k1, a register block with gathered image vectors (3.0 -> 0.48 ms)."""
    src = PLAIDML_FORMS[form]
    rng = np.random.default_rng(11)
    I = rng.integers(-3, 4, size=(2, 9, 12, 37)).astype(np.float32)
    K = rng.integers(-3, 4, size=(3, 3, 9, 20)).astype(np.float32)
    k = polytile.compile(src, target=target)
    np.testing.assert_array_equal(k(I, K), polytile.reference(src, I, K))
    if target == "openmp":
        text = k.source(I, K)
        assert "acc_0_0" in text and "regtile not applied" not in text


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("form", ["same", "strided"])
def test_edge_blocks_that_cannot_shift_left_keep_their_first_column(form, target):
    """A "same" convolution's block along ``x1 + k1 - 1`` at ``k1 = 0`` cannot shift left (it would
    read column -1); it keeps its first column when the lanes past its last stay inside the image.
    Before, that block ran the plain nest, 16x slower per point: NCHW 1x128x28x28 3x3 -> 128 1.37 ->
    0.80 ms, 14x14x256 3.6 -> 1.7 ms on the Zen 5 VM (exploratory).  Every width up to two blocks and a
    half, so the kept block's last lane lands inside, on and past the image's last column."""
    src = PLAIDML_FORMS[form]
    rng = np.random.default_rng(12)
    k = polytile.compile(src, target=target)
    K = rng.integers(-3, 4, size=(3, 3, 5, 11)).astype(np.float32)
    for width in list(range(1, 21)) + [33, 37]:
        I = rng.integers(-3, 4, size=(1, 5, 4, width)).astype(np.float32)
        if form == "strided" and width < 3:
            continue
        np.testing.assert_array_equal(k(I, K), polytile.reference(src, I, K), err_msg=f"width {width}")
    if target == "openmp" and form == "same":
        I = rng.integers(-3, 4, size=(1, 5, 4, 14)).astype(np.float32)
        kept = [line for line in k.source(I, K).splitlines() if "const long pt_j0 =" in line and "?" in line]
        assert kept, "no edge block keeps its first column"


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("form", ["same", "valid", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_small_channels_first_images_vectorise_the_output_channels(form, dtype, target):
    """Below 16 output columns the register block's columns are the output channels, the filter's
    last axis (autotile.roles._columns), and each lane is added to its own cell of the NCHW output
    (microkernel.Plan.out_strided): NCHW 3x3 "same" 7x7x512 0.33x -> 1.1x, 14x14x256 0.67x -> 1.9x of
    numpy's im2col on the Zen 5 VM (exploratory).  Every width and height up to 15, channel counts off
    the block, exact."""
    src = PLAIDML_FORMS[form]
    rng = np.random.default_rng(13)
    k = polytile.compile(src, target=target)
    for h, w, ci, co in [(7, 7, 5, 40), (1, 3, 3, 33), (15, 14, 2, 71), (4, 9, 1, 32), (3, 15, 4, 96)]:
        if form != "same" and min(h, w) < 3:
            continue
        I = rng.integers(-3, 4, size=(2, ci, h, w)).astype(dtype)
        K = rng.integers(-3, 4, size=(3, 3, ci, co)).astype(dtype)
        np.testing.assert_array_equal(k(I, K), polytile.reference(src, I, K), err_msg=f"{h}x{w} {ci}->{co}")
    if target == "openmp":
        I = rng.integers(-3, 4, size=(1, 8, 7, 7)).astype(dtype)
        K = rng.integers(-3, 4, size=(3, 3, 8, 64)).astype(dtype)
        assert "acc_0_0[0]" in k.source(I, K), "no lane-by-lane store of the output channels"


def test_roles_vectorise_output_channels_only_below_a_vector_of_columns():
    src = CHANNELS_FIRST["nchw"][0]
    small = polytile.schedule(src, shapes={"I": (1, 8, 9, 9), "K": (3, 3, 8, 64)})  # 7x7 outputs, 64 channels
    r = autotile.roles(small, "S0")
    assert (r.i, r.j) == ("x1", "co"), r
    wide = polytile.schedule(src, shapes={"I": (1, 8, 30, 40), "K": (3, 3, 8, 64)})
    assert (autotile.roles(wide, "S0").j) == "x1"
    few = polytile.schedule(src, shapes={"I": (1, 8, 9, 9), "K": (3, 3, 8, 16)})  # 16 channels: not worth it
    assert autotile.roles(few, "S0").j == "x1"
    # "same" padding ties the columns to k1 (two of three k1 run edge blocks): channels up to 55 columns
    same = PLAIDML_FORMS["same"]
    assert autotile.roles(polytile.schedule(same, shapes={"I": (1, 8, 40, 40), "K": (3, 3, 8, 64)}), "S2").j == "co"
    assert autotile.roles(polytile.schedule(same, shapes={"I": (1, 8, 56, 56), "K": (3, 3, 8, 64)}), "S2").j == "x1"


def test_unpacked_rows_are_read_through_one_pointer():
    """A block's unpacked row operand is read as one pointer to its row 0 plus constant offsets (the
    image's rows are 128 floats apart), not as MR index expressions: gcc kept those as MR induction
    variables and reloaded them from the stack every step (conv2d 1x28x28x128: 0.866 -> 0.812 ms).
    The rows of an edge block, which repeat the last one, keep their own index expressions."""
    from polytile.poly import body as B
    from polytile.codegen.block_operands import row_stride
    path, dims = "examples/conv2d.tile", "N=1,H=28,W=28,CI=128,KH=3,KW=3,CO=128"
    k = polytile.compile(path, hardware="x86-avx512")
    arrays = small_int_inputs(path, dims, "float32")
    text = k.source(*arrays)
    assert re.search(r"const float \*(a\d+)_p = &I\[n\]\[\(y \+ ky\)\]\[\(\(pt_i0 \+ 0\) \+ kx\)\]\[ci\];", text), text
    assert re.search(r"const float a\d+_3 = a\d+_p\[384\];", text)
    np.testing.assert_array_equal(k(*arrays), polytile.reference(path, *arrays))

    class Arr:
        shape = (4, 64, 32)
    it = lambda n: B.Iter(n)  # noqa: E731
    two_i = B.Bin("+", B.Bin("*", B.Const(2, "int64"), it("i"), "int64"), B.Const(1, "int64"), "int64")
    assert row_stride(B.Load("A", (it("b"), two_i, it("k")), "float32"), "i", {"A": Arr}) == 64
    assert row_stride(B.Load("A", (it("i"), it("i"), it("k")), "float32"), "i", {"A": Arr}) == 64 * 32 + 32
    assert row_stride(B.Load("A", (it("b"), it("k"), it("j")), "float32"), "i", {"A": Arr}) is None
    assert row_stride(B.Load("L", (it("i"),), "float32"), "i", {}) is None
