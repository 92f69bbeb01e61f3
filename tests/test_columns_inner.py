"""Register blocks with the column blocks innermost (``TileConfig.inner == "ij"``, issue 14): the row
sliver stays in L1, the column panel streams from L2, and the output's blocks follow each other along
its rows.  Exact against numpy on shapes with partial blocks at every edge, for every dtype and both
code generators; chosen by the model for large products only; packed and fused as the nest needs."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polytile
from polytile import autotile, hardware
from polytile.tune.space import _Space

DTYPES = ["float32", "float64", "int32", "int64"]

#: (M, N, K) and sizes leaving partial blocks: rows inside every row tile and at the end, columns
#: inside every column panel and at the end, a reduction segment that does not divide K.
EDGE_CASES = [
    ((61, 75, 41), dict(mc=26, mr=6, nc=40, kc=16)),
    ((37, 100, 9), dict(mc=37, mr=4, nc=64, kc=9)),
]


def _config(s, sizes, lanes, inner="ij", order="ikj"):
    r = autotile.roles(s, "S0")
    return autotile.TileConfig(r.stmt, r.i, r.j, r.k, sizes["mc"], sizes["nc"], sizes["kc"], sizes["mr"],
                               2 * lanes, lanes, order, f"{r.i}_t", inner=inner)


def test_the_block_loops_follow_inner():
    s = polytile.schedule("examples/matmul.tile", dims="M=64,N=64,K=64")
    r = autotile.roles(s, "S0")
    sizes = dict(mc=32, nc=64, kc=16, mr=4)
    assert autotile.blocked_order(r, _config(s, sizes, 8)) == ["i_t", "k_t", "j_t", "i_t1", "j_t1", "k", "i", "j"]
    assert autotile.blocked_order(r, _config(s, sizes, 8, inner="ji"))[3:5] == ["j_t1", "i_t1"]
    assert "inner=ij" in str(_config(s, sizes, 8)) and "inner" not in str(_config(s, sizes, 8, inner="ji"))


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(EDGE_CASES)))
def test_columns_innermost_matches_the_oracle(case, dtype, target):
    (M, N, K), sizes = EDGE_CASES[case]
    lanes = hardware.load("x86-avx2").vector_lanes(dtype)
    s = polytile.schedule("examples/matmul.tile", dims=f"M={M},N={N},K={K}")
    sched = autotile.apply(s, _config(s, sizes, lanes))
    assert sched.loop_names("S0")[3:5] == ["i_t1", "j_t1"]
    rng = np.random.default_rng(case)
    A = rng.integers(-3, 4, size=(M, K)).astype(dtype)
    B = rng.integers(-3, 4, size=(K, N)).astype(dtype)
    k = polytile.compile("examples/matmul.tile", schedule=sched, target=target)
    np.testing.assert_array_equal(k(A, B), A @ B)


def test_zeroing_per_block_goes_inside_both_block_loops():
    """With one reduction segment the output is zeroed block by block (epilogues.zero_per_block): inside
    the innermost block loop, which is the column loop here; exact against numpy."""
    M, N, K = 40, 70, 12
    s = polytile.schedule("examples/matmul.tile", dims=f"M={M},N={N},K={K}")
    cfg = _config(s, dict(mc=20, nc=64, kc=K, mr=4), 8)
    r = autotile.roles(s, "S0")
    z = autotile.zero_per_block(autotile.apply(s, cfg), cfg, r, 0)
    assert z is not autotile.apply(s, cfg) and "Z0" in z.describe()
    rng = np.random.default_rng(1)
    A = rng.integers(-3, 4, size=(M, K)).astype(np.float32)
    B = rng.integers(-3, 4, size=(K, N)).astype(np.float32)
    np.testing.assert_array_equal(polytile.compile("examples/matmul.tile", schedule=z)(A, B), A @ B)


def test_a_row_panel_of_a_columns_innermost_nest_needs_only_the_last_cache():
    """Packed once per reduction segment however large (it is read one sliver at a time); rows innermost
    the same 2 MiB panel is over the budget and is copied per column panel instead."""
    s = polytile.schedule("examples/matmul.tile", dims="M=2048,N=2048,K=2048")
    sizes = dict(mc=1024, nc=256, kc=512, mr=8)
    plans = {p.array: p for p in autotile.pack_plan(s, _config(s, sizes, 16))}
    assert plans["A"].loop == "k_t" and plans["A"].elements * 4 > autotile.PACK_BUDGET
    rows_inner = {p.array: p for p in autotile.pack_plan(s, _config(s, sizes, 16, inner="ji"))}
    assert "A" not in rows_inner or rows_inner["A"].loop != "k_t"


def test_aliasing_rows_set_the_arrangements_apart_only():
    """Output rows a whole number of pages long alias in the caches when walked down: a tie-break entry
    for the rows-innermost nests only, the same for all of them."""
    s = polytile.schedule("examples/matmul.tile", dims="M=2048,N=2048,K=2048")
    sizes = dict(mc=1024, nc=256, kc=512, mr=8)
    assert autotile.output_rows_alias(s, _config(s, sizes, 16)) == 0.0
    assert autotile.output_rows_alias(s, _config(s, sizes, 16, inner="ji")) == 1.0
    assert autotile.output_rows_alias(s, _config(s, dict(sizes, mr=4, kc=64), 16, inner="ji")) == 1.0
    odd = polytile.schedule("examples/matmul.tile", dims="M=1500,N=1500,K=1500")
    assert not autotile.aliased_rows(odd, autotile.roles(odd, "S0"))
    assert autotile.output_rows_alias(odd, _config(odd, sizes, 16, inner="ji")) == 0.0


@pytest.mark.parametrize("hw_name", ["x86-avx512", "x86-avx2"])
@pytest.mark.parametrize("n", [1024, 2048])
def test_large_products_run_their_column_blocks_innermost(hw_name, n):
    """On two cores (each with a thousand rows or more of its own; the presets' 56 cores have 40)."""
    hw = dataclasses.replace(hardware.load(hw_name), cores=2)
    s = polytile.schedule("examples/matmul.tile", dims=f"M={n},N={n},K={n}")
    _, chosen = autotile.autotile(s, hw)
    cfg = chosen[0]
    assert cfg.inner == "ij" and cfg.order == "ikj" and cfg.parallel == "i_t", cfg
    l1, l2 = (lv.size_bytes for lv in hw.cache_levels()[:2])
    # the row sliver in half of L1, the column panel in a quarter of L2
    assert cfg.mr * cfg.kc * 4 <= l1 // 2 and cfg.kc * cfg.nc * 4 <= l2 // 4, cfg


@pytest.mark.parametrize("dims", ["M=128,N=1024,K=512", "M=1500,N=1500,K=1500", "M=2048,N=300,K=2048"])
def test_few_rows_or_rows_that_do_not_alias_keep_the_rows_innermost(dims):
    """Under COLUMNS_INNER_ROWS rows, or rows that are not a whole number of pages (1500^3: rows
    innermost 303 GFLOP/s, columns 294), only the rows-innermost nests are candidates."""
    s = polytile.schedule("examples/matmul.tile", dims=dims)
    cands = autotile.candidates(s, "S0", dataclasses.replace(hardware.load("x86-avx512"), cores=2))
    assert cands and all(c.inner == "ji" for c in cands)


def test_the_tuner_moves_between_the_arrangements():
    """Both ways, with or without the register tile (the block loops exist either way)."""
    s = polytile.schedule("examples/matmul.tile", dims="M=512,N=512,K=512")
    hw = hardware.load("x86-avx512")
    cands = autotile.candidates(s, "S0", hw)
    space = _Space(s, "S0", hw, cands)
    c = next(c for c in cands if c.inner == "ji")
    moved = space.moves(c, "inner")
    assert [m.inner for m in moved] == ["ij"]
    assert [m.inner for m in space.moves(moved[0], "inner")] == ["ji"]
    plain = dataclasses.replace(c, regtile=False)
    assert [m.inner for m in space.moves(plain, "inner")] == ["ij"]


def test_an_unknown_block_order_is_refused():
    s = polytile.schedule("examples/matmul.tile", dims="M=64,N=64,K=64")
    with pytest.raises(ValueError, match="inner must be one of ji, ij"):
        _config(s, dict(mc=32, nc=64, kc=16, mr=4), 8, inner="ik")
    with pytest.raises(ValueError, match="order must be one of"):
        _config(s, dict(mc=32, nc=64, kc=16, mr=4), 8, order="ijj")


def test_rows_alias_by_the_stride_of_the_row_loop():
    """The stride of the axis the row loop walks, with the column loop on the last axis: a batch of
    products whose rows are a page long aliases, and so do the channels of a 32x32 channels-first
    image (4 KiB apart); a channels-first output whose column loop is the channels, not the last
    axis, does not count."""
    def alias(path, dims, stmt="S0"):
        s = polytile.schedule(path, dims=dims)
        r = autotile.roles(s, stmt)
        return r, autotile.aliased_rows(s, r)
    assert alias("examples/batched_matmul.tile", "NB=2,M=300,K=64,N=1024")[1]
    assert not alias("examples/batched_matmul.tile", "NB=2,M=300,K=64,N=1000")[1]
    r, aliases = alias("examples/conv2d_nchw.tile", "N=1,CI=16,L0=32,L1=32,CO=16", "S2")
    assert (r.i, r.j) == ("co", "x1") and aliases
    r, aliases = alias("examples/conv2d_nchw.tile", "N=1,CI=64,L0=8,L1=8,CO=64", "S2")
    assert (r.i, r.j) == ("x1", "co") and not aliases


def test_a_transposed_column_operand_keeps_the_rows_innermost():
    """Columns innermost, every core copies each column panel itself: A @ B.T's panels are transposed
    while copied, and ran 10% slower that way (1024^3), so its output's aliasing rows do not count."""
    s = polytile.schedule("examples/matmul_abt.tile", dims="M=1024,N=1024,K=1024")
    cands = autotile.candidates(s, "S0", dataclasses.replace(hardware.load("x86-avx512"), cores=2))
    assert autotile.aliased_rows(s, autotile.roles(s, "S0"))
    assert cands and all(c.inner == "ji" for c in cands)
