"""The GPU mapping step: which loops of a legal schedule become CUDA blocks and threads.

For every top-level loop nest (a *kernel*: the statements sharing the
outermost loop, or one statement nest in program order) the mapping takes the
outermost *band* of consecutive loops that carry no dependence (reductions
count: ``Schedule.carried`` over all dependences is empty at every band loop).
Because no band loop carries a dependence, every dependence inside the nest
joins instances with equal band coordinates, so the band's iterations are
independent and may run in any order -- one CUDA thread each.  The loops
inside the band (reduction loops such as matmul's ``k``, and loops after a
dependence-carrying one) stay sequential inside the thread; a reduction
accumulates straight into its output cell, which only that thread writes.

The band loops are assigned to grid axes:

* ``x``: the loop indexing the written array's last (unit-stride) dimension,
  so consecutive threads of a warp touch consecutive addresses;
* ``y``: the innermost remaining band loop;
* ``z``: every remaining band loop, linearised (outermost slowest), so bands
  deeper than three loops still run fully in parallel.

Each axis has a box ``[lo, lo + extent)`` per loop (the bounding box over the
nest's statements; the code generator guards each point with the exact
domain, so triangles and sizes that do not divide the block are safe).  The
block shape comes from the hardware limits (:class:`GpuLimits`): at most
``threads`` threads per block (default 256, never above
``max_threads_per_block``), ``x`` a multiple of the warp size whenever the
extent is at least a warp.  An axis whose block count exceeds the hardware
grid limit (``2**31 - 1`` on ``x``, ``65535`` on ``y``/``z``, or a smaller
``max_grid`` for testing) launches fewer blocks that walk the rest with a
grid-stride loop.

A nest without a dependence-free outermost loop (a scalar statement, a
prefix sum) becomes a one-thread kernel.  The result is data
(:class:`GpuMapping`, one per kernel) that the CUDA code generator and the
CPU emulation both consume.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

import islpy as isl

from ..errors import ScheduleError
from ..poly import body as B
from .core import Schedule

#: Hardware grid limits per axis (x, y, z) and block limits (x, y, z).
GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)
AXES = ("x", "y", "z")


@dataclass(frozen=True)
class GpuLimits:
    """What the mapping needs to know about the GPU (read from a hardware descriptor).

    ``threads`` is the block size aimed for (at most ``max_threads_per_block``);
    ``max_grid`` caps the blocks per axis (x, y, z), normally the hardware's.
    """

    warp_size: int = 32
    max_threads_per_block: int = 1024
    threads: int = 256
    max_grid: Tuple[int, int, int] = GRID_LIMITS
    arch: str = "sm_90"

    @classmethod
    def from_descriptor(cls, desc: Any, *, threads: Optional[int] = None,
                        max_grid: Optional[Sequence[int]] = None) -> "GpuLimits":
        """Limits from a :class:`polytile.hardware.GPUDescriptor` (read by attribute)."""
        kind = getattr(desc, "kind", None)
        if kind != "gpu":
            raise ScheduleError(f"hardware {getattr(desc, 'name', desc)!r} is not a GPU descriptor "
                                f"(kind {kind!r}); use e.g. nvidia-h100")
        mt = int(desc.max_threads_per_block)
        return cls(warp_size=int(desc.warp_size), max_threads_per_block=mt,
                   threads=min(int(threads or 256), mt), max_grid=_grid(max_grid), arch=str(desc.arch))

    def with_(self, *, threads: Optional[int] = None, max_grid: Optional[Sequence[int]] = None) -> "GpuLimits":
        return GpuLimits(self.warp_size, self.max_threads_per_block,
                         min(int(threads or self.threads), self.max_threads_per_block),
                         _grid(max_grid) if max_grid is not None else self.max_grid, self.arch)


def _grid(max_grid) -> Tuple[int, int, int]:
    if max_grid is None:
        return GRID_LIMITS
    if isinstance(max_grid, int):
        max_grid = (max_grid,) * 3
    g = tuple(int(v) for v in max_grid)
    if len(g) != 3 or any(v < 1 for v in g):
        raise ScheduleError(f"max_grid must be a positive int or three positive ints, got {max_grid!r}")
    return tuple(min(v, lim) for v, lim in zip(g, GRID_LIMITS))  # type: ignore[return-value]


@dataclass(frozen=True)
class MappedLoop:
    """One band loop on a grid axis: schedule dimension, name, box ``[lo, lo + extent)``."""

    dim: int
    name: str
    lo: int
    extent: int


@dataclass(frozen=True)
class GridAxis:
    """One CUDA axis: its loops (linearised, outermost slowest), block size, grid size.

    ``blocks`` is how many blocks the loops need; ``grid`` how many are
    launched (``< blocks`` means a grid-stride loop walks the rest).
    """

    axis: str
    loops: Tuple[MappedLoop, ...]
    block: int
    blocks: int
    grid: int

    @property
    def total(self) -> int:
        n = 1
        for lp in self.loops:
            n *= lp.extent
        return n

    @property
    def strided(self) -> bool:
        return self.grid < self.blocks


@dataclass(frozen=True)
class GpuMapping:
    """The mapping of one kernel (one top-level loop nest) onto a CUDA grid.

    ``axes`` are the used grid axes (x first); an empty tuple is a one-thread
    kernel.  ``sequential`` names the loops left inside each thread.
    """

    index: int
    statements: Tuple[str, ...]
    axes: Tuple[GridAxis, ...]
    sequential: Tuple[str, ...] = ()
    reasons: Tuple[str, ...] = field(default=(), compare=False)

    @property
    def name(self) -> str:
        """The kernel's name in reports (the code generator prefixes the entry point: ``<entry>_k<index>``)."""
        return f"kernel{self.index}"

    @property
    def grid(self) -> Tuple[int, int, int]:
        return _dims3({a.axis: a.grid for a in self.axes})

    @property
    def block(self) -> Tuple[int, int, int]:
        return _dims3({a.axis: a.block for a in self.axes})

    @property
    def mapped_dims(self) -> Tuple[int, ...]:
        return tuple(lp.dim for a in self.axes for lp in a.loops)

    @property
    def threads(self) -> int:
        x, y, z = self.block
        return x * y * z

    def describe(self) -> str:
        """Readable lines: statements, grid and block (loop names and sizes), sequential loops."""
        g, b = self.grid, self.block
        lines = [f"kernel {self.name} ({', '.join(self.statements)}): grid ({g[0]}, {g[1]}, {g[2]}) "
                 f"x block ({b[0]}, {b[1]}, {b[2]}) = {self.threads} threads/block"]
        if not self.axes:
            lines.append("  one thread (no dependence-free outermost loop)")
        for a in self.axes:
            loops = " * ".join(f"{lp.name}[{lp.lo}:{lp.lo + lp.extent}]" for lp in a.loops)
            stride = f", grid-stride over {a.blocks} blocks" if a.strided else ""
            lines.append(f"  {a.axis}: {loops} -> blockIdx.{a.axis} * {a.block} + threadIdx.{a.axis} "
                         f"({a.grid} blocks{stride})")
        if self.sequential:
            lines.append(f"  sequential in each thread: {', '.join(self.sequential)}")
        for r in self.reasons:
            lines.append(f"  note: {r}")
        return "\n".join(lines)


def _dims3(by_axis) -> Tuple[int, int, int]:
    return tuple(int(by_axis.get(a, 1)) for a in AXES)  # type: ignore[return-value]


def describe(mappings: Sequence[GpuMapping]) -> str:
    """All kernels' mappings, in launch order."""
    return "\n".join(m.describe() for m in mappings)


# ---------------------------------------------------------------------------
# Choosing the mapping
# ---------------------------------------------------------------------------


def kernel_groups(s: Schedule) -> List[Tuple[List[str], int]]:
    """Top-level loop nests in program order: (statements, first loop dimension).

    A nest of statements with no loop at all gets the dimension count as its
    "first loop" (see :meth:`Schedule.nests`).
    """
    return s.nests(loopless=True)


def parallel_band(s: Schedule, group: Sequence[str], first: int) -> Tuple[List[int], List[int]]:
    """(band dimensions, sequential loop dimensions) of a nest starting at ``first``.

    The band is the run of loop dimensions from ``first`` that carry no
    dependence (reductions included); it ends at the first loop that carries
    one or at a β dimension that splits the group (statements no longer share
    the loop).
    """
    deps = s.deps.all(include_reductions=True)
    band: List[int] = []
    dim = first
    while dim < s.n_dims:
        vals = {g: s.constant(g, dim) for g in group}
        if all(v is not None for v in vals.values()):
            if len(set(vals.values())) > 1:
                break  # the statements separate: inner loops are no longer shared
            dim += 1
            continue
        if not s.carried(list(group), dim, deps).is_empty():
            break
        band.append(dim)
        dim += 1
    seq = []
    for g in group:
        for d, n in s.table[g].loops():
            if d not in band and d >= first and n not in seq:
                seq.append(n)
    return band, seq


def _dim_box(s: Schedule, group: Sequence[str], dim: int) -> Tuple[int, int]:
    """``(lo, hi)`` of time dimension ``dim`` over the group (concrete sizes needed)."""
    vals = None
    for g in group:
        m = s.table[g].map.intersect_domain(s.scop.statement(g).domain)
        n = m.dim(isl.dim_type.out)
        v = m.range().project_out(isl.dim_type.set, dim + 1, n - dim - 1).project_out(isl.dim_type.set, 0, dim)
        v = v.project_out(isl.dim_type.param, 0, v.dim(isl.dim_type.param))
        vals = v if vals is None else vals.union(v)
    if vals is None or vals.is_empty():
        return 0, -1
    lo_s, hi_s = vals.lexmin(), vals.lexmax()
    if not (lo_s.is_singleton() and hi_s.is_singleton()):
        raise ScheduleError(f"loop dimension {dim} of {', '.join(group)} has no bounded range; "
                            "the GPU mapping needs concrete sizes")
    lo = lo_s.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    hi = hi_s.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    return int(lo), int(hi)


def _unit_stride_loop(s: Schedule, group: Sequence[str], band: Sequence[int]) -> Optional[int]:
    """The band dimension whose loop indexes the last dimension of a written array."""
    for g in group:
        st = s.scop.statement(g)
        if not st.body.index:
            continue
        last = {n.name for n in B.walk(st.body.index[-1]) if isinstance(n, B.Iter)}
        for d in reversed(band):
            if s.table[g].names[d] in last:
                return d
    return None


def _block_sizes(extents: Sequence[int], lim: GpuLimits) -> List[int]:
    """Threads per block on each axis (x, y, z order) for these axis extents."""
    budget = max(1, min(lim.threads, lim.max_threads_per_block))
    warp = max(1, lim.warp_size)
    sizes: List[int] = []
    for k, ext in enumerate(extents):
        ext = max(1, ext)
        cap = min(budget, BLOCK_LIMITS[k])
        if k == 0:
            if ext < warp:
                b = ext
            else:
                rounded = -(-ext // warp) * warp
                # With a second axis, one warp wide leaves room for rows (32 x 8 tiles);
                # alone, x takes the whole budget.
                want = warp if len(extents) > 1 and extents[1] > 1 else budget
                b = min(rounded, max(warp, (min(want, cap) // warp) * warp))
        else:
            b = min(ext, cap)
            if b < ext:  # a power of two keeps the block shape regular
                p = 1
                while p * 2 <= b:
                    p *= 2
                b = p
        sizes.append(max(1, b))
        budget = max(1, budget // sizes[-1])
    return sizes


def map_group(s: Schedule, group: Sequence[str], first: int, lim: GpuLimits, index: int) -> GpuMapping:
    """The :class:`GpuMapping` of one top-level nest."""
    group = tuple(group)
    band, seq = parallel_band(s, group, first)
    reasons: List[str] = []
    if not band:
        if first < s.n_dims:
            reasons.append("the outermost loop carries a dependence: the nest runs in one thread")
        return GpuMapping(index, group, (), tuple(seq), tuple(reasons))
    loops = {}
    for d in band:
        lo, hi = _dim_box(s, group, d)
        names = sorted({s.table[g].names[d] for g in group if s.table[g].names[d]})
        loops[d] = MappedLoop(d, "/".join(names), lo, max(0, hi - lo + 1))
    x = _unit_stride_loop(s, group, band)
    if x is None:
        x = band[-1]
    rest = [d for d in band if d != x]
    order: List[List[int]] = [[x]]
    if rest:
        order.append([rest[-1]])
        rest = rest[:-1]
    if rest:
        order.append(rest)
        reasons.append(f"{len(rest)} band loop(s) linearised on z" if len(rest) > 1 else "")
    extents = []
    for ds in order:
        n = 1
        for d in ds:
            n *= loops[d].extent
        extents.append(n)
    blocks = _block_sizes(extents, lim)
    axes = []
    for k, (ds, ext, b) in enumerate(zip(order, extents, blocks)):
        nblocks = max(1, -(-ext // b))
        grid = min(nblocks, lim.max_grid[k])
        axes.append(GridAxis(AXES[k], tuple(loops[d] for d in ds), b, nblocks, grid))
    if any(a.strided for a in axes):
        reasons.append("grid-stride loop: more blocks than the grid limit")
    return GpuMapping(index, group, tuple(axes), tuple(seq), tuple(r for r in reasons if r))


def map_schedule(s: Schedule, limits: Optional[GpuLimits] = None) -> Tuple[GpuMapping, ...]:
    """One :class:`GpuMapping` per top-level loop nest of ``s``, in program order.

    ``s`` must run every dependence in order (checked); its marks are
    ignored -- the mapping finds its own dependence-free band.
    """
    s.with_(marks=frozenset()).check("GPU mapping")
    lim = limits or GpuLimits()
    return tuple(map_group(s, g, first, lim, k) for k, (g, first) in enumerate(kernel_groups(s)))
