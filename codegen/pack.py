"""Packing: copy an operand's tile footprint into a contiguous, blocked buffer.

A ``pack A D BLOCK`` mark (:class:`~polytile.scheduling.marks.Pack`, made by
:func:`polytile.scheduling.transforms.pack`) sits just inside a loop.  While
isl builds the AST, :func:`footprint_hook` computes the mark's footprint:
with ``T`` the build's outer schedule (the iterators ``c0..cL`` fixed at the
mark) and ``R`` the reads of ``A``,

    F = T^-1 . R            e.g. { [c0, c1, c2] -> B[k, j] : 16c2 <= k < 16c2 + 16 and 64c1 <= j < 64c1 + 64 }

and for every array axis ``d`` the box ``[lo_d(c), lo_d(c) + S_d)`` with
``lo_d = dim_min(F, d)`` (an isl piecewise affine function of the outer
iterators, printed with the build) and ``S_d = max over c of
(dim_max - dim_min + 1)`` (a constant: shapes are concrete).  The copy runs
at the mark, once per iteration of the loop, and fills

    P[t_D / BLOCK][t_0]...[t_{n-1} without t_D][t_D % BLOCK],  t_d = index_d - lo_d

so a register tile whose rows (or vector columns) run along axis ``D`` reads
``BLOCK`` consecutive elements per step of its reduction loop, and those
slivers follow each other in memory.  Elements of the box outside the array
are skipped (never read: the fast path only reads the footprint); in a buffer
whose last block is partly past the box (``PackBuffer.padded``) each copied row
also gets zeros in its lanes past the array or the box.

Buffers are allocated once per call by the entry function (one slice per
OpenMP thread when the mark is inside a parallel loop) and freed before it
returns; the copy and the register tiles only ever read them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import cgen
import islpy as isl

from polytile import dtypes as D
from polytile.isl_parts import maps_of
from polytile.poly.scop import Array, Scop
from polytile.scheduling.marks import Pack, decode

ALIGN = 64  # bytes: one cache line, and a full AVX-512 vector


@dataclass(frozen=True)
class Footprint:
    """The box of one pack mark: C expressions of its lower corner, constant sizes."""

    array: str
    dim: int
    block: int
    lo: Tuple[str, ...]  # C expressions in the AST iterators
    size: Tuple[int, ...]
    # The same lower corner as isl AST expressions (for code generators that do not read C: LLVM).
    lo_ast: Tuple[isl.AstExpr, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class PackBuffer:
    """One packed buffer as the code generator uses it."""

    name: str  # C identifier of the (per-thread slice) pointer
    array: Array
    dim: int
    block: int
    size: Tuple[int, ...]  # box extent per array axis

    @property
    def nblocks(self) -> int:
        return -(-self.size[self.dim] // self.block)

    @property
    def padded(self) -> bool:
        """Whether the last block has lanes past the box (``size[dim]`` not a multiple of ``block``).  Every
        copy into such a buffer writes zeros to those lanes (:func:`_copy_nest`), so a register tile's
        padded columns (:func:`.microkernel.padded_columns`) read zeros there, never stale or
        uninitialised memory.  (The copy, not the allocation, zeroes them: a memset of every thread's
        slice by the calling thread cost SGEMM 100^3 12 us of its 34, each slice's lines then moving
        to the core that packs into it.)

        >>> PackBuffer("p", None, 1, 16, (64, 12)).padded, PackBuffer("p", None, 1, 16, (64, 32)).padded
        (True, False)
        """
        return self.size[self.dim] % self.block != 0

    @property
    def block_stride(self) -> int:
        """Elements between consecutive blocks along the packed axis."""
        n = self.block
        for d, s in enumerate(self.size):
            if d != self.dim:
                n *= s
        return n

    @property
    def array_item_bytes(self) -> int:
        return D.width(self.array.dtype) // 8

    @property
    def elements(self) -> int:
        return self.nblocks * self.block_stride

    def origin(self, d: int) -> str:
        return f"{self.name}_o{d}"

    def inner_offset(self, t: Sequence[str]) -> str:
        """Offset of the other axes' positions ``t`` (C expressions, relative to the box), times the block."""
        terms: List[str] = []
        stride = self.block
        for d in reversed(range(len(self.size))):
            if d == self.dim:
                continue
            terms.append(f"({t[d]}) * {stride}" if stride != 1 else f"({t[d]})")
            stride *= self.size[d]
        return " + ".join(reversed(terms)) or "0"


def footprint_hook(scop: Scop, found: Dict[str, Footprint], errors: List[str]) -> Callable:
    """An isl ``after_each_mark`` callback that annotates pack marks with their footprint.

    The annotation is an isl id ``pack#N``; ``found["pack#N"]`` holds the box.
    Exceptions must not cross into isl, so failures are collected in ``errors``
    (the mark is then left without annotation and generates no copy).
    """
    by_array: Dict[str, isl.UnionMap] = {}

    def reads_of(array: str) -> isl.UnionMap:
        if array not in by_array:
            acc = isl.UnionMap.empty(scop.reads.get_space())
            for m in maps_of(scop.reads):
                if m.get_tuple_name(isl.dim_type.out) == array:
                    acc = acc.union(isl.UnionMap.from_map(m))
            by_array[array] = acc
        return by_array[array]

    def hook(node: isl.AstNode, build: isl.AstBuild) -> isl.AstNode:
        try:
            mark = decode(node.mark_get_id().get_name())
            if not isinstance(mark, Pack):
                return node
            array, dim, block = mark.array, mark.dim, mark.block
            fp = build.get_schedule().reverse().apply_range(reads_of(array))
            if fp.is_empty():
                errors.append(f"pack {array}: nothing read under the mark")
                return node
            fmap = isl.Map.from_union_map(fp)
            lo: List[str] = []
            lo_ast: List[isl.AstExpr] = []
            size: List[int] = []
            for d in range(fmap.dim(isl.dim_type.out)):
                pmin, pmax = fmap.dim_min(d), fmap.dim_max(d)
                ext = pmax.sub(pmin).add_constant_val(isl.Val.one(pmin.get_ctx())).max_val()
                if not ext.is_int():
                    errors.append(f"pack {array}: axis {d} has no bounded extent ({ext})")
                    return node
                expr = build.expr_from_pw_aff(pmin)
                lo_ast.append(expr)
                lo.append(expr.to_C_str())
                size.append(int(ext.to_python()))
            key = f"pack#{len(found)}"
            found[key] = Footprint(array, dim, block, tuple(lo), tuple(size), tuple(lo_ast))
            return node.set_annotation(isl.Id(key, context=node.get_ctx()))
        except Exception as e:  # noqa: BLE001 - never let an exception unwind through isl
            errors.append(f"pack footprint failed: {type(e).__name__}: {e}")
            return node

    return hook


def annotation(node: isl.AstNode) -> Optional[str]:
    """The ``pack#N`` annotation of a mark node, or None."""
    try:
        ann = node.get_annotation()
    except isl.Error:
        return None
    return ann.get_name() if ann is not None else None


def row_prefetch_step(buf: PackBuffer) -> int:
    """Elements per prefetch (one cache line) of :func:`_row_prefetch`'s rows, 0 when it does not apply:
    the pack must transpose (packed axis not the last) and the row be the only axis inside the lanes."""
    n = len(buf.size)
    if buf.dim == n - 1 or n - buf.dim != 2:
        return 0
    return max(1, ALIGN // buf.array_item_bytes)


def _row_prefetch(buf: PackBuffer, elem, at: Sequence[str], y_lo: str, y_hi: str) -> List[cgen.Generable]:
    """Prefetch the row one block further on than lane ``pt_l`` of block ``pt_b`` of a transposing pack.

    A pack along a leading axis (``A[i][k]`` packed along ``i``) copies the box row by row, each
    row a short run (``kc`` elements) a whole array row away from the previous one: the hardware
    prefetcher barely starts on a run before it ends, so every row's first lines are a full miss.
    Asking for row ``x_D + BLOCK`` (the same lane of the next block) one block ahead keeps about
    ``BLOCK`` rows in flight (measured: SGEMM 2048^3 about 3% faster on a Xeon with AVX-512).
    Only when the row is the array's last axis (contiguous) and nothing else runs inside it;
    the row must lie inside the array, so no address outside it is formed.  ``at`` are the box-relative
    positions of the other axes, ``[y_lo, y_hi)`` the row's relative extent.
    """
    step = row_prefetch_step(buf)
    if not step:
        return []
    n, D, last = len(buf.size), buf.dim, len(buf.size) - 1
    ahead = f"{buf.origin(D)} + pt_b * {buf.block} + pt_l + {buf.block}"
    idx = [ahead if d == D else f"{buf.origin(d)} + {'pt_y' if d == last else at[d]}" for d in range(n)]
    loop = cgen.For(f"long pt_y = {y_lo}", f"pt_y < {y_hi}", f"pt_y += {step}",
                    cgen.Line(f"__builtin_prefetch(&{elem(idx)}, 0, 3);"))
    return [cgen.If(f"{ahead} < {buf.array.shape[D]}", loop)]


def _box_inside(buf: PackBuffer, fp: Footprint) -> str:
    """C condition: the whole box lies inside the array (origins are run-time expressions)."""
    return " && ".join(f"{buf.origin(d)} >= 0 && {buf.origin(d)} + {fp.size[d]} <= {buf.array.shape[d]}"
                       for d in range(len(fp.size)))


def _copy_nest(buf: PackBuffer, fp: Footprint, elem: Callable[[Sequence[str]], str], *, inside: bool) -> cgen.Generable:
    """The loops filling ``buf`` from the box, over box-relative positions ``pt_x<d>`` (the packed
    axis as block ``pt_b`` and lane ``pt_l``); ``inside``: the box is known to lie inside the array.

    Clipped (``inside`` false), the loops run in the array's axis order, the packed axis split
    into blocks and lanes where it stands, and skip the cells outside the array.  Inside, trip
    counts are constants, and a transposing pack (packed axis not the last: ``A[i][k]`` along
    ``i``) runs block, then the other axes, then the lane innermost, so the writes are one
    contiguous run (``P[b][k][l]``) and the ``BLOCK`` rows are read side by side; gcc turns the lane
    loop into one vector store.  The clipped order (lane outermost, a scalar store every ``BLOCK``
    elements) was measured ~8% slower on SGEMM 2048^3 (Xeon, AVX-512, one thread).  A pack along
    the last axis keeps the array's order either way: reads and the lane runs are contiguous.
    """
    n, D, BS = len(fp.size), buf.dim, buf.block
    o = buf.origin
    if inside:
        lo = {d: "0" for d in range(n)}
        hi = {d: str(fp.size[d]) for d in range(n)}
        # the block's lane count: the last block of an axis not a multiple of BLOCK is short
        lanes = ("0", f"min({BS}L, {fp.size[D]}L - pt_b * {BS})" if fp.size[D] % BS else f"{BS}")
    else:
        lo = {d: f"max(0L, -{o(d)})" for d in range(n)}
        hi = {d: f"min({fp.size[d]}L, {buf.array.shape[d]}L - {o(d)})" for d in range(n)}
        lanes = (f"max(0L, {lo[D]} - pt_b * {BS})", f"min({BS}L, {hi[D]} - pt_b * {BS})")
    # In a padded buffer (PackBuffer.padded) each row's lanes past those copied -- past the box or,
    # clipped, past the array -- get zeros from the same loops, on the thread that packs.
    zeros = None if not buf.padded else lanes[1] if inside else f"max({lanes[0]}, {lanes[1]})"
    x = [f"pt_x{d}" for d in range(n)]
    idx = [f"{o(D)} + pt_b * {BS} + pt_l" if d == D else f"{o(d)} + {x[d]}" for d in range(n)]
    target = f"pt_b * {buf.block_stride} + {buf.inner_offset(x)} + pt_l"
    code: cgen.Generable = cgen.Line(f"{buf.name}[{target}] = {elem(idx)};")
    zero: Optional[cgen.Generable] = cgen.Line(f"{buf.name}[{target}] = 0;") if zeros is not None else None
    others = [d for d in range(n) if d != D]
    group = block_group(buf) if inside and D == n - 1 else 0
    if group:
        loops = [("group", D)] + [("axis", d) for d in others] + [("block", D), ("lane", D)]
    elif D == n - 1:
        loops = [("axis", d) for d in others] + [("block", D), ("lane", D)]
    elif inside:
        loops = [("block", D)] + [("axis", d) for d in others] + [("lane", D)]
    else:
        loops = [("axis", d) for d in others if d < D] + [("block", D), ("lane", D)] + \
                [("axis", d) for d in others if d > D]
    last = n - 1

    def axis(d: int, body: cgen.Generable) -> cgen.Generable:
        return cgen.For(f"long {x[d]} = {lo[d]}", f"{x[d]} < {hi[d]}", f"{x[d]} += 1", cgen.Block([body]))
    for kind, d in reversed(loops):
        if kind == "axis":
            code = axis(d, code)
            if zero is not None:  # only inside the lane loop (a clipped transposing pack's later axes)
                zero = axis(d, zero)
        elif kind == "lane":
            if not inside:  # each row, before it is copied: the row a block further on
                code = cgen.Block(_row_prefetch(buf, elem, x, lo[last], hi[last]) + [code])
            code = cgen.For(f"long pt_l = {lanes[0]}", f"pt_l < {lanes[1]}", "pt_l += 1", code)
            if zero is not None:
                code = cgen.Block([code, cgen.For(f"long pt_l = {zeros}", f"pt_l < {BS}", "pt_l += 1", zero)])
                zero = None
        elif kind == "group":
            code = cgen.For("long pt_g = 0", f"pt_g < {buf.nblocks}", f"pt_g += {group}", cgen.Block([code]))
        elif group:
            code = cgen.For("long pt_b = pt_g", f"pt_b < min(pt_g + {group}L, {buf.nblocks}L)", "pt_b += 1",
                            cgen.Block([code]))
        else:
            body = [code]
            ahead = _row_prefetch(buf, elem, ["0"] * n, "0", hi[last]) if inside else []
            if ahead:  # the lanes run innermost: the next block's rows, all before this block's copy
                body = [cgen.For("long pt_l = 0", f"pt_l < {BS}", "pt_l += 1", cgen.Block(ahead))] + body
            code = cgen.For("long pt_b = 0", f"pt_b < {buf.nblocks}", "pt_b += 1", cgen.Block(body))
    return code


#: Bytes of each source row a pack along the last axis copies before the next row: a group of blocks.
GROUP_BYTES = 256


def block_group(buf: PackBuffer) -> int:
    """Blocks a pack along the array's last axis fills together, row by row (0: no groups, one block or
    fewer per :data:`GROUP_BYTES`).

    Block by block down all the rows, each row's block is a fraction of a line; row by row across all
    the blocks, consecutive writes land ``block_stride`` apart -- 8 KiB for ``A[k][i]`` packed by 8
    rows of ``i``, one L1 set for all 128 of them, and ``A.T @ B`` ran 19% slower than ``A @ B``.  A group
    reads :data:`GROUP_BYTES` of each row and writes one contiguous run per block in it.

    >>> # float32 blocks of 8 (A.T of A.T @ B): groups of 8;  of 32 (B of A @ B): 2;  of 64: 0
    """
    per = max(1, GROUP_BYTES // (buf.block * buf.array_item_bytes))
    return per if 1 < per < buf.nblocks else 0


def copy_code(buf: PackBuffer, fp: Footprint, elem: Callable[[Sequence[str]], str], *,
              parallel: bool = False) -> List[cgen.Generable]:
    """C lines that bind the box origin and fill ``buf`` from the array.

    ``elem(index)`` is the C lvalue of the array at the given index expressions.
    A box inside the array (the common case, tested at run time) copies with
    constant bounds; one at an edge copies its cells inside the array only (box
    cells outside it are never read).  A padded buffer's rows get zeros in their
    lanes past the array or the box.  Both nests come from :func:`_copy_nest`.
    With ``parallel`` (a buffer shared by the threads, filled outside any
    parallel loop) the outermost copy loop is split over the threads.
    """
    n = len(fp.size)
    lines: List[cgen.Generable] = [cgen.Line(f"const long {buf.origin(d)} = {fp.lo[d]};") for d in range(n)]
    fast, clipped = _copy_nest(buf, fp, elem, inside=True), _copy_nest(buf, fp, elem, inside=False)
    pragma = [cgen.Pragma("omp parallel for schedule(static)")] if parallel else []
    return lines + [cgen.If(_box_inside(buf, fp), cgen.Block(pragma + [fast]), cgen.Block(pragma + [clipped]))]
