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

A nest whose outermost loop carries a dependence (a time loop around
stencil sweeps, a sequence of dependent statements inside one loop) is split
at that loop: the loop becomes a *host loop* (:class:`HostLoop`) and every
sub-nest inside it is mapped like a top-level nest and launched once per
iteration, its value passed to the kernel -- kernel boundaries are the
grid-wide barriers the carried dependence needs.  Only when nothing inside
such a loop has a dependence-free band (a prefix sum) does the nest become a
one-thread kernel.  The result is data (:class:`GpuMapping`, one per kernel,
in launch order) that the CUDA code generator and the CPU emulation both
consume.

Shared-memory promotion (:func:`promotion_plan`) is also decided here, so the
cost model (``polytile.cost.gpu``) and the code generator see the same plan:
the reduction loops of a one-statement kernel run in *steps* (a box of
reduction iterations), and every input read whose footprint over one block
and one step is smaller than the reads it serves is copied into a
``__shared__`` tile first.  Footprints are isl images of the parametric
block-and-step box, so tile sizes and base offsets hold for every block.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import islpy as isl

from ..errors import ScheduleError
from ..poly import body as B
from .core import Schedule, dim_values

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
    host: Tuple["HostLoop", ...] = ()
    shared: Optional["SharedPlan"] = None

    def with_shared(self, plan: Optional["SharedPlan"]) -> "GpuMapping":
        """The same mapping with ``plan`` (or no promotion)."""
        return replace(self, shared=plan)

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
        for h in self.host:
            lines.append(f"  launched for each {h.name} in [{h.lo}, {h.hi}] (host loop: {h.name} carries a dependence)")
        if self.shared is not None:
            lines.append("  " + self.shared.describe())
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
    vals = dim_values([s.table[g].map.intersect_domain(s.scop.statement(g).domain) for g in group], dim)
    if vals is not None:
        vals = vals.project_out(isl.dim_type.param, 0, vals.dim(isl.dim_type.param))
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
        last = B.iter_names(st.body.index[-1])
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


def map_group(s: Schedule, group: Sequence[str], first: int, lim: GpuLimits, index: int,
              host: Sequence["HostLoop"] = ()) -> GpuMapping:
    """The :class:`GpuMapping` of one nest starting at loop dimension ``first`` (inside ``host`` loops)."""
    group = tuple(group)
    host = tuple(host)
    band, seq = parallel_band(s, group, first)
    reasons: List[str] = []
    if not band:
        if first < s.n_dims:
            reasons.append("the outermost loop carries a dependence and nothing inside it is parallel: "
                           "the nest runs in one thread")
        return GpuMapping(index, group, (), tuple(seq), tuple(reasons), host)
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
    return GpuMapping(index, group, tuple(axes), tuple(seq), tuple(r for r in reasons if r), host)


@dataclass(frozen=True)
class HostLoop:
    """A loop carrying a dependence that the host runs, launching the kernels inside it per iteration.

    ``nest`` identifies the top-level nest (two nests' loops over the same
    dimension stay separate loops); the kernel receives the value as
    ``pt_h<dim>``.
    """

    nest: int
    dim: int
    name: str
    lo: int
    hi: int

    @property
    def param(self) -> str:
        return f"pt_h{self.dim}"


@dataclass(frozen=True)
class KernelSlot:
    """One kernel to map: its statements, the dimension of its first loop, the host loops around it."""

    statements: Tuple[str, ...]
    first: int
    host: Tuple[HostLoop, ...] = ()


def kernel_slots(s: Schedule) -> List[KernelSlot]:
    """The kernels of ``s`` in launch order, with host loops where an outermost loop carries a dependence.

    A nest whose outermost loop has no dependence-free band is split at that
    loop: the loop goes to the host and the sub-nests inside it are slots of
    their own (recursively), unless none of them has a parallel band -- then
    the whole nest stays one (one-thread) kernel.

    >>> # jacobi-1d, S[t, i] -> [t, 0, i]; U[t, i] -> [t, 1, i]:
    >>> # [KernelSlot(('S',), 3, (HostLoop(0, 1, 't', 0, T-1),)), KernelSlot(('U',), 3, (...same...))]
    """
    slots: List[KernelSlot] = []

    def split(group: Sequence[str], first: int, host: Tuple[HostLoop, ...], nest: int) -> List[KernelSlot]:
        if first >= s.n_dims or parallel_band(s, group, first)[0]:
            return [KernelSlot(tuple(group), first, host)]
        lo, hi = _dim_box(s, group, first)
        names = sorted({s.table[g].names[first] for g in group if s.table[g].names[first]})
        loop = HostLoop(nest, first, "/".join(names), lo, hi)
        inner = [x for g2, f2 in s.nests(group, first + 1, loopless=True) for x in split(g2, f2, host + (loop,), nest)]
        if not any(x.first < s.n_dims and parallel_band(s, x.statements, x.first)[0] for x in inner):
            return [KernelSlot(tuple(group), first, host)]
        return inner

    for nest, (group, first) in enumerate(kernel_groups(s)):
        slots.extend(split(group, first, (), nest))
    return slots


def launch_tree(mappings: Sequence[GpuMapping]) -> List[Any]:
    """Kernels nested in their host loops, in launch order.

    Items are ``("kernel", mapping)`` or ``("host", HostLoop, items)``;
    consecutive kernels inside the same host loop share one loop.

    >>> # [("kernel", k0), ("host", HostLoop(.., "t", 0, 9), [("kernel", k1), ("kernel", k2)])]
    """
    def build(ms: Sequence[GpuMapping], depth: int) -> List[Any]:
        out: List[Any] = []
        k = 0
        while k < len(ms):
            m = ms[k]
            if len(m.host) <= depth:
                out.append(("kernel", m))
                k += 1
                continue
            h = m.host[depth]
            j = k
            while j < len(ms) and len(ms[j].host) > depth and ms[j].host[depth] == h:
                j += 1
            out.append(("host", h, build(ms[k:j], depth + 1)))
            k = j
        return out

    return build(list(mappings), 0)


def map_slot(s: Schedule, slot: KernelSlot, limits: GpuLimits, index: int) -> GpuMapping:
    """The :class:`GpuMapping` of one :class:`KernelSlot`."""
    return map_group(s, slot.statements, slot.first, limits, index, slot.host)


def map_schedule(s: Schedule, limits: Optional[GpuLimits] = None) -> Tuple[GpuMapping, ...]:
    """One :class:`GpuMapping` per kernel of ``s`` (:func:`kernel_slots`), in launch order.

    ``s`` must run every dependence in order (checked); its marks are
    ignored -- the mapping finds its own dependence-free band.

    >>> # maps = map_schedule(sched, GpuLimits(threads=256)); print(describe(maps))
    """
    s.with_(marks=frozenset()).check("GPU mapping")
    lim = limits or GpuLimits()
    return tuple(map_slot(s, slot, lim, k) for k, slot in enumerate(kernel_slots(s)))


# ---------------------------------------------------------------------------
# Shared-memory promotion
# ---------------------------------------------------------------------------


class OutOfResources(ScheduleError):
    """A mapping choice needs more of a GPU resource than the descriptor allows.

    >>> # OutOfResources("bytes of shared memory per block", 264192, 232448, "kernel1 (S0)")
    >>> # -> "out of resources: kernel1 (S0) needs 264192 bytes of shared memory per block; the limit is 232448"
    """

    def __init__(self, resource: str, needed: int, limit: int, what: str = ""):
        self.resource, self.needed, self.limit = resource, int(needed), int(limit)
        who = f"{what} " if what else ""
        super().__init__(f"out of resources: {who}needs {int(needed)} {resource}; the limit is {int(limit)}")


#: An affine expression over the block's parameters: ((name, coefficient), ...), constant.
Affine = Tuple[Tuple[Tuple[str, int], ...], int]


@dataclass(frozen=True)
class SharedTile:
    """One promoted read ``array[index]``, served from ``__shared__ name[sizes]``.

    ``base`` is, per array dimension, the affine expression (in the block
    parameters ``pt_p_<iterator>`` and step starts ``pt_r_<iterator>``) of the
    tile's first cell: the global cell is ``base + tile cell``.
    """

    name: str
    array: str
    index: Tuple[B.Node, ...]
    sizes: Tuple[int, ...]
    base: Tuple[Affine, ...]
    dtype: str

    @property
    def cells(self) -> int:
        n = 1
        for v in self.sizes:
            n *= v
        return n

    @property
    def nbytes(self) -> int:
        return self.cells * _itemsize(self.dtype)


def _itemsize(dtype: str) -> int:
    import numpy as np

    return int(np.dtype(dtype).itemsize)


@dataclass(frozen=True)
class SharedPlan:
    """How one reduction kernel stages inputs through shared memory.

    ``steps`` are the statement's reduction loops in schedule order as
    ``(iterator, lo, hi, step)``: the block runs them in steps (a box of
    ``step`` iterations each), loads every tile for the step, synchronises and
    computes.  Steps are *order-preserving* (loops before the tiled one step by
    1, loops after it are whole), so each thread sums in the unpromoted
    order (results differ at most where a compiler contracts a multiply-add
    differently).
    ``mapped`` gives ``(iterator, extent per block)`` of the block's box
    (block size on the iterator's axis; 1 for iterators fixed per block).
    """

    stmt: str
    steps: Tuple[Tuple[str, int, int, int], ...]
    mapped: Tuple[Tuple[str, int], ...]
    tiles: Tuple[SharedTile, ...]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tiles)

    @property
    def n_steps(self) -> int:
        n = 1
        for _, lo, hi, st in self.steps:
            n *= -(-(hi - lo + 1) // st)
        return n

    @property
    def step_iterations(self) -> int:
        n = 1
        for _, lo, hi, st in self.steps:
            n *= min(st, hi - lo + 1)
        return n

    @property
    def k(self) -> str:
        """The tiled reduction loop (the innermost one stepped by more than 1, else the innermost)."""
        tiled = [v for v, lo, hi, st in self.steps if st > 1]
        return tiled[0] if tiled else self.steps[-1][0]

    @property
    def tk(self) -> int:
        return dict((v, st) for v, _, _, st in self.steps)[self.k]

    def describe(self) -> str:
        tiles = ", ".join(f"{t.array}[{']['.join(map(str, t.sizes))}] ({t.nbytes} B)" for t in self.tiles)
        steps = ", ".join(f"{v} by {st}" for v, _, _, st in self.steps)
        return f"shared memory {self.nbytes} bytes/block: {tiles}; reduction in steps of {steps}"


def reduction_extents(scop, s: Schedule, m: GpuMapping) -> Optional[List[Tuple[str, int, int]]]:
    """``(iterator, lo, hi)`` of the kernel's reduction loops in schedule order, or None if not promotable."""
    if len(m.statements) != 1 or not m.axes or m.host:
        return None
    st = scop.statement(m.statements[0])
    if st.body.reduce is None or st.c_text is not None:
        return None
    ss = s.table[st.name]
    loops = ss.loops()
    if any(n not in st.iters for _, n in loops):
        return None
    # Each loop must run its iterator forward (t_d = v): the step loops walk iterators in that order.
    cons = " and ".join(f"t{d} = {n}" for d, n in loops)
    ident = isl.Map(f"{{ {st.name}[{', '.join(st.iters)}] -> [{', '.join(f't{d}' for d in range(s.n_dims))}]"
                    f"{' : ' + cons if cons else ''} }}")
    if not ss.map.intersect_domain(st.domain).is_subset(ident):
        return None
    mapped = {lp.name for a in m.axes for lp in a.loops}
    out = []
    for d, n in loops:
        if n in mapped:
            continue
        if n not in m.sequential:
            continue
        lo, hi = _iter_bounds(st, n)
        out.append((n, lo, hi))
    return out or None


def _iter_bounds(st, v: str) -> Tuple[int, int]:
    j = st.iters.index(v)
    n = len(st.iters)
    proj = st.domain.project_out(isl.dim_type.set, j + 1, n - j - 1).project_out(isl.dim_type.set, 0, j)
    lo = proj.lexmin().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    hi = proj.lexmax().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    return int(lo), int(hi)


def step_candidates(extents: Sequence[Tuple[str, int, int]], sizes: Sequence[int] = (8, 16, 32, 64)) -> List[Dict[str, int]]:
    """Order-preserving reduction steps: loops before a split level step by 1, after it whole.

    >>> step_candidates([("ky", 0, 2), ("kx", 0, 2), ("ci", 0, 63)], sizes=(16,))
    [{'ky': 3, 'kx': 3, 'ci': 64}, {'ky': 1, 'kx': 3, 'ci': 64}, {'ky': 1, 'kx': 1, 'ci': 16}, {'ky': 1, 'kx': 1, 'ci': 64}]
    """
    out: List[Dict[str, int]] = []
    for p, (v, lo, hi) in enumerate(extents):
        ext = hi - lo + 1
        for t in sorted({x for x in sizes if x < ext} | {ext}):
            steps = {}
            for q, (w, l2, h2) in enumerate(extents):
                steps[w] = 1 if q < p else (t if q == p else h2 - l2 + 1)
            if steps not in out:
                out.append(steps)
    return out


def default_steps(extents: Sequence[Tuple[str, int, int]], m: GpuMapping) -> Dict[str, int]:
    """The innermost reduction loop in steps of the block's x size, the others one at a time."""
    v, lo, hi = extents[-1]
    steps = {w: 1 for w, _, _ in extents}
    steps[v] = max(1, min(m.axes[0].block, hi - lo + 1))
    return steps


def _affine_of(pw: "isl.PwAff") -> Optional[Affine]:
    pieces = pw.get_pieces()
    if len(pieces) != 1:
        return None
    _, aff = pieces[0]
    if aff.dim(isl.dim_type.div):
        return None
    coeffs = []
    for k in range(aff.dim(isl.dim_type.param)):
        c = aff.get_coefficient_val(isl.dim_type.param, k)
        if not c.is_int():
            return None
        if c.to_python():
            coeffs.append((aff.get_dim_name(isl.dim_type.param, k), int(c.to_python())))
    c0 = aff.get_constant_val()
    if not c0.is_int():
        return None
    return tuple(coeffs), int(c0.to_python())


def promotion_plan(scop, s: Schedule, m: GpuMapping, steps: Optional[Dict[str, int]] = None, *,
                   shared_bytes: Optional[int] = None, arrays: Optional[Sequence[str]] = None
                   ) -> Tuple[Optional[SharedPlan], str]:
    """The shared-memory plan of kernel ``m`` with reduction ``steps``, or ``(None, why not)``.

    Applies to a kernel of one reduction statement (any number of reduction
    loops) whose loops are the statement's iterators, every grid axis one loop
    or linearised loops with one thread per block on it.  For each input read
    (or only those of ``arrays``) the footprint of one block and one step is
    the isl image of the parametric box ``{ pt_p_v <= v < pt_p_v + block_v,
    pt_r_r <= r < pt_r_r + step_r }``; a read whose image has a constant size
    (affine indices) and fewer cells than the reads it serves is promoted.
    More than ``shared_bytes`` raises :class:`OutOfResources`.

    >>> # plan, why = promotion_plan(scop, sched, maps[1], {"k": 32}, shared_bytes=49152)
    >>> # [t.array for t in plan.tiles] -> ['A', 'B'];  plan.nbytes -> (8*32 + 32*32) * 4
    """
    extents = reduction_extents(scop, s, m)
    if extents is None:
        return None, "not a one-statement reduction kernel with sequential reduction loops"
    st = scop.statement(m.statements[0])
    for a in m.axes:
        if len(a.loops) > 1 and a.block != 1:
            return None, f"linearised grid axis {a.axis} with {a.block} threads per block"
    steps = dict(steps or default_steps(extents, m))
    if set(steps) != {v for v, _, _ in extents}:
        return None, f"steps {steps} do not name the reduction loops {[v for v, _, _ in extents]}"
    steps = {v: max(1, min(int(steps[v]), hi - lo + 1)) for v, lo, hi in extents}
    block = {}
    for a in m.axes:
        for lp in a.loops:
            block[lp.name] = max(1, min(a.block, lp.extent))
    cons, params = [], []
    for v in st.iters:
        if v in block:
            params.append(f"pt_p_{v}")
            cons.append(f"pt_p_{v} <= {v} <= pt_p_{v} + {block[v] - 1}")
        elif v in steps:
            params.append(f"pt_r_{v}")
            cons.append(f"pt_r_{v} <= {v} <= pt_r_{v} + {steps[v] - 1}")
        else:
            lo, hi = _iter_bounds(st, v)
            if lo != hi:
                return None, f"iterator {v} is neither mapped nor a reduction loop"
            cons.append(f"{v} = {lo}")
    box = isl.Set(f"[{', '.join(params)}] -> {{ {st.name}[{', '.join(st.iters)}] : {' and '.join(cons)} }}")
    kinds = {a.name: a.kind for a in scop.arrays}
    served = 1
    for v in st.iters:
        served *= block.get(v, steps.get(v, 1))
    tiles: List[SharedTile] = []
    seen = set()
    skipped: List[str] = []
    for ld in B.loads(st.body.value):
        if (ld.array, ld.index) in seen or kinds.get(ld.array) != "input" or not ld.index:
            continue
        if arrays is not None and ld.array not in arrays:
            continue
        seen.add((ld.array, ld.index))
        try:
            acc = isl.Map(f"{{ {st.name}[{', '.join(st.iters)}] -> {ld.array}[{', '.join(B.affine_text(e) for e in ld.index)}] }}")
        except Exception:
            skipped.append(f"{ld.array}: index not affine")
            continue
        img = box.apply(acc)
        sizes, base = [], []
        for d in range(img.dim(isl.dim_type.set)):
            lo_d, hi_d = img.dim_min(d), img.dim_max(d)
            aff = _affine_of(lo_d)
            diff = _affine_of(hi_d.sub(lo_d))
            if aff is None or diff is None or diff[0]:
                break
            sizes.append(diff[1] + 1)
            base.append(aff)
        else:
            tile = SharedTile(f"pt_s{len(tiles)}", ld.array, ld.index, tuple(sizes), tuple(base), ld.dtype)
            if tile.cells < served:
                tiles.append(tile)
            else:
                skipped.append(f"{ld.array}: no reuse inside a block step")
            continue
        skipped.append(f"{ld.array}: footprint size depends on the block")
    if not tiles:
        return None, "no input read is reused inside a block" + (f" ({'; '.join(skipped)})" if skipped else "")
    step_list = tuple((v, lo, hi, steps[v]) for v, lo, hi in extents)
    plan = SharedPlan(st.name, step_list, tuple((v, block[v]) for v in st.iters if v in block), tuple(tiles))
    if shared_bytes is not None and plan.nbytes > shared_bytes:
        raise OutOfResources("bytes of shared memory per block", plan.nbytes, shared_bytes,
                             f"{m.name} ({st.name}, tiles {', '.join(t.array for t in tiles)})")
    return plan, ""
