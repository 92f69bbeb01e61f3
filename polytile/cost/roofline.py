"""The nest the cost model evaluates, and its roofline: compute time and traffic per memory level.

A :class:`_Nest` is one statement's loop nest reduced to what the model
needs (trip counts, footprints per depth, marks, the kinds of code it runs);
:func:`_evaluate` turns nests into a :class:`Prediction`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..hardware import HardwareError, dtype_bytes
from .constants import (CHAIN_SLACK, EFF_REDUCTION, EFF_SCALAR, EFF_VECTOR, FIT, FMA_LATENCY, KERNEL_EFF, LOAD_PORTS,
                        OMP_REGION_S, OPERAND_FEED, PLAIN_VECTOR_BYTES, VECTOR_CHAINS, VECTOR_STARTUP)


@dataclass(frozen=True)
class Prediction:
    """A predicted run time and where it comes from (see docs/cost-model.md)."""

    time_s: float  # max(compute_s, max over levels of level_time_s)
    compute_s: float
    traffic: Dict[str, float]  # bytes level X delivers to the level inside it
    level_time_s: Dict[str, float]  # traffic[X] / bandwidth(X)
    flops: float
    parallelism: int  # threads usefully busy, min(cores, parallel trip count), in the slowest nest
    notes: Tuple[str, ...] = ()

    @property
    def bound(self) -> str:
        """What limits the prediction: ``"compute"`` or the level name."""
        worst = max(self.level_time_s.items(), key=lambda kv: kv[1], default=(None, 0.0))
        return "compute" if worst[0] is None or self.compute_s >= worst[1] else worst[0]


# ---------------------------------------------------------------------------
# The nest the model evaluates
# ---------------------------------------------------------------------------


@dataclass
class _Nest:
    """One statement's loop nest as the model sees it.

    ``fp_el[ℓ]`` / ``fp_ln[ℓ]``: bytes per array of the tile at depth ℓ
    (ℓ = 0..L) in elements / in cache lines; ``trips[ℓ]`` per loop.
    """

    stmt: str
    names: List[str]
    trips: List[float]
    fp_el: List[Dict[str, int]]
    fp_ln: List[Dict[str, int]]
    written: str
    flops: float
    dtype: str
    parallel: Optional[int] = None  # depth of the parallel loop
    regtile: Optional[Tuple[int, int, int]] = None  # (mr, nr, lanes)
    full_fraction: float = 1.0  # instances at the micro-kernel rate (partial blocks it runs count whole)
    # The plain (not register-blocked) code: (fraction of the instances, kind, iterations of its
    # innermost loop, independent vector updates per reduction step); kind is "vector",
    # "reduction" or "scalar".  A regtile nest's partial blocks are plain code.
    plain: List[Tuple[float, str, float, float]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    # Per conflict-prone cache level (see PAGE_BYTES): (ways, f(depth, array) = sets the array's
    # lines in the tile at that depth use), asked only where the answer matters.
    sets: Dict[str, Tuple[int, Callable[[int, str], int]]] = field(default_factory=dict)
    itemsize: int = 4  # of the written array


def _depends(fp: Sequence[Mapping[str, int]], array: str, e: int) -> bool:
    """Does ``array``'s footprint change with loop ``e`` (``F_a(e) > F_a(e+1)``)?"""
    return fp[e].get(array, 0) > fp[e + 1].get(array, 0)


def _peak_per_core(hw, dtype: str) -> float:
    """FLOP/s of one core for ``dtype`` (integer types use the float peak of their width)."""
    try:
        peak = hw.peak_gflops(dtype)
    except HardwareError:
        peak = hw.peak_gflops("float64" if dtype_bytes(dtype) >= 8 else "float32")
    return peak * 1e9 / hw.cores


def _lanes(hw, dtype: str) -> int:
    try:
        return hw.vector_lanes(dtype)
    except HardwareError:
        return 1


def _plain_lanes(hw, dtype: str) -> int:
    """Elements per vector in gcc-vectorised code (at most PLAIN_VECTOR_BYTES wide)."""
    try:
        item = dtype_bytes(dtype)
    except HardwareError:
        item = 4
    return max(1, min(_lanes(hw, dtype), PLAIN_VECTOR_BYTES // item))


def _chains(trips: Sequence[float], fp_el: Sequence[Mapping[str, int]], written: str, itemsize: int,
            vec: int) -> float:
    """Independent vector updates per step of the innermost reduction loop (inf when there is none).

    The reduction loop is the innermost loop ``e`` with more than one
    iteration that leaves the written cells unchanged (``F_w(e) = F_w(e+1)``);
    each of its steps updates the ``F_w(e+1)`` cells the loops inside it write.
    """
    for e in range(len(trips) - 1, -1, -1):
        if trips[e] > 1.0 + 1e-9 and fp_el[e].get(written, 0) == fp_el[e + 1].get(written, 0):
            cells = fp_el[e + 1].get(written, 0) / max(itemsize, 1)
            return max(cells / vec, 1.0)
    return math.inf


def _plain_efficiency(kind: str, inner_trips: float, chains: float, hw, dtype: str) -> float:
    """Fraction of peak of plain loop code (see docs/cost-model.md)."""
    lanes = _lanes(hw, dtype)
    vec = _plain_lanes(hw, dtype)
    fu = float(getattr(hw, "fma_units_per_core", 2))
    if kind == "vector" and inner_trips > vec:
        vectors = inner_trips / vec
        return EFF_VECTOR * vectors / (vectors + VECTOR_STARTUP) * min(1.0, chains / VECTOR_CHAINS)
    if kind == "reduction":
        return EFF_REDUCTION / (lanes * fu)
    # strided, or too short for gcc to vectorise (one vector or less): scalar code
    return EFF_SCALAR / lanes


def _kernel_efficiency(regtile: Tuple[int, int, int], hw, dtype: str) -> float:
    """Fraction of peak of the register micro-kernel on full blocks.

    Peak counts full-width vectors: a block of ``v``-lane vectors on a ``lanes``-wide unit does
    ``v / lanes`` of the work per multiply-add, so it reaches at most that fraction.  Without the
    factor a 16-byte block looked as fast as a 64-byte one with more rows, and the model chose it
    over 32-byte blocks (float64 1024^2 @ 1024x4: 0.84x of numpy against 2.4x).

    >>> # 8 x 32 floats on 16 lanes: 0.9 * 8 / 8.5 = 0.85;  8 x 8 on 8 of 16 lanes: half of its rate
    """
    fu = float(getattr(hw, "fma_units_per_core", 2))
    mr, nr, v = regtile
    nv = max(1.0, nr / max(v, 1))
    fma = mr * nv / fu
    item = dtype_bytes(dtype)
    feed = (nv * v + mr) * item / (_l1_bytes_per_cycle(hw) * OPERAND_FEED)
    cycles = max(fma, (nv + mr) / LOAD_PORTS, feed, FMA_LATENCY + CHAIN_SLACK)
    return KERNEL_EFF * fma / cycles * min(1.0, v / _lanes(hw, dtype))


def _l1_bytes_per_cycle(hw) -> float:
    """L1's load bandwidth per core and cycle: the descriptor's, else two full-width loads.

    >>> # x86-avx512 (256 GB/s at 2.0 GHz): 128.0;  x86-avx2 (243.2 GB/s at 3.8 GHz): 64.0
    """
    caches = hw.cache_levels()
    l1 = caches[0] if caches else None  # a descriptor of registers and DRAM alone has none
    if l1 is not None and l1.bandwidth_gbs and hw.clock_ghz > 0:
        return hw.bandwidth(l1) / max(1, hw.cores) / (hw.clock_ghz * 1e9)  # the machine's, per core
    return LOAD_PORTS * hw.simd_width_bits / 8


def _evaluate(nests: Sequence[_Nest], hw) -> Prediction:
    """Roofline of each nest (see docs/cost-model.md); the nests run one after the other."""
    levels = list(hw.memory)
    names = [lv.name for lv in levels[1:]]
    traffic = {n: 0.0 for n in names}
    level_time = {n: 0.0 for n in names}
    total_time = compute_total = flops_total = 0.0
    par_main, t_main = 1, -1.0
    notes: List[str] = []
    for nest in nests:
        t, c, tr, lt, par, nn = _evaluate_one(nest, hw, levels)
        total_time += t
        compute_total += c
        flops_total += nest.flops
        if t > t_main:  # the parallelism reported is the slowest nest's
            par_main, t_main = par, t
        for k in names:
            traffic[k] += tr.get(k, 0.0)
            level_time[k] += lt.get(k, 0.0)
        notes += nn
    return Prediction(total_time, compute_total, traffic, level_time, flops_total, par_main, tuple(notes))


def _parallel_split(nest: _Nest, cores: int) -> Tuple[float, int, float, Optional[float]]:
    """``(speedup, threads, regions, per_thread)`` of the nest's parallel loop: T iterations statically
    scheduled on min(cores, ⌈T⌉) threads (``per_thread`` None when nothing runs in parallel)."""
    if nest.parallel is None or nest.trips[nest.parallel] <= 1.0 + 1e-9:
        return 1.0, 1, 0.0, None
    p = nest.parallel
    T = nest.trips[p]
    n = math.ceil(T - 1e-9)  # iterations, the last one possibly partial
    threads = min(cores, n)
    # The busiest thread's chunk: ⌈n / threads⌉ iterations, all full unless it is the only chunk.
    per_thread = min(math.ceil(n / threads), T)
    return T / per_thread, threads, math.prod(nest.trips[:p]), per_thread


def _compute_time(nest: _Nest, hw, speedup: float, threads: int, regions: float, notes: Optional[List[str]]) -> float:
    """Compute: full register blocks at the kernel's rate, each part of the plain code at its own,
    plus the parallel regions' fork/join.  A lower bound of the nest's predicted time (which is the
    larger of this and the slowest memory level's), so rankers may skip nests it already rules out."""
    peak = _peak_per_core(hw, nest.dtype) * speedup
    compute = 0.0
    if nest.regtile is not None:
        f = nest.full_fraction
        eff = _kernel_efficiency(nest.regtile, hw, nest.dtype)
        compute += nest.flops * f / (peak * eff)
        if notes is not None:
            # Above 100% when partial blocks run the micro-kernel at a full block's cost (cost.nest.regtile_parts).
            notes.append(f"regtile {nest.regtile[0]}x{nest.regtile[1]}: {100 * f:.0f}% of instances' work at its rate, "
                         f"kernel at {100 * eff:.0f}% of peak")
    for frac, kind, inner, chains in nest.plain:
        if frac <= 0:
            continue
        eff = _plain_efficiency(kind, inner, chains, hw, nest.dtype)
        compute += nest.flops * frac / (peak * eff)
        if notes is not None:
            notes.append(f"plain loops on {100 * frac:.0f}% of instances ({kind}, innermost {inner:.4g} iterations, "
                         f"{chains:.3g} vector chains) at {100 * eff:.2g}% of peak")
    return compute + (regions * OMP_REGION_S if threads > 1 else 0.0)


def compute_bound(nest: _Nest, hw) -> float:
    """The compute term of the nest's prediction alone (no footprints needed): never above
    :func:`_evaluate`'s time for the same nest."""
    speedup, threads, regions, _ = _parallel_split(nest, max(1, int(getattr(hw, "cores", 1))))
    return _compute_time(nest, hw, speedup, threads, regions, None)


def _evaluate_one(nest: _Nest, hw, levels) -> tuple:
    L = len(nest.trips)
    trips = list(nest.trips)
    cores = max(1, int(getattr(hw, "cores", 1)))
    notes = list(nest.notes)

    fp_ln = nest.fp_ln
    fp_el = nest.fp_el
    speedup, threads, regions, per_thread = _parallel_split(nest, cores)
    if per_thread is not None:
        p = nest.parallel
        T = trips[p]
        # One thread's nest: its share of loop p; footprints outside p shrink for the arrays that depend on p.
        share = per_thread / T
        trips[p] = per_thread
        fp_ln = _share(fp_ln, p, share)
        fp_el = _share(fp_el, p, share)
        notes.append(f"parallel {nest.names[p]}: {T:.4g} iterations on {threads} thread(s), speedup {speedup:.3g}")
    elif nest.parallel is not None:
        notes.append(f"parallel {nest.names[nest.parallel]} has one iteration: runs on one thread")
    compute = _compute_time(nest, hw, speedup, threads, regions, notes)

    # Traffic, level by level (levels[0] is the register file).
    traffic: Dict[str, float] = {}
    level_time: Dict[str, float] = {}
    n_tiles = [1.0]
    for t in trips:
        n_tiles.append(n_tiles[-1] * t)  # n_tiles[ℓ] = Π_{e<ℓ} trips(e): number of tiles at depth ℓ
    for k in range(1, len(levels)):
        inner, outer = levels[k - 1], levels[k]
        if k == 1:
            if nest.regtile is not None and L >= 2:
                d = L - 2  # the accumulator block stays in registers across the reduction loops
            else:
                d = L  # one instance; what the innermost loop does not change is hoisted
            moved = 0.0
            for a, fa in fp_el[d].items():
                e_a = max((e for e in range(d) if _depends(fp_el, a, e)), default=-1)
                reloads = math.prod(trips[:e_a + 1]) if e_a >= 0 else 1.0
                moved += fa * reloads * (2 if a == nest.written else 1)
            where = f"depth {d}" + (f" ({nest.names[d]})" if d < L else "")
        else:
            cap = inner.size_bytes if inner.per_core else inner.size_bytes / threads
            conflict = nest.sets.get(inner.name)

            def held(l: int) -> Dict[str, float]:
                """The lines the cache must keep across an iteration at depth ``l``: inside a register
                tile's reduction loop (``l >= L - 2``) the output block is in the registers, loaded
                before it and stored after it, not read from the cache at every step.  Counted there,
                12 rows 4 KiB apart took every way of their L1 sets and 12x32 blocks were predicted to
                stream from L2 at every step: SGEMM 3072x1024x512 100 ms predicted, 11 ms measured."""
                if nest.regtile is not None and L >= 2 and l >= L - 2:
                    return {a: v for a, v in fp_ln[l].items() if a != nest.written}
                return fp_ln[l]

            def fits(l: int) -> bool:
                if sum(held(l).values()) > FIT * cap:
                    return False
                if conflict is not None:
                    # An array whose lines fall into s sets holds at most s * ways of them
                    # (only arrays with more than FIT * ways lines can fail this).
                    ways, sets_of = conflict
                    for a, size in held(l).items():
                        lines = size / inner.line_bytes
                        if lines > FIT * ways and lines > FIT * sets_of(l, a) * ways:
                            return False
                return True

            d = next((l for l in range(L + 1) if fits(l)), L)
            moved = 0.0
            for a in fp_ln[d]:
                if d == 0:
                    fa, reps = fp_ln[0][a], 1.0
                else:
                    fa, reps = fp_ln[d - 1][a], n_tiles[d - 1]
                moved += fa * reps * (2 if a == nest.written else 1)
            where = f"depth {d}" + (f" ({nest.names[d]})" if d < L else " (one instance)")
        total = moved * threads
        if outer.bandwidth_gbs is None:
            continue
        bw = hw.bandwidth(outer)
        if outer.per_core:
            bw = bw * threads / cores
        traffic[outer.name] = total
        level_time[outer.name] = total / bw
        notes.append(f"{outer.name} -> {inner.name}: tile at {where} fits; {total / 1e6:.4g} MB, "
                     f"{1e3 * total / bw:.3g} ms")
    worst = max(level_time.values(), default=0.0)
    return max(compute, worst), compute, traffic, level_time, threads, notes


def _share(fp: Sequence[Mapping[str, int]], p: int, share: float) -> List[Dict[str, int]]:
    """Footprints of one thread's part of loop ``p``: arrays that depend on ``p`` scale by ``share`` outside it."""
    out = [dict(x) for x in fp]
    for a in fp[p]:
        if _depends(fp, a, p):
            for l in range(p + 1):
                inner = fp[p + 1].get(a, 0)
                out[l][a] = max(inner, int(round(fp[l][a] * share)))
    return out
