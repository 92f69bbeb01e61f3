"""Where a register block's operands lie: packed slivers, row strides, the next block's rows.

The address arithmetic both register-tile emitters share (codegen/microkernel.py for C,
codegen/llvm_tile.py for LLVM): which loads of a block read a packed buffer and where
(:class:`PackedLoad`), the distance between two rows' cells of an unpacked operand
(:func:`row_stride`), the cache lines of the next row block (:func:`next_rows`), and index
substitution for one row and vector of the block (:func:`subst_index`).

    >>> # C[i][j] += A[i][k] * B[k][j], 8 x 32 floats, B packed by 32 columns:
    >>> # B[k][pt_j0 + 16] -> pt_pk1[(pt_pq1 / 32) * 16384 + (k - o) * 32 + 16];  row_stride(A[i][k]) = K
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional

from polytile import dtypes as D
from polytile.poly import body as B


def depends(n: B.Node, it: str) -> bool:
    return any(isinstance(x, B.Iter) and x.name == it for x in B.walk(n))


#: Bytes one software prefetch brings in (a cache line on every x86 and Arm core we target).
LINE_BYTES = 64


def next_rows(index, iname: str, MR: int, NR: int, V: int, dtype: str):
    """Where the block ``MR`` rows further on lies: ``(cells, checks, axes)``.

    ``cells`` are ``(row, vector)`` offsets from this block's corner of the first element of
    every cache line of that block, ``checks`` the two row offsets (its first and last row)
    whose index must lie inside the array -- the index is affine in the row, so the rows between
    are inside too -- along ``axes``, the array axes that move with the rows.  Nothing when no
    axis moves with the rows.

    >>> # C[i][j], 8 x 32 floats: rows 8..15, vectors 0 and 1; checks rows 8 and 15 on axis 0
    """
    axes = [d for d, e in enumerate(index) if depends(e, iname)]
    if not axes:
        return [], (), []
    step = max(1, LINE_BYTES // (V * (D.width(dtype) // 8)))
    cells = [(MR + r, v) for r in range(MR) for v in range(0, NR // V, step)]
    return cells, (MR, 2 * MR - 1), axes


def next_block_prefetch(bp, array, index, iname: str, jname: str, MR: int, NR: int, V: int) -> List[str]:
    """Prefetch (for writing, into L2) the accumulator block the next row block will load.

    Rows-innermost nests (``for j_t1: for i_t1``, the autotiler's usual) read the ``MR`` rows below
    this one, same columns, in the next register tile.  Those rows were last touched one
    ``kc`` step ago, a whole output panel earlier, so they come from L3 or memory; loaded
    at the start of the next tile they stall its first multiply-adds, while a prefetch issued
    here has the whole reduction loop to arrive (measured: SGEMM 2048^3 about 3% faster on a
    Xeon with AVX-512).  L2 rather than L1: the packed slivers stream through L1 meanwhile.
    The address is formed only when those rows are inside the array (a prefetch never faults,
    but C pointer arithmetic past the array is undefined).  Columns innermost (``inner="ij"``) the
    next tile lies beside this one, where the prefetchers follow the rows, and these rows come
    ``nc / nr`` tiles later: prefetching the tile beside instead, or nothing, measured within noise
    of this (SGEMM 2048^3, Xeon VM).

    >>> # __builtin_prefetch(&C[(pt_i0 + 8)][(pt_j0 + 0)], 1, 2); ...
    """
    cells, checks, axes = next_rows(index, iname, MR, NR, V, array.dtype)
    if not cells:
        return []
    cond = " && ".join(f"({e}) >= 0 && ({e}) < {array.shape[d]}" for r in checks for d in axes
                       for e in [bp.expr(subst_index(index, iname, jname, r, 0, V)[d])])
    calls = " ".join(f"__builtin_prefetch(&{bp.access(array.name, subst_index(index, iname, jname, r, v, V))}, 1, 2);"
                     for r, v in cells)
    return [f"if ({cond}) {{ {calls} }}"]


class PackedLoad:
    """How one load of a register tile reads a packed buffer (see codegen/pack.py).

    The load's index along the packed axis is ``x + c`` (``x`` the block loop
    the axis follows, ``c`` free of the reduction loops), so its position in
    the box at the block's first row/column is ``q = x0 + c - origin``; when
    ``q`` is a multiple of the block, the block's rows/columns are one packed
    sliver: element ``buf[(q / block) * block_stride + inner + lane]``.
    """

    def __init__(self, key: int, buf, load: B.Load, axis: int, it: str, start: str):
        self.key, self.buf, self.load, self.axis, self.it, self.start = key, buf, load, axis, it, start

    @property
    def q(self) -> str:
        return f"pt_pq{self.key}"

    def position(self, bp, start: str) -> str:
        """``q`` (C text) for a block whose first row/column is ``start``."""
        at = bp.expr(subst(self.load.index[self.axis], {self.it: start}))
        return f"({at}) - {self.buf.origin(self.axis)}"

    def bases(self, bp) -> List[str]:
        return [f"const long {self.q} = {self.position(bp, self.start)};"]

    def aligned(self) -> str:
        return f"{self.q} % {self.buf.block} == 0"

    def aligned_at(self, bp, start: str) -> str:
        """:meth:`aligned` for a block starting at ``start`` (a C expression), before ``pt_pq`` is bound."""
        return f"({self.position(bp, start)}) % {self.buf.block} == 0"

    def address(self, bp, ld: B.Load, lane: int) -> str:
        t = [f"{bp.expr(e)} - {self.buf.origin(d)}" for d, e in enumerate(ld.index)]
        return (f"{self.buf.name}[({self.q} / {self.buf.block}) * {self.buf.block_stride} + "
                f"{self.buf.inner_offset(t)} + {lane}]")


def packed_loads(packed, per_r, per_v, iname, jname, MR, NR, red_iters) -> Dict[B.Load, PackedLoad]:
    """The loads of the block that can read a packed buffer in scope (``packed``: array -> PackBuffer)."""
    out: Dict[B.Load, PackedLoad] = {}
    for loads, it, block, start in ((per_r, iname, MR, "pt_i0"), (per_v, jname, NR, "pt_j0")):
        for ld in loads:
            buf = packed.get(ld.array)
            if buf is None or buf.block != block or len(ld.index) != len(buf.size):
                continue
            axes = [d for d, e in enumerate(ld.index) if depends(e, it)]
            if axes != [buf.dim] or not is_iter_plus_const(ld.index[buf.dim], it):
                continue
            if any(depends(ld.index[buf.dim], r) for r in red_iters):
                continue
            out[ld] = PackedLoad(len(out), buf, ld, buf.dim, it, start)
    return out


def row_stride(ld: B.Load, iname: str, arrays) -> Optional[int]:
    """Elements between the cells ``ld`` reads for rows ``i`` and ``i + 1`` of a row-major array, where
    every index moving with ``iname`` is affine in it; else None.

    >>> # I[n][y + ky][x + kx][ci] of a 1x28x28x128 image, rows x: 128;  A[2*i + 1][k] of 64x32: 64
    """
    arr = arrays.get(ld.array)
    shape = getattr(arr, "shape", None)
    if shape is None or len(shape) != len(ld.index):
        return None
    step = 0
    for d, e in enumerate(ld.index):
        if not depends(e, iname):
            continue
        lin = B.linear(e)
        if lin is None or not isinstance(lin.get(iname), int):
            return None
        step += lin[iname] * math.prod(shape[d + 1:])
    return step or None


def is_iter(e: B.Node, name: str) -> bool:
    return isinstance(e, B.Iter) and e.name == name


def is_iter_plus_const(e: B.Node, name: str) -> bool:
    """``name`` plus something that does not read it: a unit stride along ``name``
    (``j``, ``j + 1``, ``x1 + k1 - 1``; not ``2*j``, ``j + j``, ``c - j``)."""
    if is_iter(e, name):
        return True
    lin = B.linear(e)
    if lin is not None:
        return lin.get(name) == 1
    if isinstance(e, B.Bin) and e.op in ("+", "-"):
        if is_iter(e.a, name) and not depends(e.b, name):
            return True
        if e.op == "+" and is_iter(e.b, name) and not depends(e.a, name):
            return True
    return False


def subst_index(index, iname: str, jname: str, r: int, v: int, V: int):
    """Index expressions with i -> pt_i0 + r and j -> pt_j0 + v*V (as Iter placeholders)."""
    return tuple(subst(e, {iname: f"(pt_i0 + {r})", jname: f"(pt_j0 + {v * V})"}) for e in index)


def subst_lane(index, jname: str, lane: int):
    """Index expressions with j -> pt_j0 + lane (one lane of a gathered column vector)."""
    return tuple(subst(e, {jname: f"(pt_j0 + {lane})"}) for e in index)


def subst(e: B.Node, env: Dict[str, str]) -> B.Node:
    if isinstance(e, B.Iter) and e.name in env:
        return B.Iter(env[e.name])
    if isinstance(e, B.Bin):
        return B.Bin(e.op, subst(e.a, env), subst(e.b, env), e.dtype)
    if isinstance(e, B.Neg):
        return B.Neg(subst(e.operand, env), e.dtype)
    if isinstance(e, B.Load):
        return B.Load(e.array, tuple(subst(x, env) for x in e.index), e.dtype)
    if isinstance(e, B.Cast):
        return B.Cast(subst(e.operand, env), e.dtype)
    return e
