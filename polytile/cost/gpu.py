"""The GPU cost model: occupancy, global traffic after promotion, and a predicted time per kernel.

Pure functions of (Scop, schedule, GPU mapping, :class:`~polytile.hardware.GPUDescriptor`);
nothing is compiled or run.  :func:`choose` uses it to pick, per kernel, the
block size, the reduction steps (tile sizes) and whether to stage inputs in
shared memory, so those choices follow the descriptor.

Occupancy (:func:`occupancy`)
-----------------------------
As CUDA's occupancy calculator: resident blocks per SM are the fewest allowed
by threads (``max_threads_per_sm / threads``, threads rounded up to warps),
blocks (``max_blocks_per_sm``), registers (per warp ``registers x warp``
rounded up to :data:`REG_ALLOC_UNIT`, out of ``registers_per_sm``) and shared
memory (per block its tiles plus the runtime's reservation, which is the
descriptor's ``shared_memory_per_sm - shared_memory_per_block``: 1 KiB on
sm_90, out of ``shared_memory_per_sm``).  Occupancy is resident warps over
``max_threads_per_sm / warp``.  A block needing more threads, registers per
thread or shared memory per block than allowed raises
:class:`~polytile.scheduling.gpu.OutOfResources`.

Registers (:func:`registers`) are estimated from the mapping: a fixed
:data:`REG_BASE` (indices, bounds, the block/thread decode), two per array
pointer, per statement instance one 32-bit word per 4 bytes of every operand
loaded (times :data:`UNROLL` when a sequential loop runs in the thread: nvcc
unrolls it) and of the accumulator of a reduction, and two per sequential
loop; a promoted kernel needs no more (its step counters replace the
operands' 64-bit addresses, which become 32-bit shared ones: ptxas agrees
within a few registers on matmul and conv2d).  ptxas's
count (``nvcc -Xptxas -v``; :func:`polytile.targets.cuda.ptxas_registers`)
replaces the estimate when given.

Work and traffic
----------------
For each statement ``S`` of a kernel, ``N_S = |D_S|`` instances (product of
extents for a box, else isl's count for small domains, else the bounding box).
A *warp box* is the first 32 threads of the first block: the x loop over
``min(block_x, 32)`` values, y over ``32 / block_x`` rows when block_x < 32,
every other iterator at one value (the domain's lexicographic minimum); its
instances are the active lanes ``λ``, so ``N_S / λ`` warp-instructions run.

* flops: ``ops(S) x N_S`` (``+ - * /``, calls and the reduction, as the CPU model);
* on-chip (L1/shared wavefronts of 128 bytes, one per clock per SM): per
  warp-instruction and array, ``max(reads of the array, 128-byte lines of the
  isl image of the warp box)``;
* global traffic (bytes the SMs request, in 32-byte sectors): per
  warp-instruction, the 32-byte sectors of the image of the warp box, for
  every array not promoted -- no L1 reuse is assumed, so an unpromoted kernel
  with reuse is pessimistic, which is the point of promoting; the output of a
  reduction once per thread (read and written: its accumulator lives in a
  register); a promoted array once per block and step: its tile (isl's
  footprint, :func:`~polytile.scheduling.gpu.promotion_plan`) rounded up to
  sectors per row, plus the stores into shared memory as wavefronts.

Time
----
With ``B`` launched blocks, ``r = min(blocks/SM, ceil(B / SMs))`` resident
blocks on ``min(SMs, B)`` busy SMs, ``waves = ceil(B / (busy x r))`` and
latency hiding ``h = min(1, resident warps / (SATURATION x max warps))``,
one wave of one SM takes::

    max(r x flops_b / (peak / SMs x lanes/32),  r x wavefronts_b / clock,  r x traffic_b / (bandwidth / SMs)) / h

(``_b``: per launched block), and the kernel ``waves x`` that plus
:data:`LAUNCH_S` per launch (host loops multiply launches).  It is a ranking
model -- L2 hits, instruction overheads and bank conflicts are not in it.

>>> # ests = [estimate(scop, sched, m, hardware.load("nvidia-h100")) for m in maps]
>>> # ests[1].occupancy.fraction, ests[1].traffic_bytes, ests[1].time_s
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import islpy as isl

from .footprints import ops_per_instance
from ..poly import body as B
from ..scheduling.core import Schedule
from ..scheduling.gpu import (GpuLimits, GpuMapping, OutOfResources, SharedPlan, describe as describe_mappings,
                           kernel_slots, map_slot, promotion_plan, reduction_extents, step_candidates)

#: Registers are allocated per warp in units of 256 (occupancy calculator, compute capability 5.0 to 9.0).
REG_ALLOC_UNIT = 256
#: Registers every kernel needs besides its data: indices, bounds, the grid decode.
REG_BASE = 16
#: How many iterations of a sequential loop nvcc unrolls (operands of each stay live at once).
UNROLL = 4
#: Fraction of an SM's maximum warps that hides the latency of its pipes and memory (a common rule
#: of thumb on Volta..Hopper); below it throughput falls in proportion.
SATURATION = 0.5
#: Seconds per kernel launch (host overhead and the grid-wide drain between kernels).
LAUNCH_S = 4e-6
#: Bytes of one L1/shared wavefront (32 banks x 4 bytes) and of one global-memory sector.
WAVEFRONT_BYTES = 128
SECTOR_BYTES = 32
#: Block sizes :func:`choose` considers.
THREADS = (32, 64, 128, 256, 512, 1024)
#: Instances above which a non-box domain is measured by its bounding box instead of counted.
EXACT_INSTANCES = 1 << 20


# ---------------------------------------------------------------------------
# Occupancy
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM and what limits them.

    >>> # occupancy(h100, threads=256, registers=64, shared_bytes=0)
    >>> # -> Occupancy(blocks_per_sm=4, warps_per_sm=32, fraction=0.5, limiter='registers')
    """

    blocks_per_sm: int
    warps_per_sm: int
    fraction: float
    limiter: str


def occupancy(hw: Any, threads: int, registers: int, shared_bytes: int = 0) -> Occupancy:
    """Resident blocks/warps per SM for blocks of ``threads`` using ``registers`` each and ``shared_bytes``.

    >>> # 128 threads, 32 registers, 16 KiB shared on an H100: 233472 // (16384 + 1024) = 13 blocks,
    >>> # 52 of 64 warps -> Occupancy(13, 52, 0.8125, 'shared memory')
    """
    if threads > hw.max_threads_per_block:
        raise OutOfResources("threads per block", threads, hw.max_threads_per_block)
    if registers > hw.registers_per_thread:
        raise OutOfResources("registers per thread", registers, hw.registers_per_thread)
    if shared_bytes > hw.shared_memory_per_block_bytes:
        raise OutOfResources("bytes of shared memory per block", shared_bytes, hw.shared_memory_per_block_bytes)
    warp = hw.warp_size
    warps = -(-max(1, threads) // warp)
    limits = {"threads": hw.max_threads_per_sm // (warps * warp), "blocks": hw.max_blocks_per_sm}
    per_warp = -(-max(1, registers) * warp // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    limits["registers"] = hw.registers_per_sm // (per_warp * warps)
    reserve = max(0, hw.shared_memory_per_sm_bytes - hw.shared_memory_per_block_bytes)
    limits["shared memory"] = hw.shared_memory_per_sm_bytes // (shared_bytes + reserve) if shared_bytes + reserve else 1 << 30
    limiter = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    blocks = limits[limiter]
    if blocks < 1:
        raise OutOfResources("registers per SM" if limiter == "registers" else limiter, 0, 0,
                             f"a block of {threads} threads with {registers} registers")
    max_warps = hw.max_threads_per_sm // warp
    return Occupancy(blocks, blocks * warps, blocks * warps / max_warps, limiter)


# ---------------------------------------------------------------------------
# Per-statement facts
# ---------------------------------------------------------------------------


def _bounds(dom: isl.Set, j: int) -> Tuple[int, int]:
    n = dom.dim(isl.dim_type.set)
    proj = dom.project_out(isl.dim_type.set, j + 1, n - j - 1).project_out(isl.dim_type.set, 0, j)
    lo = proj.lexmin().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    hi = proj.lexmax().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    return int(lo), int(hi)


def instances(st) -> int:
    """``|D|``: product of extents for a box, isl's count when small, else the bounding box."""
    dom = st.domain
    if dom.is_empty():
        return 0
    n = dom.dim(isl.dim_type.set)
    if n == 0:
        return 1
    bounds = [_bounds(dom, j) for j in range(n)]
    vol = math.prod(hi - lo + 1 for lo, hi in bounds)
    box = isl.Set.universe(dom.get_space())
    for j, (lo, hi) in enumerate(bounds):
        box = box.lower_bound_val(isl.dim_type.set, j, isl.Val.int_from_si(dom.get_ctx(), lo))
        box = box.upper_bound_val(isl.dim_type.set, j, isl.Val.int_from_si(dom.get_ctx(), hi))
    if dom.is_equal(box) or vol > EXACT_INSTANCES:
        return vol
    return int(dom.count_val().to_python())


def _itemsize(dtype: str) -> int:
    import numpy as np

    return int(np.dtype(dtype).itemsize)


def _accesses(st) -> Dict[str, List[isl.Map]]:
    """Per array read by ``st``: one access map per distinct read."""
    out: Dict[str, List[isl.Map]] = {}
    seen = set()
    loads = list(B.loads(st.body.value))
    for e in st.body.index:
        loads.extend(B.loads(e))
    for ld in loads:
        if (ld.array, ld.index) in seen:
            continue
        seen.add((ld.array, ld.index))
        out.setdefault(ld.array, []).append(st.access_map(ld.array, ld.index))
    return out


def _lines(img: isl.Set, item: int, line: int) -> int:
    """``line``-byte lines covering the cells of ``img`` (the last index grouped into lines)."""
    if img.is_empty():
        return 0
    nd = img.dim(isl.dim_type.set)
    per = max(1, line // item)
    if nd and per > 1:
        xs = [f"c{d}" for d in range(nd)]
        name = img.get_tuple_name()
        lm = isl.Map(f"{{ {name}[{', '.join(xs)}] -> {name}[{', '.join(xs[:-1] + [f'floor({xs[-1]}/{per})'])}] }}")
        img = img.apply(lm)
    return int(img.count_val().to_python())


def _warp_set(s: Schedule, st, m: GpuMapping, warp: int) -> isl.Set:
    """The first warp's instances of ``st``: x over min(block_x, warp) values, y filling the warp, rest fixed."""
    dom = st.domain
    if dom.dim(isl.dim_type.set) == 0:
        return dom
    names = s.table[st.name].names
    first = dom.lexmin()
    point = first.sample_point() if not first.is_empty() else None
    ranges: Dict[str, Tuple[int, int]] = {}
    lanes = warp
    for a in m.axes:
        width = max(1, min(a.block, lanes))
        lp = a.loops[-1]  # the fastest-varying loop of the axis
        it = names[lp.dim] if lp.dim < len(names) else None
        if it in st.iters:
            j = st.iters.index(it)
            lo = point.get_coordinate_val(isl.dim_type.set, j).to_python() if point is not None else lp.lo
            ranges[it] = (int(lo), int(lo) + width - 1)
        lanes = max(1, lanes // width)
    ws = dom
    for j, it in enumerate(st.iters):
        if it in ranges:
            lo, hi = ranges[it]
        elif point is not None:
            lo = hi = int(point.get_coordinate_val(isl.dim_type.set, j).to_python())
        else:
            continue
        ws = ws.lower_bound_val(isl.dim_type.set, j, isl.Val.int_from_si(dom.get_ctx(), lo))
        ws = ws.upper_bound_val(isl.dim_type.set, j, isl.Val.int_from_si(dom.get_ctx(), hi))
    return ws


# ---------------------------------------------------------------------------
# Estimates
# ---------------------------------------------------------------------------


def registers(scop, m: GpuMapping) -> int:
    """Estimated 32-bit registers per thread of kernel ``m`` (see the module docstring).

    >>> # matmul's contraction, float32, no promotion: 16 + 2*3 + (2 operands * 4 + 1 accumulator) + 2*1 = 33
    """
    arrays = {a.name: a for a in scop.arrays}
    used = set()
    words = 0
    # nvcc unrolls a sequential loop (by UNROLL), keeping that many copies of its operands live.
    unroll = UNROLL if m.sequential else 1
    for name in m.statements:
        st = scop.statement(name)
        used.add(st.body.array)
        for ld in B.loads(st.body.value):
            used.add(ld.array)
            words += max(1, _itemsize(ld.dtype) // 4) * unroll
        if st.body.reduce is not None:
            words += max(1, _itemsize(arrays[st.body.array].dtype) // 4) if st.body.array in arrays else 1
    seq = len(m.sequential)
    n = REG_BASE + 2 * len(used) + words + 2 * seq
    return int(n)


@dataclass(frozen=True)
class GpuEstimate:
    """The model's view of one kernel (see the module docstring for every term)."""

    mapping: GpuMapping
    registers: int
    shared_bytes: int
    occupancy: Occupancy
    flops: float
    wavefronts: float
    traffic_bytes: float
    launches: int
    compute_s: float
    onchip_s: float
    memory_s: float
    time_s: float

    @property
    def bound(self) -> str:
        terms = {"compute": self.compute_s, "on-chip loads": self.onchip_s, "global memory": self.memory_s}
        return max(terms, key=terms.get)

    def describe(self) -> str:
        o = self.occupancy
        return (f"model: {self.registers} registers, {self.shared_bytes} B shared/block -> {o.blocks_per_sm} blocks/SM, "
                f"occupancy {o.fraction:.2f} (limited by {o.limiter}); global traffic {self.traffic_bytes / 1e6:.1f} MB; "
                f"predicted {self.time_s * 1e3:.3f} ms ({self.bound}-bound)")


def estimate(scop, s: Schedule, m: GpuMapping, hw: Any, *, registers_per_thread: Optional[int] = None) -> GpuEstimate:
    """The :class:`GpuEstimate` of kernel ``m`` on GPU descriptor ``hw``.

    Raises :class:`OutOfResources` when the block does not fit an SM.

    >>> # e = estimate(scop, sched, maps[1], hardware.load("nvidia-h100")); e.time_s, e.bound
    """
    regs = registers_per_thread if registers_per_thread is not None else registers(scop, m)
    plan: Optional[SharedPlan] = m.shared
    smem = plan.nbytes if plan is not None else 0
    occ = occupancy(hw, m.threads, regs, smem)
    arrays = {a.name: a for a in scop.arrays}
    promoted = {t.array for t in plan.tiles} if plan is not None else set()
    warp = hw.warp_size
    flops = wavefronts = traffic = 0.0
    lanes_eff = []
    launches = 1
    for h in m.host:
        launches *= max(0, h.hi - h.lo + 1)
    threads_total = launches  # threads over every launch
    for a in m.axes:
        threads_total *= a.total
    for name in m.statements:
        st = scop.statement(name)
        n = instances(st)
        if n == 0:
            continue
        flops += ops_per_instance(st.body) * n
        ws = _warp_set(s, st, m, warp)
        lanes = max(1, int(ws.count_val().to_python())) if not ws.is_empty() else 1
        lanes_eff.append((n, min(lanes, warp) / warp))
        winstr = n / lanes
        for arr, maps in _accesses(st).items():
            item = _itemsize(arrays[arr].dtype) if arr in arrays else 4
            img = None
            for acc in maps:
                part = ws.apply(acc)
                img = part if img is None else img.union(part)
            img = img.coalesce() if img is not None else None
            if img is None:
                continue
            wf = max(len(maps), _lines(img, item, WAVEFRONT_BYTES))
            wavefronts += wf * winstr
            if arr in promoted or (st.body.reduce is not None and arr == st.body.array):
                continue
            traffic += _lines(img, item, SECTOR_BYTES) * SECTOR_BYTES * winstr
        # The written array: per instance, or once per thread (read + write) for a reduction.
        out_img = ws.apply(st.write_map())
        item = _itemsize(arrays[st.body.array].dtype) if st.body.array in arrays else 4
        out_sectors = _lines(out_img, item, SECTOR_BYTES) * SECTOR_BYTES
        if st.body.reduce is not None:
            out_cells = max(1, int(out_img.count_val().to_python())) if not out_img.is_empty() else 1
            traffic += 2 * out_sectors * max(1.0, threads_total / out_cells)
        else:
            traffic += out_sectors * winstr
    blocks_logical = 1
    for a in m.axes:
        blocks_logical *= a.blocks
    if plan is not None:
        steps_total = plan.n_steps * blocks_logical
        for t in plan.tiles:
            item = _itemsize(t.dtype)
            row = t.sizes[-1] * item
            rows = t.cells // max(1, t.sizes[-1])
            traffic += rows * (-(-row // SECTOR_BYTES)) * SECTOR_BYTES * steps_total
            # global loads through L1 and stores into shared memory: two wavefronts per 128 bytes
            wavefronts += 2 * (-(-t.cells * item // WAVEFRONT_BYTES)) * steps_total
    gx, gy, gz = m.grid
    launched = max(1, gx * gy * gz)
    total_n = sum(n for n, _ in lanes_eff) or 1
    lane_frac = sum(n * f for n, f in lanes_eff) / total_n if lanes_eff else 1.0
    sms = hw.sms
    resident = max(1, min(occ.blocks_per_sm, -(-launched // sms)))
    busy = min(sms, launched)
    waves = -(-launched // (busy * resident))
    warps_per_block = -(-m.threads // warp)
    hide = min(1.0, resident * warps_per_block / (SATURATION * (hw.max_threads_per_sm // warp)))
    dtype = _kernel_dtype(scop, m)
    peak_sm = hw.peak_gflops(dtype) * 1e9 / sms
    # The totals cover every host-loop iteration; one launch does 1/launches of them.
    per = resident / launched / max(1, launches)  # one SM's share of one launch's work per wave
    compute = per * flops / (peak_sm * max(lane_frac, 1.0 / warp)) / hide
    onchip = per * wavefronts / (hw.clock_ghz * 1e9) / hide
    memory = per * traffic / (hw.global_bandwidth_gbs * 1e9 / sms) / hide
    time = launches * (waves * max(compute, onchip, memory) + LAUNCH_S)
    return GpuEstimate(m, regs, smem, occ, flops, wavefronts, traffic, launches,
                       compute * waves * launches, onchip * waves * launches, memory * waves * launches, time)


def _kernel_dtype(scop, m: GpuMapping) -> str:
    arrays = {a.name: a for a in scop.arrays}
    for name in m.statements:
        a = arrays.get(scop.statement(name).body.array)
        if a is not None and a.dtype in ("float64", "complex128"):
            return "float64"
    return "float32"


# ---------------------------------------------------------------------------
# Choosing block sizes, steps and promotion
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """The chosen mapping of every kernel, its estimate, and the rejected candidates with why."""

    mappings: Tuple[GpuMapping, ...]
    estimates: Tuple[GpuEstimate, ...]
    rejected: Tuple[str, ...] = field(default=(), compare=False)

    @property
    def time_s(self) -> float:
        return sum(e.time_s for e in self.estimates)

    def describe(self) -> str:
        lines = []
        for m, e in zip(self.mappings, self.estimates):
            lines.append(m.describe())
            lines.append("  " + e.describe())
        return "\n".join(lines)


def choose(scop, s: Schedule, hw: Any, limits: Optional[GpuLimits] = None, *,
           threads: Sequence[int] = THREADS, promote: bool = True) -> Choice:
    """Per kernel, the block size, reduction steps and promotion with the lowest predicted time on ``hw``.

    Candidates: every block size in ``threads`` up to the descriptor's
    ``max_threads_per_block``; for one-statement reduction kernels, no
    promotion and every order-preserving step box of
    :func:`~polytile.scheduling.gpu.step_candidates` with its promoted tiles.
    A candidate whose tiles exceed ``shared_memory_per_block`` or whose block
    does not fit an SM is rejected (listed in :attr:`Choice.rejected`).  Ties
    go to less global traffic, then fewer reduction steps (barriers), higher
    occupancy, and blocks nearer 256 threads.

    >>> # c = choose(scop, sched, hardware.load("nvidia-h100")); print(c.describe())
    """
    lim = limits or GpuLimits.from_descriptor(hw)
    s.with_(marks=frozenset()).check("GPU mapping")
    chosen: List[GpuMapping] = []
    ests: List[GpuEstimate] = []
    rejected: List[str] = []
    for index, slot in enumerate(kernel_slots(s)):
        best = None
        seen = set()
        for t in threads:
            if t > hw.max_threads_per_block:
                continue
            m = map_slot(s, slot, lim.with_(threads=t), index)
            if (m.grid, m.block) in seen:
                continue
            seen.add((m.grid, m.block))
            options: List[GpuMapping] = [m]
            ext = reduction_extents(scop, s, m) if promote else None
            if ext:
                for steps in step_candidates(ext):
                    try:
                        plan, _ = promotion_plan(scop, s, m, steps, shared_bytes=hw.shared_memory_per_block_bytes)
                    except OutOfResources as e:
                        rejected.append(f"{m.name} block {m.block} steps {steps}: {e}")
                        continue
                    if plan is not None:
                        options.append(m.with_shared(plan))
            for cand in options:
                try:
                    e = estimate(scop, s, cand, hw)
                except OutOfResources as err:
                    rejected.append(f"{cand.name} block {cand.block}: {err}")
                    continue
                # Ties (same bound): less traffic, fewer barriers, higher occupancy, blocks near 256 threads.
                steps = cand.shared.n_steps if cand.shared is not None else 0
                key = (round(e.time_s, 12), e.traffic_bytes, steps, -e.occupancy.fraction,
                       abs(math.log2(max(1, cand.threads) / 256)))
                if best is None or key < best[0]:
                    best = (key, cand, e)
        if best is None:
            raise OutOfResources("threads per block", min(threads), hw.max_threads_per_block,
                                 f"every candidate block of kernel{index}")
        chosen.append(best[1])
        ests.append(best[2])
    return Choice(tuple(chosen), tuple(ests), tuple(rejected))


def describe(choice: Choice) -> str:
    """The chosen mappings with their estimates (what ``polytile show --target cuda`` prints)."""
    return choice.describe() if choice.mappings else describe_mappings(())
