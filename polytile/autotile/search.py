"""The blocked-schedule space of a contraction and the model-driven choice in it: :func:`candidates`,
:func:`rank` and :func:`autotile`; :func:`apply` turns a configuration into schedule steps.
"""
from __future__ import annotations

import math
import zlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..cost.constants import FMA_LATENCY, PAGE_BYTES
from ..cost.nest import pads_columns
from ..epilogues import fuse_epilogues, zero_per_block
from ..errors import PolytileError, ScheduleError
from ..hardware import CPUDescriptor
from ..poly import body as B
from ..scheduling import Schedule
from .packing import L3_SHARE, PREFETCH_STREAMS, _pack_operands, operand_seconds, pack_plan, streamed_columns
from .roles import Roles, TileConfig, _trips, blocked_order, inner_points, roles

def apply(s: Schedule, cfg: TileConfig) -> Schedule:
    """The blocked schedule of ``cfg`` on ``s`` (every step legality-checked)."""
    r = roles(s, cfg.stmt)
    if r is None:
        raise ScheduleError(f"{cfg.stmt}: not a contraction in its original loop order; cannot block it")
    st = r.stmt
    plans = pack_plan(s, cfg) if cfg.regtile and cfg.pack else []
    s = s.tile(st, {r.i: [cfg.mc, cfg.mr], r.j: [cfg.nc, cfg.nr], r.k: [cfg.kc]})
    s = s.reorder(st, blocked_order(r, cfg))
    # Drop parallel marks inherited from the default schedule; choose one explicitly.
    for m in list(s.marks):
        if m[0] == st and m[2] == "parallel":
            s = s.unmark(st, m[1])
    if cfg.parallel:
        s = s.parallel(st, cfg.parallel)
    if cfg.regtile:
        s = s.regtile(st, r.i, r.j, mr=cfg.mr, nr=cfg.nr, lanes=cfg.lanes)
        for p in plans:
            s = s.pack(st, p.loop, p.array, dim=p.dim, block=p.block)
    return s


def _pow2_upto(n: int, lo: int = 1) -> List[int]:
    out, x = [], lo
    while x < n:
        out.append(x)
        x *= 2
    out.append(n)
    return sorted(set(out))


#: Share of the cores a parallel loop must keep busy (:func:`balance`) to be the blocked nest's parallel loop
#: when an inner one splits better: a 1x7x7x512 3x3 conv's 5 output rows over 2 cores kept one idle a
#: sixth of the time, and every candidate had them parallel (default 1.61 ms, the model's best 0.91);
#: over the output channels' tiles, 0.59-0.65 ms (numpy 0.68-0.72; Zen 5, exploratory).
BALANCE = 0.9


def balance(trip: int, cores: int) -> float:
    """The share of ``cores`` a static split of ``trip`` equal iterations keeps busy.

    >>> balance(5, 2), balance(4, 2), balance(54, 2)
    (0.8333333333333334, 1.0, 1.0)
    """
    return trip / (cores * -(-trip // cores))


#: Reduction steps a block must run for vectors under 32 bytes to pay (:func:`narrow_widths`).
NARROW_REDUCTION = 32


def narrow_widths(lanes: int, item: int, cols: int, steps: int, *, pad: bool = False) -> List[int]:
    """Vector widths (lanes) under a full register for a block of ``cols`` output columns: a register of
    half the width is still one register.

    Where the columns are fewer than a full vector: halves and quarters of at least 32 bytes.  8
    columns on 16 lanes ran the plain nest: a batch of 8x64 @ 64x8 products at 22 GFLOP/s (0.75 ms;
    0.09 blocked), 4096x256 @ 256x8 0.75 ms (0.09).  Under 32 bytes (16 and 8) only where no 32-byte
    vector fits the columns, and the block runs at least :data:`NARROW_REDUCTION` reduction steps:
    1024^2 @ 1024x4 float32 ran its plain nest at 0.35 ms, 0.105 in 8 x 4 blocks of 16 bytes (numpy
    0.09; Zen 5), but a batch of 4x4 @ 4x4 products on 16-byte vectors ran slower than its plain nest
    (24 vs 16 us): four steps do not pay for the block.  Such a block, and any where the columns fit
    one full vector, takes the fewest rows whose accumulators hide the multiply-add latency
    (``FMA_LATENCY`` x FMA units, 8 on Zen 5): each row is another stream of the unpacked left
    operand, which bounds these products.  1024^2 @ 1024x4 on
    4 lanes, rows 4 / 6 / 8 / 10 / 12 / 14: 0.124 / 0.129 / 0.077 / 0.113 / 0.082 / 0.141 ms
    (numpy 0.115; Zen 5, interleaved).

    With ``pad`` (the block may be wider than the columns, :func:`cost.nest.pads_columns`) also the
    narrowest vector that holds all of them, on the same terms: 6 columns in one 8-lane vector
    rather than a 4-lane block and its shifted edge block, twice the multiply-adds.

    >>> narrow_widths(16, 4, 12, 1024), narrow_widths(16, 4, 4, 1024), narrow_widths(16, 4, 4, 4)
    ([8], [4, 2], [])
    >>> narrow_widths(16, 4, 6, 1024, pad=True), narrow_widths(16, 4, 3, 1024, pad=True)
    ([8, 4, 2], [4, 2])
    """
    if cols >= lanes:
        return []
    out = []
    for w in (lanes >> s for s in range(1, lanes.bit_length())):
        if w < 2 or w * item < 8 or (w > cols and not (pad and w < 2 * cols)):
            continue
        if w * item >= 32 or (cols * item < 32 and steps >= NARROW_REDUCTION):
            out.append(w)
    return out


def candidates(s: Schedule, stmt: str, hw: CPUDescriptor, *, limit: int = 600,
               full_blocks: bool = True) -> List[TileConfig]:
    """Configurations for ``stmt`` whose tiles fit the descriptor's cache levels.

    mr x nr/lanes accumulators fit the vector registers (leaving room for
    operands), an ``mr x kc`` + ``kc x nr`` panel fits L1, ``mc x kc`` fits
    L2, ``kc x nc`` fits the last level a core can use.  Where the output's rows
    alias, also nests with the column blocks innermost, on their own terms
    (:func:`_columns_inner`), sampled apart: up to ``limit // 4`` more.
    """
    r = roles(s, stmt)
    if r is None:
        return []
    st = s.scop.statement(r.stmt)
    dtype = s.scop.array(st.body.array).dtype
    item = np.dtype(dtype).itemsize
    lanes = hw.vector_lanes(dtype)
    regs = max(hw.vector_registers, 8)
    E = r.extents
    caches = hw.cache_levels()
    l1 = caches[0].size_bytes if caches else 32 * 1024
    l2 = caches[1].size_bytes if len(caches) > 1 else 8 * l1
    l3 = caches[2].size_bytes if len(caches) > 2 else 4 * l2
    l3 = min(l3, L3_SHARE)
    blocks = []
    rest = inner_points(r)
    steps = E[r.k] * rest
    # A padded block runs the edge block's staging of its output cells: a short reduction does not pay
    # for it (64 rows x 6 columns over 4 steps: 4.9 us padded, 2.1 plain; 256 x 6 over 16: 5.1 and 5.4).
    pad = steps >= NARROW_REDUCTION and pads_columns(st, r.i, r.j)
    widths = [lanes] + narrow_widths(lanes, item, E[r.j], steps, pad=pad)
    chains = math.ceil(FMA_LATENCY * max(1, hw.fma_units_per_core))
    for width in widths:
        for nv in (1, 2, 3, 4, 6, 8):
            nr = nv * width
            for mr in (1, 2, 3, 4, 6, 8, 12, 14):
                if mr * nv + nv + 1 > regs or mr * nv < 4:
                    continue
                if (width < lanes or E[r.j] <= lanes) and not mr * nv >= chains > (mr - 1) * nv:
                    continue  # few columns: just the accumulators that hide the latency (narrow_widths)
                blocks.append((mr, nr, width))
    out: List[TileConfig] = []
    cores = max(1, hw.cores)

    def parallel_loop(order: str, mc: int, nc: int, mr: int, nr: int, inner: str) -> str:
        """The outermost loop of the blocked nest that carries no dependence and splits over the
        cores with at least :data:`BALANCE` of them busy (:func:`balance`); else the best balanced of
        those with at least two iterations; else the outermost.

        Loops of one iteration generate no code, so a mark there would be lost.
        """
        trips = {f"{r.j}_t": -(-E[r.j] // nc), f"{r.i}_t": -(-E[r.i] // mc)}
        loops = [(v, E[v]) for v in r.outer] + [(f"{getattr(r, c)}_t", trips[f"{getattr(r, c)}_t"])
                                                for c in order if c in "ij"]
        blocks = {"j": (f"{r.j}_t1", -(-min(nc, E[r.j]) // nr)), "i": (f"{r.i}_t1", -(-min(mc, E[r.i]) // mr))}
        loops += [blocks[c] for c in inner]
        for name, trip in loops:
            if trip >= cores and balance(trip, cores) >= BALANCE:
                return name
        split = [(balance(trip, cores), -k, name) for k, (name, trip) in enumerate(loops) if trip >= 2]
        return max(split)[2] if split else loops[0][0]

    # At least one full register block, or the register tile never runs and
    # blocking only adds loop overhead: small problems keep the plain schedule
    # (the tuner, which measures, may still ask for them with full_blocks=False).
    if full_blocks:
        # A block wider than the columns pads them (pads_columns): at most its last vector partly used,
        # and that less than half (3 columns take a 4-lane vector, not a 16-lane one).
        blocks = [(mr, nr, width) for mr, nr, width in blocks
                  if mr <= E[r.i] and (nr <= E[r.j] or (pad and nr < E[r.j] + width and width < 2 * E[r.j]))]
    streamed = bool(streamed_columns(s, r, hw))
    columns_inner: List[Tuple] = []
    # Columns innermost, every core copies each column panel itself (once per row panel): only where
    # that copy is contiguous.  A @ B.T 1024^3, whose B[j][k] panels are transposed while copied: 8.5-8.8
    # ms columns innermost, 7.7-7.9 rows innermost (numpy 7.3-7.7; Xeon VM, exploratory).
    aliases = aliased_rows(s, r) and all(op.axis == len(op.shape) - 1 for op in _pack_operands(s, r) if not op.rows)
    for mr, nr, width in blocks:
        # The two longest reduction segments whose mr x kc + kc x nr slivers fit L1
        # (BLIS's kc rule; shorter ones only reload the accumulators more often).
        # The other reduction loops (a convolution's ky, kx) run inside the register
        # tile, so its slivers are that many times longer.
        fits = sorted({min(kc, E[r.k]) for kc in (8, 16, 32, 64, 128, 192, 256, 384, 512)
                       if (mr + nr) * min(kc, E[r.k]) * rest * item <= l1})
        kcs = fits[-2:]
        strips = [nr * x for x in (4, 8, 16, 32, 64)]
        if streamed and E[r.i] <= mr:
            # A column operand from memory read by one row block (8x4096 @ 4096^2), each element used
            # once: also the longest segment whose rows the prefetchers can follow, and each core's
            # share of the columns in one strip (stream_seconds).  Not for two or more row blocks: 16
            # rows ranked 4-row blocks over 32 steps first (5.2 ms, 4.3 as before; 3.6 for the 8-row
            # blocks the model ties with them).
            kcs = sorted(set(kcs) | set([kc for kc in fits if kc * rest <= PREFETCH_STREAMS][-1:]))
            strips.append(nr * -(-E[r.j] // (cores * nr)))
        for kc in kcs:
            # Powers-of-two-ish multiples of mr, and the row counts that split the rows
            # evenly over the cores (1-4 blocks each): a balanced parallel loop.
            even = {mr * -(-E[r.i] // (cores * t * mr)) for t in (1, 2, 3, 4)}
            for mc in sorted({mr * x for x in (4, 8, 12, 16, 24, 32, 48)} | even):
                mc = min(mc, max(mr, E[r.i]))
                if mc * kc * item > l2 // 2:
                    continue
                for nc in dict.fromkeys(strips):
                    nc = min(nc, max(nr, E[r.j]))
                    if kc * nc * item > l3 // 2:
                        continue
                    for order in ("jki", "kji", "ijk", "ikj", "kij"):
                        # A narrower width rides at the end, so a full-width entry reads (and samples) as before.
                        out.append((mc, nc, kc, mr, nr, order) + ((width,) if width != lanes else ()))
        if aliases:
            columns_inner += _columns_inner(E, r, mr, nr, width, lanes, rest, item, (l1, l2, l3), cores, regs)
    # Deduplicate (clamped sizes collide) and keep the set manageable.  The parallel loop is a
    # function of the other fields, so it is worked out only for the configurations kept.  The
    # column-innermost nests are sampled on their own, so they never displace a rows-innermost one.
    uniq = sample(list(dict.fromkeys(out)), limit) + sample(list(dict.fromkeys(columns_inner)), limit // 4)
    configs = []
    for mc, nc, kc, mr, nr, order, *extra in uniq:
        width = next((x for x in extra if isinstance(x, int)), lanes)
        inner = next((x for x in extra if isinstance(x, str)), "ji")
        configs.append(TileConfig(r.stmt, r.i, r.j, r.k, mc, nc, kc, mr, nr, width, order,
                                  parallel_loop(order, mc, nc, mr, nr, inner), inner=inner))
    return configs


#: Output rows from which a blocked nest may run its column blocks innermost (``inner="ij"``,
#: :func:`_columns_inner`), where those rows alias (:func:`aliased_rows`): the row sliver's reuse across
#: a whole column panel, and the output's blocks side by side, pay where each core has many row blocks.
#: (Median GFLOP/s, interleaved with numpy, Xeon VM with AVX-512, exploratory; the spread is between
#: runs minutes apart: SGEMM 2048^3 rows innermost 271-284, columns innermost 300-317, numpy 299-307;
#: 1024^3 283-304, 293-316, 291-313.  Where the rows do not alias the rows-innermost nest was as fast
#: or faster: 1500^3 303 against 294, 512^3 and 600x500x700 3-6% faster.)
COLUMNS_INNER_ROWS = 256


def _columns_inner(E, r, mr: int, nr: int, width: int, lanes: int, rest: int, item: int, caches,
                   cores: int, regs: int) -> List[Tuple]:
    """Candidate tuples of one register block with the column blocks innermost (``inner="ij"``).

    The block's ``mr x kc`` row sliver stays in L1 while the ``kc x nc`` column panel streams through
    from L2 (BLIS's arrangement, with the operands' roles exchanged): half of L1 for the row sliver, so
    ``kc`` may be twice the rows-innermost one, and the output block is loaded and stored half as
    often; the widest column panel in a quarter of L2 (half ran 5% slower: 2048^3, nc = 512 against
    256); the ``mc x kc`` row panel is read once per column panel from the last cache.  Only for
    outputs of at least :data:`COLUMNS_INNER_ROWS` rows and as many columns as a strip of four blocks:
    smaller ones keep the established rows-innermost nest.

    >>> # SGEMM 2048^3, 8x32 on a 48 KiB L1 / 2 MiB L2: kc in (512, 768), nc the widest with kc x nc x 4 <= 512 KiB
    """
    l1, l2, l3 = caches
    if E[r.i] < COLUMNS_INNER_ROWS or E[r.j] < 4 * nr or width != lanes or mr < 4:
        return []
    if mr * (nr // width) < regs // 2:
        # The column vectors come from L2 at every step: each must feed as many rows as the registers
        # hold (600x500x700: 6x32 blocks ran 242 GFLOP/s, the rows-innermost 12x32 257).
        return []
    fits = sorted({min(kc, E[r.k]) for kc in (64, 128, 192, 256, 384, 512, 768, 1024)
                   if mr * min(kc, E[r.k]) * rest * item <= l1 // 2})
    out = []
    for kc in fits[-2:]:
        # Each core's rows in one or two panels (the parallel loop is the row panels'), the row panel
        # packed once per reduction segment and every column panel of the segment run past it.
        for mc in sorted({min(mr * -(-E[r.i] // (cores * t * mr)), max(mr, E[r.i])) for t in (1, 2)}):
            if mc * kc * item > l3 // 2:
                continue
            # The widest column panel in a quarter of L2: each row sliver is reused nc / nr times from L1
            # (SGEMM 1024^3, kc = 512: nc = 128 / 256 / 512 ran 301 / 312 / 297 GFLOP/s median).
            ncs = [nc for nc in dict.fromkeys(min(nr * x, max(nr, E[r.j])) for x in (4, 8, 16, 32))
                   if kc * nc * rest * item <= l2 // 4]
            out += [(mc, nc, kc, mr, nr, "ikj", "ij") for nc in ncs[-1:]]
    return out


def sample(items: Sequence, limit: int) -> List:
    """The ``limit`` items of smallest checksum (of their ``repr``), in their order: deterministic, and
    stable when the space grows -- an item kept from a larger list is kept from any part of it that
    holds it, so new block shapes displace a few configurations instead of redrawing them all.

    >>> sample(list(range(10)), 20) == list(range(10))
    True
    """
    if len(items) <= limit:
        return list(items)
    keep = set(sorted(range(len(items)), key=lambda k: (zlib.crc32(repr(items[k]).encode()), k))[:limit])
    return [x for k, x in enumerate(items) if k in keep]


def contraction_statements(s: Schedule) -> List[str]:
    return [st.name for st in s.scop.statements if roles(s, st.name) is not None]


def autotile(s: Schedule, hw, *, predict=None) -> Tuple[Schedule, List[TileConfig]]:
    """Block every contraction of ``s`` with the configuration the cost model ranks best.

    Configurations are ranked analytically (``cost.predict_config``: isl
    footprints of the tile boxes, no schedule built per candidate); only the
    winner is applied.  Returns the new schedule and the chosen
    configurations; statements the blocked form does not fit keep theirs.
    """
    from .. import cost

    bound = memory = None
    if predict is None:
        predictions: Dict[TileConfig, object] = {}

        def prediction(cfg: TileConfig):
            if cfg not in predictions:
                predictions[cfg] = cost.predict_config(s, cfg, hw)
            return predictions[cfg]
        # The copies into packed panels are not in the nest's prediction; they are added here.
        predict = lambda sched, cfg: prediction(cfg).time_s + operand_seconds(s, cfg, hw)  # noqa: E731
        memory = lambda cfg: memory_time(prediction(cfg))  # noqa: E731
        bound = lambda c: cost.config_bound(s, c, hw)  # noqa: E731
    chosen: List[TileConfig] = []
    if not isinstance(hw, CPUDescriptor):
        return s, chosen
    for st in contraction_statements(s):
        # Only the first three are tried; the bound spares predicting the configurations that cannot be among them.
        ranked = rank(s, candidates(s, st, hw), lambda c: predict(s, c), bound=bound, need=3, memory=memory)
        r = roles(s, st)
        for cfg in ranked[:3]:
            try:
                s = apply(s, cfg)
            except PolytileError:
                continue
            chosen.append(cfg)
            caches = hw.cache_levels()
            s = zero_per_block(s, cfg, r, min(caches[-1].size_bytes, L3_SHARE) if caches else 0)
            break
    for cfg in chosen:
        s = fuse_epilogues(s, cfg)
    return s, chosen


def memory_time(prediction) -> float:
    """:func:`rank`'s last tie-break: a ``cost.Prediction``'s memory time, summed over the levels.

    >>> # memory_time(cost.predict_config(s, cfg, hw)) -> 0.0072  (seconds)
    """
    return sum(prediction.level_time_s.values())


#: Reduction steps per accumulator load and store past which a longer segment is no tie-break (its
#: accumulator traffic under 1% of the block's loads): a 3x3 conv of 256 -> 32 channels took kc = 32
#: (288 steps, its slivers spilling L1) over kc = 16 (144, the model's least memory time), 0.67 against
#: 0.33 ms (Zen 5, exploratory).  A GEMM's segments (192, 256) both pass it.
DEEP_ENOUGH = 128

# Predictions this close (relative) are a tie: the model sees no difference
# (typically all compute-bound), so the choice falls to packing (below).
TIE = 0.02


def rank(s: Schedule, configs: Sequence[TileConfig], predict, *, bound=None,
         need: Optional[int] = None, memory=None) -> List[TileConfig]:
    """Configurations best first: by predicted time, ties broken by how well packing serves them.

    Among configurations predicted within :data:`TIE` of each other, prefer
    wider vectors (:func:`_first_key`; only narrow candidates differ), then
    (0) more of the iterations in full register blocks (the edges run the
    generic loops, much slower than the model's average assumes), (1) more
    operands packed (one contiguous stream per operand instead of a
    stream per row), (2) fewer parallel regions (:func:`regions`: every fork
    and join waits for the slowest thread, and a panel packed outside the
    parallel loop is a serial step; on a shared machine these dominate),
    (3) output blocks not walked down rows that alias in the caches
    (:func:`output_rows_alias`: the column blocks innermost where the output's
    rows are a whole number of pages long), (4) a longer reduction segment
    ``kc`` (the accumulator block is loaded and stored once per ``kc`` steps, and BLIS sizes ``kc`` so the ``kc x nr``
    sliver fills L1 -- the candidates already respect that), (5) fewer
    elements copied into packed panels over the run, (6) with ``memory`` (a
    configuration's predicted memory time, summed over the levels), the least:
    the model overlaps memory traffic with compute perfectly, the cores do
    not, so of two configurations the roofline calls compute-bound the one
    that moves less data runs faster (a conv2d 1x28x28x128 whose filter
    slivers stay in L1 across all its rows, not only six: 0.64 vs 0.68 ms
    best-of on the AVX-512 Xeon VM).  The time prediction,
    already at the compute bound for such configurations, does not tell these
    apart; measurements do (see benchmarks/bench_gemm.py).

    With ``bound`` (a lower bound of ``predict``, e.g. ``cost.config_bound``) and ``need``, only the
    first ``need`` entries are returned, the same as the full ranking's, and configurations the
    bound rules out are never predicted.
    """
    if bound is not None and need is not None:
        return _rank_bounded(s, configs, predict, bound, need, memory)
    timed = [(predict(c), k, c) for k, c in enumerate(configs)]
    timed.sort(key=lambda x: (x[0], x[1]))
    out: List[TileConfig] = []
    rest = timed
    while rest:
        best = rest[0][0]
        tie = [x for x in rest if x[0] <= best * (1 + TIE)]
        rest = [x for x in rest if x[0] > best * (1 + TIE)]
        out += _break_tie(s, tie, memory=memory)
    return out


def _break_tie(s: Schedule, tie: List[Tuple[float, int, TileConfig]], need: Optional[int] = None,
               memory=None) -> List[TileConfig]:
    """``tie`` ordered by :func:`structure_key` (then time, then position); with ``need``, only its first
    ``need``: the key is lexicographic, so a configuration whose first entry is worse than the
    ``need``-th best first entry cannot be among them and is spared its packing plan."""
    if len(tie) == 1:
        return [tie[0][2]]
    if need is not None and len(tie) > need:
        first = [_first_key(s, x[2]) for x in tie]
        cut = sorted(first)[need - 1]
        tie = [x for x, f in zip(tie, first) if f <= cut]
    out = [x[2] for x in sorted(tie, key=lambda x: (structure_key(s, x[2]), memory(x[2]) if memory else 0.0,
                                                      x[0], x[1]))]
    return out if need is None else out[:need]


def _rank_bounded(s: Schedule, configs: Sequence[TileConfig], predict, bound, need: int,
                  memory=None) -> List[TileConfig]:
    """The first ``need`` entries of ``rank(s, configs, predict)``, predicting only
    configurations whose lower ``bound`` could place them there.

    Exact: configurations are predicted in order of their bound until the next bound exceeds the
    best unplaced prediction by more than :data:`TIE`; every configuration left has a time above
    that, so it is neither the best nor in its tie group.  Then the tie group is placed as
    :func:`rank` places it, and the same repeats for the next group.
    """
    order = sorted(((bound(c), k, c) for k, c in enumerate(configs)), key=lambda x: (x[0], x[1]))
    pos, pending, out = 0, [], []
    while len(out) < need and (pending or pos < len(order)):
        if not pending:
            _, k, c = order[pos]
            pending.append((predict(c), k, c))
            pos += 1
        while pos < len(order) and order[pos][0] <= min(pending)[0] * (1 + TIE):
            _, k, c = order[pos]
            pending.append((predict(c), k, c))
            pos += 1
        best = min(pending)[0]
        tie = sorted((x for x in pending if x[0] <= best * (1 + TIE)), key=lambda x: (x[0], x[1]))
        pending = [x for x in pending if x[0] > best * (1 + TIE)]
        out += _break_tie(s, tie, need - len(out), memory)
    return out


def structure_key(s: Schedule, cfg: TileConfig) -> Tuple:
    """Sort key of :func:`rank`'s tie-break: vector width, full blocks, packed operands, parallel regions,
    aliasing output rows, kc, copying."""
    r = roles(s, cfg.stmt)
    if r is None:
        return (0, 0.0, 0, 1, 0.0, 0, 0)
    plans = pack_plan(s, cfg) if cfg.pack else []
    copied = sum(p.elements * p.copies for p in plans)
    depth = min(cfg.kc, r.extents[cfg.k]) * inner_points(r)  # a convolution's ky, kx run inside the block
    return _first_key(s, cfg) + (-len(plans), regions(s, cfg), output_rows_alias(s, cfg), -min(depth, DEEP_ENOUGH),
                                 copied)


def output_rows_alias(s: Schedule, cfg: TileConfig) -> float:
    """1.0 when ``cfg`` walks its register blocks down output rows that are a whole number of pages long,
    else 0.0 (a :func:`structure_key` entry; :func:`aliased_rows`).

    Such rows all start at the same offset in their pages, so a column strip of blocks falls into a
    few cache sets of every level: the output blocks, reloaded once per reduction segment, evict each
    other and the packed panels.  Columns innermost (``inner="ij"``) the blocks follow each other along
    the rows instead.  The same for every rows-innermost configuration of a statement, so it only sets
    the two arrangements apart, where the model's footprints (bytes, not where they lie) called them
    alike: SGEMM 2048^3, 57.9 and 57.7 ms predicted, 317 against 284 GFLOP/s median measured (Xeon VM
    with AVX-512, exploratory, interleaved).

    >>> # SGEMM 2048^3 float32 (rows of 8 KiB): rows innermost 1.0, columns innermost 0.0; 1500^3: 0.0
    """
    r = roles(s, cfg.stmt)
    if r is None or not cfg.regtile or cfg.inner == "ij":
        return 0.0
    return 1.0 if aliased_rows(s, r) else 0.0


def aliased_rows(s: Schedule, r: Roles) -> bool:
    """Whether the output rows of ``r``'s statement -- the stride of the axis its row loop ``r.i`` walks --
    are a whole number of pages, the column loop ``r.j`` running along the last axis (see
    :func:`output_rows_alias`).

    >>> # C[2048][2048] float32: True;  C[1500][1500]: False;  C[4096][64]: False (one 256-byte row per page)
    """
    st = s.scop.statement(r.stmt)
    out = s.scop.array(st.body.array)
    index = st.body.index
    axes = [d for d, e in enumerate(index) if r.i in B.iter_names(e)]
    if len(axes) != 1 or not index or r.j not in B.iter_names(index[-1]):
        return False
    stride = np.dtype(out.dtype).itemsize * math.prod(out.shape[axes[0] + 1:])
    return stride > 0 and stride % PAGE_BYTES == 0


def _first_key(s: Schedule, cfg: TileConfig) -> Tuple[int, float]:
    """The first entries of :func:`structure_key` (cheap: no packing plan): wider vectors, then full blocks.

    Vectors narrower than a full register (:func:`narrow_widths`) tie where the A stream bounds the
    time; the wider runs fewer multiply-adds per column (``ceil(N / w)``, edge blocks included) and
    won: 1024^2 @ 1024x4 float32 on 4 lanes 0.105 ms, on 2 lanes 0.15 (Zen 5).  Full-width
    configurations all have the same lanes, so their order is unchanged.
    """
    return (-cfg.lanes, _full_blocks_key(s, cfg))


def _full_blocks_key(s: Schedule, cfg: TileConfig) -> float:
    """The first entry of :func:`structure_key` (cheap: no packing plan)."""
    from ..cost.nest import edge_blocks, regtile_parts

    r = roles(s, cfg.stmt)
    if r is None:
        return 0.0
    full = 1.0
    if cfg.regtile:
        E = r.extents
        weight, plain = regtile_parts((E[r.i], cfg.mc, cfg.mr), (E[r.j], cfg.nc, cfg.nr), "vector", cfg.lanes,
                                      edge_blocks(s.scop.statement(r.stmt), E[r.j], cfg.nr, r.i, r.j))
        if not plain:
            # Edge blocks run the micro-kernel: what counts is the share of its work not thrown away, to
            # a thousandth (the time prediction already has it, within the ranking's TIE).
            return -round(1.0 / weight, 3)
        full = weight
    return -round(full, 2)


def regions(s: Schedule, cfg: TileConfig) -> int:
    """How many times ``cfg``'s nest enters its parallel loop (trips of the loops around it)."""
    r = roles(s, cfg.stmt)
    if r is None or not cfg.parallel:
        return 1
    trip = _trips(r, cfg)
    n = 1
    for name in blocked_order(r, cfg):
        if name == cfg.parallel:
            return n
        n *= trip.get(name, 1)
    return n
