"""Register blocks of C statements: an ``MR x NR`` block of running values held in variables.

``polytile opt`` keeps each statement as the user's C text, so the vector
register tile of :mod:`.microkernel` (built from a Tile body) does not apply;
for a C update ``lhs op= e`` (:attr:`Statement.c_update`) under a ``regtile``
mark the same unroll-and-jam is written in C text instead::

    { const long pt_i0 = <row lb>; const long pt_j0 = <col lb>;
      const long i = pt_i0; const long j = pt_j0; typedef __typeof__(C[i][j]) pt_cell;
      pt_cell pt_a0_0, ..., pt_a3_15;
      { const long i = pt_i0 + 0; const long j = pt_j0 + 0; pt_a0_0 = C[i][j]; } ...
      for (long c4 = ...; ...)          (the AST's own reduction loops)
        { const long i = pt_i0 + 0; const long j = pt_j0 + 0; const long k = c4; pt_a0_0 += (e); } ...
      { const long i = pt_i0 + 0; const long j = pt_j0 + 0; C[i][j] = pt_a0_0; } ... }

for full blocks, the AST's loops at the edges.  The compiler keeps the
``MR * NR`` values in registers and, as each ``e`` loads along the column
loop with unit stride, packs the columns into vectors (GCC's and Clang's SLP
vectoriser): on PolyBench's gemm 3.7x faster than the tiled loops with ``C``
loaded and stored in every iteration of ``k``.

Every instance runs, in the same order, the same operation on the same
operands: the running value of a cell lives in a variable instead of memory
between its updates.  That is exact only if nothing else reads or writes the
cell meanwhile, which holds when the block holds one statement
(:func:`~.microkernel.chain`), its cell does not move with the reduction loops,
and ``e`` never reads the updated array (checked here, by name: the C
frontend proves the region's arrays do not overlap).  Anything else falls
back to the generic loops; the mark is a request, never a correctness risk.
"""
from __future__ import annotations

import re
from typing import List, Optional

import cgen
import islpy as isl

from polytile.scheduling.marks import NO_LOOP, RegTile

from . import microkernel
from .microkernel import mentions


def why_not(st) -> Optional[str]:
    """Why statement ``st`` cannot keep its running values in a register block, or None if it can:
    it must be a C update ``lhs op= e`` whose ``e`` never names the updated array.  The scheduler asks
    for blocks only where this is None (:func:`polytile.c_optimiser.register_blocks.block_roles`).

    >>> # C[i][j] += alpha * A[i][k] * B[k][j] -> None;  A[i][j] -= A[i][k] * A[k][j] -> "... reads A ..."
    """
    if st.c_text is None or st.c_update is None:
        return f"{st.name} is not a C update lhs op= e"
    if mentions(st.c_update[2], st.body.array):
        return f"{st.name}'s operand reads {st.body.array}, the array it updates"
    return None


def _at(text: str, it: str, value: str) -> str:
    """``text`` with the AST counter ``it`` replaced by ``(value)``; a counter is never another
    identifier of a bound (the counters' prefix is fresh), so it is replaced by name."""
    return re.sub(rf"\b{re.escape(it)}\b", f"({value})", text)


def _full_row(ci: str, ilb: str, jlb: str, jub: str, r: int, NR: int) -> str:
    """C true when row ``r`` of the block runs the block's ``NR`` columns ``pt_j0 ...`` (``pt_j0`` is
    row 0's first column): the column bounds at row iterator ``ci = ilb + r``.  A rectangular block's
    bounds do not name ``ci`` and every row says the same; a triangular one (``j >= i``) is full
    where the diagonal does not cut it."""
    row = f"({ilb}) + {r}"
    first = _at(jlb, ci, ilb)
    if r == 0:
        return f"({_at(jub, ci, row)}) - ({first}) + 1 == {NR}"
    if not (mentions(jlb, ci) or mentions(jub, ci)):
        return "1"
    return f"({_at(jlb, ci, row)}) == ({first}) && ({_at(jub, ci, row)}) - ({first}) + 1 == {NR}"


def emit(printer, n: isl.AstNode, mark: RegTile, generic) -> Optional[List]:
    """Code for the subtree ``n`` of a ``regtile`` mark over a C statement, or None (noted) when the
    pattern does not apply; ``generic()`` gives the AST's loops (the edges).

    >>> # mark regtile 1 i=4 j=16 4 over  for k: for i: for j: C[i][j] += alpha * A[i][k] * B[k][j];
    """
    try:
        return _emit(printer, n, mark, generic)
    except microkernel.Fallback as why:
        printer.notes.append(f"register block not applied: {why}")
        return None


def _emit(printer, n: isl.AstNode, mark: RegTile, generic) -> List:
    red_loops, block, _, st, args = microkernel.chain(printer.stmts, n, mark)
    why = why_not(st)
    if why is not None:
        raise microkernel.Fallback(why)
    lhs, op, operand = st.c_update
    red_iters = [it for _, it, *_ in red_loops]

    def uses_red(text: str) -> bool:
        return any(mentions(text, r) for r in red_iters)

    in_lhs = [v for v in st.iters if mentions(lhs, v)]
    if any(uses_red(args[v]) for v in in_lhs if v not in (mark.rows, mark.cols)):
        raise microkernel.Fallback(f"the cell {st.name} updates moves with the reduction loops")
    row, col = block  # either may be None: a block along one loop (MR x 1 or 1 x NR)
    MR, NR = mark.mr, mark.nr

    def binds(r: int, c: int, names) -> str:
        vals = {}
        if row is not None:
            vals[mark.rows] = f"pt_i0 + {r}"
        if col is not None:
            vals[mark.cols] = f"pt_j0 + {c}"
        return " ".join(f"const long {v} = {vals.get(v, args[v])};" for v in names)

    acc = [[f"pt_a{r}_{c}" for c in range(NR)] for r in range(MR)]
    head = []
    if row is not None:
        ci, ilb, iub, _ = row
        head.append(f"const long pt_i0 = {ilb};")
    if col is not None:
        _, jlb, jub, _ = col
        head.append(f"const long pt_j0 = {_at(jlb, ci, ilb) if row is not None else jlb};")
    head += [  # The cell's own type (any arithmetic type, typedefs included), from the cell itself.
            binds(0, 0, in_lhs), f"typedef __typeof__({lhs}) pt_cell;",
            "pt_cell " + ", ".join(a for row in acc for a in row) + ";"]
    loads = [f"{{ {binds(r, c, in_lhs)} {acc[r][c]} = {lhs}; }}" for r in range(MR) for c in range(NR)]
    updates = [f"{{ {binds(r, c, st.iters)} {acc[r][c]} {op} ({operand}); }}" for r in range(MR) for c in range(NR)]
    stores = [f"{{ {binds(r, c, in_lhs)} {lhs} = {acc[r][c]}; }}" for r in range(MR) for c in range(NR)]
    loop: cgen.Generable = cgen.Block([cgen.Line(x) for x in updates])
    for _, it, init, cond, inc in reversed(red_loops):
        loop = cgen.For(f"long {it} = {init}", cond, f"{it} += {inc}", cgen.Block([loop]))
    fast = cgen.Block([cgen.Line(x) for x in head + loads] + [loop] + [cgen.Line(x) for x in stores])
    tests = []
    if row is not None:
        tests.append(f"({iub}) - ({ilb}) + 1 == {MR}")
    if col is not None and row is not None:
        tests += [_full_row(ci, ilb, jlb, jub, r, NR) for r in range(MR)]
    elif col is not None:
        tests.append(f"({jub}) - ({jlb}) + 1 == {NR}")
    full = " && ".join(tests)
    over = ", ".join(x for x in (mark.rows, mark.cols) if x != NO_LOOP)
    printer.notes.append(f"register block {MR}x{NR} of {st.name} over {over}")
    return [cgen.If(full, fast, cgen.Block(generic()))]
