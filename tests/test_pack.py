"""Packing of operand panels (schedule ``pack`` step, codegen/pack.py, autotile.pack_plan).

The packed code is checked against the numpy oracle on integer inputs (exact)
for aligned and misaligned tiles, edges, several threads, and programs where
only some operands can be packed; legality and the plan are checked directly.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytile
from polytile import IllegalSchedule, autotile, pipeline
from polytile.errors import ScheduleError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def path_of(name: str) -> Path:
    return EXAMPLES / f"{name}.tile"


def ints(name: str, dims: str, rng, dtype=np.float32):
    prog = polytile.load_program(path_of(name))
    shapes = polytile.shapes_from_dims(prog, pipeline.parse_dims(dims))
    return [rng.integers(-4, 5, size=sh).astype(dtype) for sh in shapes]


def run(name: str, dims: str, s, rng, dtype=np.float32) -> str:
    k = polytile.compile(path_of(name), schedule=s)
    ins = ints(name, dims, rng, dtype)
    got = k(*ins)
    want = polytile.reference(path_of(name), *ins)
    np.testing.assert_array_equal(got, want)
    return k.source(*ins)


def blocked_matmul(dims: str, ti: int, tj: int, tk: int, mr: int, nr: int, lanes: int = 16):
    s = polytile.schedule(path_of("matmul"), dims=dims)
    s = s.tile("S0", i=[ti, mr], j=[tj, nr], k=[tk])
    s = s.reorder("S0", ["i_t", "j_t", "k_t", "j_t1", "i_t1", "k", "i", "j"])
    return s.regtile("S0", "i", "j", mr=mr, nr=nr, lanes=lanes)


@pytest.mark.parametrize("a_loop,b_loop", [("k_t", "k_t"), ("i_t", "j_t"), ("j_t1", "i_t1"), ("i_t", "k_t")])
def test_packed_matmul_matches_oracle(a_loop, b_loop, rng):
    dims = "M=70,N=100,K=50"
    s = blocked_matmul(dims, 32, 64, 16, 8, 32)
    s = s.pack("S0", b_loop, "B", dim=1, block=32).pack("S0", a_loop, "A", dim=0, block=8)
    src = run("matmul", dims, s, rng)
    assert "pt_pkbuf0" in src and "pt_pq" in src  # the register tiles read the panels


def test_misaligned_tiles_fall_back_and_stay_exact(rng):
    # Tiles of 20 rows with mr=8: blocks straddle the packed blocks, so the
    # register tile must notice the misalignment and read the arrays instead.
    dims = "M=45,N=70,K=13"
    s = blocked_matmul(dims, 20, 48, 5, 8, 32)
    s = s.pack("S0", "k_t", "A", dim=0, block=8).pack("S0", "k_t", "B", dim=1, block=32)
    run("matmul", dims, s, rng)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 40), n=st.integers(1, 70), k=st.integers(1, 20),
       ti=st.sampled_from([8, 16, 24, 13]), tj=st.sampled_from([32, 64, 48]), tk=st.sampled_from([4, 7, 16]),
       mr=st.sampled_from([2, 4, 8]), loops=st.sampled_from([("k_t", "k_t"), ("i_t", "j_t"), ("j_t1", "i_t1")]))
def test_packed_matmul_random_shapes(m, n, k, ti, tj, tk, mr, loops, rng):
    dims = f"M={m},N={n},K={k}"
    s = blocked_matmul(dims, ti, tj, tk, mr, 16, lanes=8)
    s = s.pack("S0", loops[0], "A", dim=0, block=mr).pack("S0", loops[1], "B", dim=1, block=16)
    run("matmul", dims, s, rng)


def test_packed_float64_and_int32(rng):
    dims = "M=33,N=40,K=9"
    s = blocked_matmul(dims, 16, 32, 8, 4, 8, lanes=8)
    s = s.pack("S0", "k_t", "A", dim=0, block=4).pack("S0", "k_t", "B", dim=1, block=8)
    run("matmul", dims, s, rng, dtype=np.float64)
    run("matmul", dims, s, rng, dtype=np.int32)


@pytest.mark.parametrize("dims,ti,mr", [("M=64,N=96,K=48", 16, 8),    # every box inside: fast copies only
                                         ("M=61,N=83,K=45", 16, 8),    # edge boxes: both copies
                                         ("M=52,N=96,K=48", 20, 8)])   # 20-row boxes: a short last block
def test_fast_copy_inside_the_array_and_clipped_copy_at_the_edges(dims, ti, mr, rng):
    # A box that lies inside the array is copied by constant-bound loops (lanes innermost for
    # the transposing pack of A); a box crossing the edge by the clipped loops.  Both must fill
    # exactly the cells the register tiles read; B is packed outside the parallel loop (a
    # buffer shared by the threads).
    s = polytile.schedule(path_of("matmul"), dims=dims)
    s = s.tile("S0", i=[ti, mr], j=[32, 16], k=[16])
    s = s.reorder("S0", ["k_t", "j_t", "i_t", "j_t1", "i_t1", "k", "i", "j"])
    s = s.unmark("S0", "i_t", "parallel").parallel("S0", "i_t")
    s = s.regtile("S0", "i", "j", mr=mr, nr=16, lanes=8)
    s = s.pack("S0", "i_t", "A", dim=0, block=mr).pack("S0", "k_t", "B", dim=1, block=16)
    src = run("matmul", dims, s, rng)
    assert "pt_pk1[pt_b * " in src and "for (long pt_l = 0; pt_l < " in src  # the fast copies exist
    assert "pt_pk0 = pt_pkbuf0;" in src  # B's buffer is shared by the threads


def test_pack_of_written_array_is_illegal():
    s = blocked_matmul("M=16,N=32,K=8", 8, 32, 8, 8, 32)
    with pytest.raises(IllegalSchedule, match="written inside loop"):
        s.pack("S0", "k_t", "C", dim=1, block=32)


def test_pack_argument_errors():
    s = blocked_matmul("M=16,N=32,K=8", 8, 32, 8, 8, 32)
    with pytest.raises(ScheduleError, match="no array 'Q'"):
        s.pack("S0", "k_t", "Q", dim=0, block=8)
    with pytest.raises(ScheduleError, match="dim must be an axis"):
        s.pack("S0", "k_t", "A", dim=2, block=8)
    with pytest.raises(ScheduleError, match="block must be a positive"):
        s.pack("S0", "k_t", "A", dim=0, block=0)


def test_pack_shows_in_describe_and_replays_from_json(rng, tmp_path):
    dims = "M=40,N=64,K=24"
    s = blocked_matmul(dims, 16, 64, 8, 8, 32).pack("S0", "k_t", "B", dim=1, block=32)
    assert "[pack B dim 1 by 32]" in s.describe()
    f = tmp_path / "s.json"
    f.write_text(json.dumps(s.to_json()))
    k1 = polytile.compile(path_of("matmul"), schedule=s)
    k2 = polytile.compile(path_of("matmul"), schedule=str(f))
    ins = ints("matmul", dims, rng)
    assert k1.source(*ins) == k2.source(*ins)
    np.testing.assert_array_equal(k2(*ins), polytile.reference(path_of("matmul"), *ins))


def test_conv_packs_the_filter_not_the_shifted_input(rng):
    dims = "N=1,H=12,W=40,CI=8,KH=3,KW=3,CO=32"
    s = polytile.schedule(path_of("conv2d"), dims=dims)
    r = autotile.roles(s, "S0")
    cfg = autotile.TileConfig("S0", r.i, r.j, r.k, mc=16, nc=32, kc=8, mr=4, nr=16, lanes=16, order="jki",
                              parallel=None)
    plans = autotile.pack_plan(s, cfg)
    # I[n, y + ky, x + kx, ci]: the rows of a block move with kx -> not packable.
    assert [p.array for p in plans] == ["F"]
    assert plans[0].loop == "n" and plans[0].copies == 1  # the filter does not move with the image rows
    s2 = autotile.apply(s, cfg)
    src = run("conv2d", dims, s2, rng)
    assert "pt_pkbuf0" in src


def test_plan_copies_each_panel_where_it_is_copied_least():
    s = polytile.schedule(path_of("matmul"), dims="M=1024,N=1024,K=1024")
    # order kij: k_t (4), i_t (4, parallel), j_t (4), j_t1, i_t1
    cfg = autotile.TileConfig("S0", "i", "j", "k", 256, 256, 256, 8, 32, 16, "kij", "i_t")
    plans = {p.array: p for p in autotile.pack_plan(s, cfg)}
    # A[i][k] moves with i_t: one 256x256 panel per (k_t, i_t), re-read by every column block.
    assert (plans["A"].loop, plans["A"].dim, plans["A"].block) == ("i_t", 0, 8)
    assert (plans["A"].elements, plans["A"].copies, plans["A"].reuse) == (256 * 256, 16, 1024 // 32)
    # B[k][j] does not move with i_t: the whole 256x1024 row panel once per k_t (1 MiB fits the budget)
    # copies less than a 256x256 panel per (k_t, i_t, j_t).
    assert (plans["B"].loop, plans["B"].dim, plans["B"].block) == ("k_t", 1, 32)
    assert (plans["B"].elements, plans["B"].copies) == (256 * 1024, 4)
    # With a smaller cache budget the row panel no longer fits: per j_t it is.
    small = {p.array: p for p in autotile.pack_plan(s, cfg, budget=256 * 1024)}
    assert small["B"].loop in ("j_t", "j_t1") and small["B"].copies * small["B"].elements == 4 * 4 * 4 * 256 * 256
    # Small tiles re-read a panel too few times to pay for the copy.
    tiny = autotile.TileConfig("S0", "i", "j", "k", 16, 64, 64, 8, 32, 16, "ijk", "i_t")
    assert all(p.array != "A" or p.reuse >= autotile.PACK_MIN_REUSE for p in autotile.pack_plan(s, tiny))
    no = autotile.TileConfig(**{**cfg.to_json(), "pack": False})
    assert "pack" not in str(autotile.apply(s, no).steps)


def test_autotiled_packed_batched_matmul(rng):
    dims = "NB=3,M=40,N=64,K=32"
    s = polytile.schedule(path_of("batched_matmul"), dims=dims)
    r = autotile.roles(s, "S0")
    cfg = autotile.TileConfig("S0", r.i, r.j, r.k, mc=16, nc=64, kc=32, mr=2, nr=16, lanes=16, order="kji",
                              parallel=r.outer[0])
    assert autotile.pack_plan(s, cfg)
    run("batched_matmul", dims, autotile.apply(s, cfg), rng)


def test_rank_breaks_model_ties_by_packing_regions_and_kc():
    s = polytile.schedule(path_of("matmul"), dims="M=1024,N=1024,K=1024")
    mk = lambda **kw: autotile.TileConfig(**{**dict(stmt="S0", i="i", j="j", k="k", mc=256, nc=256, kc=256, mr=8,  # noqa: E731
                                                   nr=32, lanes=16, order="ikj", parallel="i_t"), **kw})
    unpacked = mk(pack=False)
    small_kc = mk(kc=64)
    inner_par = mk(order="kij")  # k_t outside the parallel loop: 4 fork/joins
    best = mk()
    flat = lambda c: 1.0  # noqa: E731 - the model sees no difference
    assert autotile.rank(s, [unpacked, small_kc, inner_par, best], flat) == [best, small_kc, inner_par, unpacked]
    assert autotile.regions(s, inner_par) == 4 and autotile.regions(s, best) == 1
    # Outside the tie window the prediction decides.
    assert autotile.rank(s, [best, unpacked], lambda c: 1.0 if c.pack else 0.5) == [unpacked, best]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.sampled_from([5, 17, 31, 37, 64, 71]), n=st.sampled_from([16, 33, 47, 96, 101]),
       k=st.sampled_from([3, 13, 29, 64]), pick=st.integers(0, 10_000), data=st.data())
def test_autotile_candidates_with_packing_match_the_oracle(m, n, k, pick, data, rng):
    """Any candidate configuration, packed wherever pack_plan says, on shapes that
    do not divide the tiles (primes, sizes below a tile): exact against the oracle."""
    dims = f"M={m},N={n},K={k}"
    s = polytile.schedule(path_of("matmul"), dims=dims)
    hw = polytile.options.load_hardware("host")
    cands = autotile.candidates(s, "S0", hw, full_blocks=False)
    cfg = cands[pick % len(cands)]
    # Smaller panels than the host's budget, so packing also happens on these small shapes.
    small = autotile.TileConfig(**{**cfg.to_json(), "mc": max(cfg.mr, cfg.mc // 4),
                                   "nc": max(cfg.nr, cfg.nc // 4), "kc": max(1, cfg.kc // 8)})
    chosen = data.draw(st.sampled_from([cfg, small]))
    sched = autotile.apply(s, chosen)
    run("matmul", dims, sched, rng)


def test_packing_happens_in_the_property_space():
    """The property test above is not vacuous: on its shapes some configurations do pack."""
    s = polytile.schedule(path_of("matmul"), dims="M=71,N=101,K=64")
    cfg = autotile.TileConfig("S0", "i", "j", "k", 16, 32, 8, 4, 16, 16, "kij", "i_t")
    assert autotile.pack_plan(s, cfg)
    assert any(st.op == "pack" for st in autotile.apply(s, cfg).steps)


def test_pack_seconds_charge_the_copies_a_plan_makes():
    # conv2d 1x14x14x256: the filter (2.4 MB) packed at ci_t inside the row loop is copied 384 times
    # per call; the ranking must see that cost, which the nest's own prediction leaves out.
    hw = polytile.hardware.load("x86-avx512")
    s = polytile.schedule(path_of("conv2d"), dims="N=1,H=14,W=14,CI=256,KH=3,KW=3,CO=256")
    per_row = autotile.TileConfig("S0", "x", "co", "ci", 8, 256, 8, 2, 128, 16, "jki", "y")
    plans = autotile.pack_plan(s, per_row)
    assert [p.array for p in plans] == ["F"] and plans[0].copies > 100
    t = autotile.pack_seconds(s, per_row, hw)
    moved = sum(p.elements * p.copies * 4 for p in plans)
    whole = 3 * 3 * 256 * 256 * 4
    # The first copy of each element only writes its panel (an L1-sized sliver here): the nest's own
    # prediction already reads the filter once.  Every later copy reads it again from L3 (the 2.4 MB
    # filter does not fit L2), at the machine's L3 bandwidth.
    panel = next(lv for lv in hw.cache_levels() if plans[0].elements * 4 <= 0.75 * lv.size_bytes)
    assert t == pytest.approx(whole / hw.bandwidth(panel) + (moved - whole) / hw.bandwidth(hw.level("L3")))
    assert autotile.pack_seconds(s, dataclasses.replace(per_row, pack=False), hw) == 0.0
    chosen = autotile.autotile(s, hw)[1][0]
    copied = sum(p.elements * p.copies for p in autotile.pack_plan(s, chosen)) if chosen.pack else 0
    assert copied <= 3 * 3 * 256 * 256  # the filter at most once per call


def test_candidate_sample_is_stable_when_the_space_grows():
    # Adding block shapes to the space displaces a few sampled configurations; it must not redraw them
    # all (which silently changed every default schedule): whatever the larger space's sample keeps
    # from the smaller space, the smaller space's sample keeps too.
    hw = polytile.hardware.load("x86-avx512")
    s = polytile.schedule(path_of("matmul"), dims="M=1024,N=1024,K=1024")
    space = autotile.candidates(s, "S0", hw, limit=10 ** 6)
    assert len(space) > 2000
    part, limit = space[: len(space) * 4 // 5], 600
    kept = set(autotile.sample(space, limit))
    kept_part = autotile.sample(part, limit)
    assert len(kept) == len(kept_part) == limit
    assert kept & set(part) <= set(kept_part)
    assert autotile.candidates(s, "S0", hw, limit=limit) == autotile.candidates(s, "S0", hw, limit=limit)


def test_candidates_include_blocks_as_wide_as_the_registers_allow():
    hw = polytile.hardware.load("x86-avx512")  # 32 registers of 16 floats
    s = polytile.schedule(path_of("conv2d"), dims="N=1,H=28,W=28,CI=128,KH=3,KW=3,CO=128")
    blocks = {(c.mr, c.nr) for c in autotile.candidates(s, "S0", hw, limit=10 ** 6)}
    assert (2, 128) in blocks and (4, 96) in blocks
    for mr, nr in blocks:
        nv = nr // 16
        assert mr * nv + nv + 1 <= 32  # accumulators, one row of B vectors and a broadcast


def test_a_pack_along_the_last_axis_fills_blocks_in_groups():
    from polytile.codegen.pack import block_group
    from polytile.codegen.pack import PackBuffer
    from polytile.poly.scop import Array

    def buf(block, cols, dtype="float32"):
        return PackBuffer("pt_pk0", Array("A", "A", (256, cols), dtype, "input"), 1, block, (256, cols))

    assert block_group(buf(8, 1024)) == 8  # 32-byte blocks: 256 bytes of each row at a time
    assert block_group(buf(32, 512)) == 2
    assert block_group(buf(64, 512)) == 0  # a block already reads 256 bytes
    assert block_group(buf(8, 16)) == 0  # two blocks: one group would be the whole pack
    assert block_group(buf(8, 1024, "float64")) == 4


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("m,n,k", [(1024, 96, 300), (203, 77, 129), (600, 40, 33)])
def test_transposed_rows_operand_packs_in_groups_exactly(m, n, k, target, rng):
    # A[k, i] packed along i (its last axis) in blocks of rows, several blocks per pass over a row; the
    # last group and the last block may be short.
    src = "function (A[K, M], B[K, N]) -> (C) { C[i, j : M, N] = +(A[k, i] * B[k, j]); }"
    A = rng.integers(-3, 4, (k, m)).astype(np.float32)
    B = rng.integers(-3, 4, (k, n)).astype(np.float32)
    s = polytile.schedule(src, dims=dict(M=m, N=n, K=k))
    s = s.tile("S0", i=[192, 8], j=[32, 16], k=[64])  # A's panel: 24 blocks of 8 rows, 3 groups
    s = s.reorder("S0", ["i_t", "j_t", "k_t", "j_t1", "i_t1", "k", "i", "j"]).regtile("S0", "i", "j", mr=8, nr=16, lanes=16)
    s = s.pack("S0", "k_t", "A", dim=1, block=8)
    kern = polytile.compile(src, target=target, schedule=s)
    if target == "openmp":
        assert "pt_g += 8" in kern.source(A, B)
    np.testing.assert_array_equal(kern(A, B), A.T @ B)


def test_a_segment_deep_enough_is_no_tie_break():
    # A 3x3 conv's block runs kc x 9 reduction steps per accumulator load and store: kc = 16 (144 steps)
    # is as deep as kc = 32 (288) for the tie-break, so the model's memory time decides between them;
    # a GEMM's kc = 64 (64 steps) stays behind kc = 256.
    s = polytile.schedule(path_of("conv2d"), dims="N=1,H=32,W=32,CI=256,KH=3,KW=3,CO=32")
    cfg = lambda kc: autotile.TileConfig("S0", "x", "co", "ci", 6, 32, kc, 6, 32, 16, "jki", "y")  # noqa: E731
    assert autotile.structure_key(s, cfg(16))[5] == autotile.structure_key(s, cfg(32))[5] == -autotile.DEEP_ENOUGH
    g = polytile.schedule(path_of("matmul"), dims="M=512,N=512,K=512")
    mk = lambda kc: autotile.TileConfig("S0", "i", "j", "k", 128, 256, kc, 8, 32, 16, "jki", "j_t")  # noqa: E731
    assert autotile.structure_key(g, mk(64))[5] > autotile.structure_key(g, mk(256))[5]


def test_a_streamed_operand_packed_once_costs_its_panel_writes_only():
    # 64x4096 @ 4096^2: B (64 MB) is read from memory once whether packed or not; the nest's prediction
    # has that read, so its first copy costs only the writes to the panel.  Counted at memory bandwidth
    # as well, packing looked twice as dear and B stayed unpacked (11.5 ms against 6.8 packed, Zen 5).
    hw = polytile.hardware.load("x86-avx2")
    s = polytile.schedule(path_of("matmul"), dims="M=64,K=4096,N=4096")
    cfg = autotile.TileConfig("S0", "i", "j", "k", 64, 128, 256, 4, 16, 8, "ijk", "j_t")
    plans = autotile.pack_plan(s, cfg)
    whole = {"A": 64 * 4096, "B": 4096 * 4096}
    assert sorted(p.array for p in plans) == ["A", "B"]
    assert all(p.elements * p.copies == whole[p.array] for p in plans)  # each element copied once

    def panel(p):
        return next(lv for lv in hw.cache_levels() if p.elements * 4 <= 0.75 * lv.size_bytes)
    want = sum(whole[p.array] * 4 / hw.bandwidth(panel(p)) for p in plans)
    assert autotile.pack_seconds(s, cfg, hw) == pytest.approx(want)
    b = next(p for p in plans if p.array == "B")
    assert hw.bandwidth(panel(b)) > 10 * hw.bandwidth(hw.dram)  # B's 16 KB slivers: L1, not memory
    chosen = autotile.autotile(s, hw)[1][0]
    assert "B" in [p.array for p in autotile.pack_plan(s, chosen)], chosen


def test_an_unpacked_operand_from_memory_is_read_by_few_rows_at_a_time():
    # 8x4096 @ 4096^2: B (64 MB) is used once per element by the one row block; unpacked, each of a
    # block's kc rows is a stream of its own.  kc = 16 / 32 / 64 / 512 ran 2.59 / 2.52 / 3.65 / 4.69 ms
    # on the Zen 5 VM (numpy 3.9): the ranking must see the loss and have the short segments to choose.
    hw = polytile.hardware.load("x86-avx512")
    s = polytile.schedule(path_of("matmul"), dims="M=8,K=4096,N=4096")
    r = autotile.roles(s, "S0")
    assert autotile.streamed_columns(s, r, hw) == ["B"]
    cached = polytile.schedule(path_of("matmul"), dims="M=1024,K=1024,N=1024")
    assert autotile.streamed_columns(cached, autotile.roles(cached, "S0"), hw) == []
    long = autotile.TileConfig("S0", "i", "j", "k", 8, 2048, 512, 8, 16, 16, "ijk", "j_t")  # 8 KB runs
    short = dataclasses.replace(long, kc=32)
    assert "B" not in [p.array for p in autotile.pack_plan(s, long)]
    lost = 4096 * 4096 * 4 / hw.bandwidth(hw.dram) * (1 - 32 / 512)
    assert autotile.stream_seconds(s, long, hw) == pytest.approx(lost)
    assert autotile.stream_seconds(s, short, hw) == 0.0
    assert autotile.operand_seconds(s, long, hw) == pytest.approx(lost + autotile.pack_seconds(s, long, hw))
    assert any(c.kc <= 32 for c in autotile.candidates(s, "S0", hw))
    chosen = autotile.autotile(s, hw)[1][0]
    assert chosen.kc <= 32 and autotile.stream_seconds(s, chosen, hw) < lost / 10, chosen


def test_an_operand_from_memory_is_read_in_long_runs_of_each_row():
    # Strips of nc = 128 / 256 / 512 / 1024 / 2048 columns over 32 rows ran 3.66 / 3.39 / 3.14 / 2.96 /
    # 2.97 ms (8x4096 @ 4096^2, Zen 5): a run of a row shorter than a page loses time.
    hw = polytile.hardware.load("x86-avx512")
    s = polytile.schedule(path_of("matmul"), dims="M=8,K=4096,N=4096")
    cfg = autotile.TileConfig("S0", "i", "j", "k", 8, 128, 32, 8, 32, 16, "ijk", "j_t")
    times = [autotile.stream_seconds(s, dataclasses.replace(cfg, nc=nc), hw) for nc in (128, 256, 512, 1024, 2048)]
    assert times[0] > times[1] > times[2] > times[3] == times[4] == 0.0
    memory = 4096 * 4096 * 4 / hw.bandwidth(hw.dram)
    assert times[0] == pytest.approx(memory * autotile.RUN_LOSS * (4096 / 512 - 1))
    # each core's share of the columns in one strip is a candidate, for every block holding all 8 rows
    short = [c for c in autotile.candidates(s, "S0", hw, limit=10 ** 6) if c.kc <= 32 and c.mr >= 8]
    assert {c.nr for c in short} <= {c.nr for c in short if c.nc == c.nr * -(-4096 // (hw.cores * c.nr))}
