"""Register tiling: an accumulator block held in vector registers (unroll-and-jam).

A ``regtile`` mark (:class:`~polytile.scheduling.marks.RegTile`) sits on the
outermost of ``n`` reduction loops that directly enclose two *block* loops
``i`` (``MR`` rows) and ``j`` (``NR`` columns, unit stride in the output,
``NR`` a multiple of the SIMD lane count ``V``).  For a statement like ``C[i][j] += A[i][k] * B[k][j]`` the emitted
code is, for a full ``MR x NR`` block::

    acc_r_v = 0                                    for r < MR, v < NR/V (the reduction's identity)
    for k ...:                                     (the AST's own reduction loops)
        b_v = B[k][j0 + v*V : +V]                  loads varying with j, not i (kept in registers)
        a_r = A[i0 + r][k]                          loads varying with i, not j (broadcast)
        acc_r_v += a_r * b_v
    C[i0 + r][j0 + v*V : +V] += acc_r_v            (segment_sum; else acc starts from C)

The columns may also be an output axis other than the last (:attr:`Plan.out_strided`: a channels-first
convolution's output channels, ``O[n][co][y][x]``, whose filter ``K[ky][kx][ci][co]`` is the vector
operand): the sums are the same, each lane of ``acc_r_v`` is added to its own cell at the end.

fully unrolled in the text, so the ``MR * NR/V`` accumulators live in
registers and every load is hoisted to the loop level where it varies.
Partial blocks (at the edges) run the same micro-kernel as an edge block
(:func:`_edge_block`), or the generic loop nest where that cannot be.  Anything the
pattern does not cover (other reductions, gathers along ``j``, several
statements in the block, bounds that depend on the reduction loops) falls
back to the generic code: the mark is a request, never a correctness risk.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import cgen
import islpy as isl

from polytile import dtypes as D
from polytile.poly import body as B
from polytile.scheduling.marks import NO_LOOP, RegTile

from .block_operands import (depends, is_iter, is_iter_plus_const, next_block_prefetch, packed_loads, row_stride, subst,
                             subst_index, subst_lane)
from .c_expr import c_const

#: The element types a register tile holds in GCC vectors (their sizes come from polytile.dtypes).
VECTOR_DTYPES = ("float32", "float64", "int32", "int64")


def vec_type(dtype: str, lanes: int) -> str:
    return f"pt_v{dtype}x{lanes}"


#: The macro a register tile wraps around each column vector it loads: the vector is kept in a register
#: for the block's rows.  Without it GCC folds the load into every row's multiply-add when the rows are
#: few (``vfmadd231ps (mem), zmm, zmm`` MR times per vector): a 4 x 64 float block issued 16 vector
#: loads per 16 multiply-adds instead of 4 and ran at 0.78x of the 8 x 32 block on a Zen 5 (0.75x for
#: 4 x 48), where the load ports, not the FMA units, became the bound.
KEEP = "PT_IN_REGISTER"


def keep_macro(vector_bytes: int) -> str:
    """The definition of :data:`KEEP` for vectors of ``vector_bytes``: an empty ``asm`` that takes the
    vector in an x86 SIMD register (``"+v"``), where the compiler has registers that wide; a no-op
    elsewhere (another architecture, or a descriptor wider than the build's ISA, whose vectors GCC
    splits and the constraint could not hold).  ``-DPT_NO_KEEP`` in the C flags turns it off (for A/B
    measurements).

    >>> print(keep_macro(64).splitlines()[0])
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX512F__) && !defined(PT_NO_KEEP)
    """
    isa = {16: "__SSE2__", 32: "__AVX__", 64: "__AVX512F__"}.get(vector_bytes)
    guard = f"(defined(__GNUC__) || defined(__clang__)) && defined({isa}) && !defined(PT_NO_KEEP)" if isa else "0"
    return (f"#if {guard}\n#define {KEEP}(x) __asm__(\"\" : \"+v\"(x))\n"
            f"#else\n#define {KEEP}(x) ((void)0)\n#endif\n")


def vec_typedef(dtype: str, lanes: int, ctype: str) -> str:
    """An unaligned, may-alias GCC vector type (the same trick the intrinsics headers use)."""
    item = D.width(dtype) // 8
    return (f"typedef {ctype} {vec_type(dtype, lanes)} "
            f"__attribute__((vector_size({item * lanes}), aligned({item}), may_alias));")


def mentions(text: str, name: str) -> bool:
    """Whether the C text ``text`` names the identifier ``name`` (a whole word).

    >>> mentions("A[i][k] * B[k][j]", "k"), mentions("Ak[i]", "k")
    (True, False)
    """
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


class _Fallback(Exception):
    """The pattern does not apply; emit the generic code."""


#: The public name of the fallback signal, for the other emitters (codegen/llvm_tile.py).
Fallback = _Fallback


def _ub(cond: str, it: str) -> str:
    m = re.match(rf"^{re.escape(it)} <= (.*)$", cond)
    if m:
        return m.group(1)
    m = re.match(rf"^{re.escape(it)} < (.*)$", cond)
    if m:
        return f"({m.group(1)}) - 1"
    raise _Fallback(f"loop condition {cond!r} not of the form {it} <= bound")


def emit(printer, n: isl.AstNode, mark: RegTile, generic) -> Optional[List]:
    """Code for the subtree ``n`` of a ``regtile`` mark, or None when the pattern does not apply.

    ``printer`` is the AstPrinter (for bodies and C helpers); ``generic()``
    returns the generic code of the subtree for partial blocks.
    """
    try:
        return _emit(printer, n, mark, generic)
    except _Fallback as why:
        printer.notes.append(f"regtile not applied: {why}")
        return None


def _c(e) -> str:
    return e.to_C_str()


@dataclass
class Plan:
    """What a register tile's pattern analysis found (shared by the C and LLVM emitters).

    ``red_loops`` are the reduction loops' AST nodes, outermost first, with their C texts
    ``(it, init, cond, inc)``; ``block`` the two block loops ``(it, lower bound, upper bound, node)``
    (inclusive C bounds); ``args`` the statement's iterators as C texts of the AST iterators;
    the loads of the value are split by what they vary with (``per_k``: neither block loop,
    ``per_r``: the rows only, ``per_v``: the columns only, ``per_rv``: both).  ``strided`` are the
    ``per_v`` loads whose column axis is not their last (``B[j][k]`` of ``A @ B.T``): a packed sliver
    makes them unit-stride; unpacked, each vector is gathered lane by lane.  ``out_strided``: the
    output's column axis is not its last (autotile.roles, short last axes); a full block then adds
    each lane to its cell (the block's segment sum, :func:`segment_sum`, is required).
    """

    red_loops: List[Tuple[isl.AstNode, str, str, str, str]]
    block: List[Tuple[str, str, str, isl.AstNode]]
    call: isl.AstExpr
    st: object  # poly.scop.Statement
    args: Dict[str, str]
    dtype: str
    loads: List[B.Load]
    per_k: List[B.Load]
    per_r: List[B.Load]
    per_v: List[B.Load]
    per_rv: List[B.Load]
    names: Dict[B.Load, str]
    strided: Tuple[B.Load, ...] = ()
    out_strided: bool = False

    @property
    def red_iters(self) -> set:
        return {it for _, it, *_ in self.red_loops}

    def uses_red(self, text: str) -> bool:
        """Whether the C expression ``text`` names a reduction loop's iterator."""
        return any(mentions(text, r) for r in self.red_iters)

    def outer_iters(self, iname: str, jname: str) -> List[str]:
        """The statement's iterators bound outside the block: neither its rows ``iname``, its columns
        ``jname``, nor set by a reduction loop (their values are known before the first block)."""
        return [v for v in self.st.iters if v not in (iname, jname) and not self.uses_red(self.args[v])]


def analyse(stmts, arrays, n: isl.AstNode, mark: RegTile) -> Plan:
    """The register tile of mark ``mark`` over subtree ``n``; raises :class:`_Fallback` when the pattern does not apply.

    >>> # plan = analyse(printer.stmts, printer.arrays, inner, RegTile(1, "i", 8, "j", 32, 16))
    """
    iname, jname, NR, V = mark.rows, mark.cols, mark.nr, mark.lanes
    if NO_LOOP in (iname, jname):
        raise _Fallback("a one-dimensional block (C statements' blocks only, codegen/c_regblock.py)")
    red_loops, block, call, st, args = chain(stmts, n, mark)
    (ci, _, _, inode), (_, jlb, jub, _) = block
    if inode is not None and any(mentions(text, ci) for text in (jlb, jub)):
        raise _Fallback("the column loop's bounds depend on the row loop (a triangular block)")
    body = st.body
    dtype = arrays[body.array].dtype
    if body.reduce not in ("+", "*") or dtype not in VECTOR_DTYPES or NR % V:
        raise _Fallback("only + and * reductions of float/int arrays with NR a multiple of the lanes")
    out_axes = [d for d, e in enumerate(body.index) if depends(e, jname)]
    if len(out_axes) != 1 or not is_iter(body.index[out_axes[0]], jname):
        raise _Fallback("the output is not indexed by the vector loop on one axis")
    out_strided = out_axes[0] != len(body.index) - 1
    for x in B.walk(body.value):
        if x.dtype != dtype and not isinstance(x, (B.Iter, B.Const)) and not _inside_index(body.value, x):
            raise _Fallback("mixed dtypes in the block body")
        if isinstance(x, (B.Cmp, B.Select, B.Call)):
            raise _Fallback("comparisons, selects and calls are not vectorised")
    # Classify the loads of the value.
    loads: List[B.Load] = []
    _collect_loads(body.value, loads)
    per_k, per_r, per_v, per_rv, strided = [], [], [], [], []
    for ld in loads:
        dj = any(depends(e, jname) for e in ld.index)
        di = any(depends(e, iname) for e in ld.index)
        if dj:
            unit = column_axis(ld, jname)
            # A step above one only where the load does not move with the rows: gathered lane by lane.
            axis = unit if unit is not None or di else column_axis(ld, jname, stepped=True)
            if axis is None or (axis != len(ld.index) - 1 and di):
                raise _Fallback(f"load of {ld.array} is not unit-stride along {jname}")
            if unit is None or axis != len(ld.index) - 1:
                strided.append(ld)
        (per_rv if (di and dj) else per_v if dj else per_r if di else per_k).append(ld)
    names: Dict[B.Load, str] = {}
    for k, ld in enumerate(loads):
        names[ld] = ("s" if ld in per_k else "a" if ld in per_r else "b" if ld in per_v else "x") + str(k)
    plan = Plan(red_loops, block, call, st, args, dtype, loads, per_k, per_r, per_v, per_rv, names, tuple(strided),
                out_strided)
    if out_strided and not segment_sum(plan):
        raise _Fallback("a strided output column needs the block's segment sum (the value reads the output)")
    return plan


def column_axis(ld: B.Load, jname: str, stepped: bool = False) -> Optional[int]:
    """The one axis of ``ld`` that moves with the column loop ``jname``, indexed ``j + c``; else None.
    With ``stepped``, also one indexed ``s*j + c`` for a step ``s > 1`` (a strided convolution's
    ``I[n][ci][y][2*x + kx]``), whose vectors are gathered lane by lane (:attr:`Plan.strided`).

    >>> # B[k][j + 1] -> 1;  B[j][k] -> 0 (a strided column operand);  B[j][j] -> None;  B[2*j] -> 0 if stepped
    """
    axes = [d for d, e in enumerate(ld.index) if depends(e, jname)]
    if len(axes) != 1:
        return None
    e = ld.index[axes[0]]
    if is_iter_plus_const(e, jname):
        return axes[0]
    lin = B.linear(e) if stepped else None
    return axes[0] if lin is not None and lin.get(jname, 0) > 1 else None


def chain(stmts, n: isl.AstNode, mark: RegTile):
    """The loop chain under a ``regtile`` mark: ``(red_loops, block, call, st, args)`` as in :class:`Plan`.

    The chain must be ``mark.reduction_loops`` plain loops, then the row and column block loops
    (unit steps, bounds free of the reduction loops; the column loop's may move with the row loop's
    iterator, a triangular block), then one statement whose iterators the block
    loops are; otherwise :class:`_Fallback` (shared by the vector and the C-text emitters).  A role
    that is :data:`~polytile.scheduling.marks.NO_LOOP` has no loop and ``None`` in ``block``; a role
    whose loop isl left out (one iteration) has ``(value, value, value, None)``, the statement's
    argument as its bounds.
    """
    nred, iname, jname = mark.reduction_loops, mark.rows, mark.cols
    # Walk the chain: nred reduction loops, then the i and j block loops, then one statement.
    red_loops: List[Tuple[isl.AstNode, str, str, str, str]] = []
    node = n
    for _ in range(nred):
        while node.get_type() == isl.ast_node_type.mark:
            node = node.mark_get_node()
        if node.get_type() != isl.ast_node_type.for_ or node.for_is_degenerate():
            raise _Fallback("reduction loops are not a plain loop chain")
        it = _c(node.for_get_iterator())
        red_loops.append((node, it, _c(node.for_get_init()), _c(node.for_get_cond()), _c(node.for_get_inc())))
        node = node.for_get_body()
    # Then the block loops, then the statement.  isl leaves out a block loop of one iteration
    # (mr = 1 under a row tile of one row: the row is the tile loop's iterator); that role's
    # block is the statement's iterator as isl computes it, fixed over the block.
    found = []
    while True:
        while node.get_type() == isl.ast_node_type.mark:
            node = node.mark_get_node()
        if node.get_type() != isl.ast_node_type.for_ or len(found) == 2:
            break
        it = _c(node.for_get_iterator())
        if node.for_is_degenerate():
            found.append((it, _c(node.for_get_init()), _c(node.for_get_init()), node))
        elif _c(node.for_get_inc()) != "1":
            raise _Fallback("block loop with a non-unit step")
        else:
            found.append((it, _c(node.for_get_init()), _ub(_c(node.for_get_cond()), it), node))
        node = node.for_get_body()
    if node.get_type() != isl.ast_node_type.user:
        raise _Fallback("block loops are not plain loops around one statement")
    call = node.user_get_expr()
    st = stmts[call.op_get_arg(0).id_get_id().get_name()]
    args = {v: _c(call.op_get_arg(k + 1)) for k, v in enumerate(st.iters)}
    red_iters = {it for _, it, *_ in red_loops}
    loops = {f[0]: f for f in found}
    block = []
    for role in (iname, jname):
        if role == NO_LOOP:
            block.append(None)
        elif args.get(role) in loops:
            block.append(loops.pop(args[role]))
        elif role in args and not any(mentions(args[role], x) for x in list(loops) + list(red_iters)):
            block.append((args[role], args[role], args[role], None))
        else:
            raise _Fallback("block loops are not the statement's own iterators")
    if loops or [b[0] for b in block if b is not None and b[3] is not None] != [f[0] for f in found]:
        raise _Fallback("block loops are not the statement's own iterators, rows outside columns")
    for text in (x for b in block if b is not None for x in b[1:3]):
        if any(mentions(text, r) for r in red_iters):
            raise _Fallback("block bounds depend on the reduction loops")
    return red_loops, block, call, st, args


def _emit(printer, n: isl.AstNode, mark: RegTile, generic) -> List:
    iname, MR, jname, NR, V = mark.rows, mark.mr, mark.cols, mark.nr, mark.lanes
    plan = analyse(printer.stmts, printer.arrays, n, mark)
    red_loops = [(it, init, cond, inc) for _, it, init, cond, inc in plan.red_loops]
    st, args, dtype, body = plan.st, plan.args, plan.dtype, plan.st.body
    (_, ilb, iub, _), (_, jlb, jub, _) = plan.block
    red_iters = plan.red_iters
    per_k, per_r, per_v, per_rv, names = plan.per_k, plan.per_r, plan.per_v, plan.per_rv, plan.names
    uses_red = plan.uses_red

    vt = vec_type(dtype, V)
    printer.vector_types.add((dtype, V))
    NV = NR // V
    bp = printer.body
    outer_binds = [f"const long {v} = {args[v]};" for v in plan.outer_iters(iname, jname)]
    lines: List[str] = outer_binds + [f"const long pt_i0 = {ilb}; const long pt_j0 = {jlb};"]
    segment = segment_sum(plan)
    identity = c_const(0 if body.reduce == "+" else 1, dtype)
    for r in range(MR):
        for v in range(NV):
            start = (f"({vt}){{{'0' if body.reduce == '+' else ', '.join([identity] * V)}}}" if segment
                     else f"*({vt} *)&{bp.access(body.array, subst_index(body.index, iname, jname, r, v, V))}")
            lines.append(f"{vt} acc_{r}_{v} = {start};")
    packed = packed_loads(printer.packed, per_r, per_v, iname, jname, MR, NR, red_iters)
    own_rows = [str(r) for r in range(MR)]

    def reduction_loop(use_packs: bool, rows: List[str] = own_rows, pack_cols: bool = True,
                       pack_rows: bool = True) -> cgen.Generable:
        """The reduction loops around one step of the block; row ``r`` is ``pt_i0 + rows[r]`` (an edge
        block's rows repeat its last one), columns (rows) use their packed slivers only when
        ``pack_cols`` (``pack_rows``)."""
        inner: List[str] = []
        for ld in per_k:
            inner.append(f"const {printer.ctype(ld.dtype)} {names[ld]} = {bp.access(ld.array, ld.index)};")
        for v in range(NV):
            for ld in per_v:
                if use_packs and pack_cols and ld in packed:
                    value = f"*({vt} *)&{packed[ld].address(bp, ld, v * V)}"
                elif ld in plan.strided:
                    value = f"({vt}){{{', '.join(bp.access(ld.array, subst_lane(ld.index, jname, v * V + x)) for x in range(V))}}}"
                else:
                    value = f"*({vt} *)&{bp.access(ld.array, subst_index(ld.index, iname, jname, rows[0], v, V))}"
                inner.append(f"{vt} {names[ld]}_{v} = {value}; {KEEP}({names[ld]}_{v});")
        # An unpacked row operand of the block's own rows: one pointer to row 0 and constant offsets,
        # not MR separate index expressions, which gcc kept as MR induction variables and, out of
        # registers, reloaded from the stack every step (conv2d 1x28x28x128: 0.866 -> 0.812 ms).
        steps: Dict[B.Load, int] = {}
        for ld in per_r:
            step = row_stride(ld, iname, printer.arrays) if rows is own_rows and ld.array not in bp.locals else None
            if step is not None and not (use_packs and pack_rows and ld in packed):
                steps[ld] = step
                row0 = bp.access(ld.array, subst_index(ld.index, iname, jname, rows[0], 0, V))
                inner.append(f"const {printer.ctype(ld.dtype)} *{names[ld]}_p = &{row0};")
        for r in range(MR):
            for ld in per_r:
                if use_packs and pack_rows and ld in packed:
                    addr = packed[ld].address(bp, ld, rows[r])
                elif ld in steps:
                    addr = f"{names[ld]}_p[{r * steps[ld]}]"
                else:
                    addr = bp.access(ld.array, subst_index(ld.index, iname, jname, rows[r], 0, V))
                inner.append(f"const {printer.ctype(ld.dtype)} {names[ld]}_{r} = {addr};")
            for v in range(NV):
                for ld in per_rv:
                    inner.append(f"const {vt} {names[ld]}_{r}_{v} = *({vt} *)&{bp.access(ld.array, subst_index(ld.index, iname, jname, rows[r], v, V))};")
                expr = _vexpr(body.value, names, r, v, per_k, per_r, per_v, per_rv, printer)
                inner.append(f"acc_{r}_{v} {body.reduce}= {expr};")
        # Reduction loops around the inner body, binding the statement's iterators.
        binds = [f"const long {v} = {args[v]};" for v in st.iters if v not in (iname, jname) and uses_red(args[v])]
        loop: cgen.Generable = cgen.Block([cgen.Line(b) for b in binds] + [cgen.Line(x) for x in inner])
        for it, init, cond, inc in reversed(red_loops):
            loop = cgen.For(f"long {it} = {init}", cond, f"{it} += {inc}", cgen.Block([loop]))
        return loop

    stores = []
    for r in range(MR):
        for v in range(NV):
            if plan.out_strided:
                # Each lane to its own cell (analyse: out_strided implies the segment sum).
                for x in range(V):
                    cell = bp.access(body.array, subst_index(subst_lane(body.index, jname, v * V + x), iname, jname, r, v, V))
                    stores.append(cgen.Line(f"{cell} = {cell} {body.reduce} acc_{r}_{v}[{x}];"))
                continue
            cell = f"*({vt} *)&{bp.access(body.array, subst_index(body.index, iname, jname, r, v, V))}"
            stores.append(cgen.Line(f"{cell} = {cell} {body.reduce} acc_{r}_{v};" if segment else f"{cell} = acc_{r}_{v};"))
    if not plan.out_strided:  # the next block's cells are whole lines only along a unit-stride output
        lines += next_block_prefetch(bp, printer.arrays[body.array], body.index, iname, jname, MR, NR, V)
    if packed:
        # Packed slivers are used when the block starts on a block boundary of every
        # packed buffer (tile sizes that are multiples of mr/nr make this always true).
        bases = [cgen.Line(x) for pk in packed.values() for x in pk.bases(bp)]
        aligned = " && ".join(pk.aligned() for pk in packed.values())
        loop = cgen.If(aligned, cgen.Block([reduction_loop(True)]), cgen.Block([reduction_loop(False)]))
        fast = cgen.Block([cgen.Line(x) for x in lines] + bases + [loop] + stores)
    else:
        fast = cgen.Block([cgen.Line(x) for x in lines] + [reduction_loop(False)] + stores)
    full = f"({iub}) - ({ilb}) + 1 == {MR} && ({jub}) - ({jlb}) + 1 == {NR}"
    edge = None if always_full(plan, mark) else _edge_block(printer, plan, mark, reduction_loop, packed, outer_binds)
    if edge is None:
        return [cgen.If(full, fast, cgen.Block(generic()))]
    cond, block = edge
    return [cgen.If(full, fast, cgen.If(cond, block, cgen.Block(generic())))]


def always_full(plan: Plan, mark: RegTile) -> bool:
    """Whether every block is full as isl wrote the block loops: each runs from ``lb`` to ``lb + (MR - 1)``
    (``for (c6 = 8 * c4; c6 <= 8 * c4 + 7; ...)``), no ``min`` at an edge.  Then no edge block is
    emitted: it would be dead code the compilers still read (cold builds of SGEMM 256^3 took 18 ms
    more with it on the gcc target, 25 ms on llvm).  Read from isl's printed bounds, so anything else
    (a ``min``, another spelling) keeps the edge block.

    >>> # always_full(plan, RegTile(1, "i", 8, "j", 32, 16)) -> True for bounds 8*c4 .. 8*c4 + 7
    """
    for (_, lb, ub, _), size in zip(plan.block, (mark.mr, mark.nr)):
        if lb.lstrip("-").isdigit():
            if ub.lstrip("-").isdigit() and int(ub) - int(lb) == size - 1:
                continue
            return False
        if ub != (lb if size == 1 else f"{lb} + {size - 1}"):
            return False
    return True


#: Placeholder iterators of :func:`column_index_bound`: the block's first and last row.
ROW_LO, ROW_HI = "pt_row_lo", "pt_row_hi"


def column_index_bound(plan: Plan, ld: B.Load, iname: str, jname: str, least: bool = True) -> Optional[B.Node]:
    """The least (``least``) or greatest column index ``ld`` reads in a block, as a function of the
    block's column ``jname``, its rows (:data:`ROW_LO` / :data:`ROW_HI`) and the loops outside it;
    None if not linear.

    An edge block shifted left (:func:`_edge_block`) is safe when the least is >= 0 at the shifted
    column; one kept at its first column when the greatest is below the axis's extent at its last.
    The reduction loops are not bound where that is decided, so each reduction iterator takes the
    end of its range (over the statement's domain) that makes the index least (greatest), and the
    rows theirs::

        I[n][ci][x0 + k0][x1 + k1], rows x0, columns x1, 0 <= k1 <= 2  ->  x1 + 0  /  x1 + 2
        O[i][j - i]                                                       ->  j - pt_row_hi  /  j - pt_row_lo
    """
    e = ld.index[column_axis(ld, jname, stepped=True)]
    lin = B.linear(e)
    if lin is None:
        return None
    sub = {}
    for v, c in lin.items():
        low_end = (c > 0) == least
        if v == iname:
            sub[v] = {ROW_LO if low_end else ROW_HI: 1}
        elif v and v != jname and plan.uses_red(plan.args[v]):
            pos = plan.st.iters.index(v)
            end = plan.st.domain.dim_min_val(pos) if low_end else plan.st.domain.dim_max_val(pos)
            if not end.is_int():
                return None
            sub[v] = {"": int(end.to_python())} if int(end.to_python()) else {}
    return B.substitute(e, sub)


def edge_bounds(plan: Plan, iname: str, jname: str, arrays) -> Optional[Tuple[list, Optional[list]]]:
    """What an edge block's condition tests, on both targets: the least column index of the output cell
    and of every load moving with the columns (``>= 0`` once the columns shift left to end at the edge),
    and each load's greatest index with its array's extent (below it, for a block kept at its first
    column: such a block writes only its own output cells).  The second list is None when a load has no
    greatest index; the whole None when an access has no least one.

    >>> # C[i][j] += A[i][k] * B[k][j] -> ([<C's j>, <B's j>], [(<B's j>, N)])
    """
    body = plan.st.body
    least_all, most_all = [], []
    for n, ld in enumerate([B.Load(body.array, tuple(body.index), plan.dtype)] + plan.per_v + plan.per_rv):
        least = column_index_bound(plan, ld, iname, jname)
        if least is None:
            return None
        least_all.append(least)
        if n and most_all is not None:  # a load (n = 0 is the output cell)
            most = column_index_bound(plan, ld, iname, jname, least=False)
            most_all = None if most is None else most_all + [
                (most, arrays[ld.array].shape[column_axis(ld, jname, stepped=True)])]
    return least_all, most_all


def right_anchored(plan: Plan, packed, jname: str) -> bool:
    """Whether an edge block that cannot shift its columns left may keep its first column instead
    (the lanes past its last column computed from in-bounds cells and thrown away).  Not where a
    packed sliver moves with the columns: a sliver need not hold the columns past the tile's."""
    return not reads_output(plan) and not any(pk.it == jname for pk in packed.values())


def reads_output(plan: Plan) -> bool:
    """Whether a load of the block's value reads the array the block writes (never in a Tile
    contraction).  If none does, an edge block may shift its columns left (:func:`_edge_block`: the
    columns it computes and throws away are read from inputs only, never from cells another block or
    thread writes), and a full block may sum its segment apart from the output (:func:`segment_sum`)."""
    return any(ld.array == plan.st.body.array for ld in plan.loads)


def segment_sum(plan: Plan) -> bool:
    """Whether a full block accumulates its reduction segment from the reduction's identity and combines
    it with the output once, after the loop (``C[i][j] = C[i][j] + (a0*b0 + a1*b1 + ...)``), rather
    than starting from the output (``((C[i][j] + a0*b0) + a1*b1) + ...``).

    The loads of the output then leave the critical path: each accumulator's first multiply-add waited
    for its cell, which comes from L3 or memory (the block was last touched one ``kc`` step ago), and
    the prefetch of the next block's cells (:func:`next_block_prefetch`) now has a whole block to
    arrive.  SGEMM 2048^3 on the Zen 5 VM: 3-6% faster in three interleaved runs of 12 rounds.  This is
    BLIS's order.  For integers it is the same sum (wrap-around addition and multiplication are
    associative); for floats it regroups the sum by ``kc`` segments, which Tile leaves unspecified
    (an aggregation has no order) and the oracle's tolerance covers; gcc's ``-ffp-contract=fast``
    already fuses the multiply-adds.  Not where the value reads the output (:func:`reads_output`).
    """
    return not reads_output(plan)


def padded_columns(plan: Plan, packed, jname: str) -> bool:
    """Whether an edge block with fewer columns than ``NR`` and no room to shift left (the block is
    the array's first: ``N < NR``) may run the micro-kernel on padded columns: every load that moves
    with the columns reads a packed sliver, whose lanes past the array are zeros (``PackBuffer.padded``:
    every copy writes them), none moves with both rows and columns, and the value reads no output cell.
    The lanes past the columns then compute from zeros and are thrown away (:func:`_edge_block`).

    >>> # C[i][j] += A[i][k] * B[k][j], B packed by NR columns -> True;  B unpacked -> False
    """
    return (not reads_output(plan) and not plan.per_rv and bool(plan.per_v)
            and all(ld in packed and packed[ld].it == jname for ld in plan.per_v))


def _edge_block(printer, plan: Plan, mark: RegTile, reduction_loop, packed, outer_binds):
    """A partial block at the tile edges run by the micro-kernel, or None when it cannot be.

    Without it, a block with fewer than ``MR`` rows or ``NR`` columns ran the generic loop nest,
    an order of magnitude slower per point: SGEMM 1020^3 with 8 x 32 blocks lost 10% on its last
    four rows (0.4% of the work), 1000^3 ran at 0.71x of numpy.  The edge block runs the full
    ``MR x NR`` micro-kernel:

    - rows past the edge repeat the last row (``pt_i0 + min(r, rows - 1)``): the same loads, the
      same sums, stored once;
    - the columns are shifted left to end at the edge (``pt_j0 = jub - NR + 1``): the ``off`` columns
      before the block's own are computed from zeros and thrown away.  Its accumulators go through
      a small array (``pt_et``) so only the block's own cells are read and written;
    - where the columns cannot shift (fewer than ``NR`` in all: a product with 12 columns on a
      16-lane block) and :func:`padded_columns` holds, the block keeps its first column and reads
      its packed slivers, whose lanes past the array are zeros: one block of 16 lanes instead of
      two of 8 (1024^2 @ 1024x12: 0.16 -> 0.08 ms on the Zen 5 VM);
    - where the columns cannot shift left because a load would read before its axis (a padded
      convolution's ``I[..][x1 + k1 - 1]`` at ``k1 = 0``) and no packed sliver moves with them
      (:func:`right_anchored`), the block keeps its first column if the lanes past its last stay
      inside: they read real cells and are thrown away.

    Applies when the shifted columns stay inside every array that moves with them, or the padded
    columns' slivers are aligned, or the kept ones stay inside (checked at run time), and the value reads no cell of the output
    (:func:`reads_output`).

    >>> # if (full) {fast} else if (rows <= MR && cols <= NR && shifted inside) {edge} else {generic}
    """
    iname, MR, jname, NR, V = mark.rows, mark.mr, mark.cols, mark.nr, mark.lanes
    body = plan.st.body
    if reads_output(plan):
        return None
    bp = printer.body
    (_, ilb, iub, _), (_, jlb, jub, _) = plan.block
    vt = vec_type(plan.dtype, V)
    ct = printer.ctype(plan.dtype)
    NV = NR // V
    rows = [f"pt_er{r}" for r in range(MR)]
    # The condition is evaluated before the block binds its loops' iterators: the loops outside it
    # by their AST expressions, the reduction loops at their ends (column_index_bound).
    outer = {v: f"({plan.args[v]})" for v in plan.outer_iters(iname, jname)}
    at = {**outer, ROW_LO: f"({ilb})", ROW_HI: f"({iub})"}
    bounds = edge_bounds(plan, iname, jname, printer.arrays)
    if bounds is None:
        return None
    inside = [f"({bp.expr(subst(least, {**at, jname: f'(({jub}) - {NR - 1})'}))}) >= 0" for least in bounds[0]]
    right = None if bounds[1] is None else [
        f"({bp.expr(subst(most, {**at, jname: f'(({jlb}) + {NR - 1})'}))}) < {extent}" for most, extent in bounds[1]]
    shift = " && ".join(dict.fromkeys(inside))
    pad = padded_columns(plan, packed, jname)
    cond = (f"({iub}) - ({ilb}) + 1 <= {MR} && ({jub}) - ({jlb}) + 1 <= {NR} && ({iub}) >= ({ilb}) "
            f"&& ({jub}) >= ({jlb}) && ")
    if pad:
        col_at = " && ".join(pk.aligned_at(bp, f"({jlb})") for pk in packed.values() if pk.it == jname)
        cond += f"(({shift}) || ({col_at}))"
        first = [f"const int pt_eshift = {shift};", f"const long pt_j0 = pt_eshift ? ({jub}) - {NR - 1} : ({jlb});"]
    elif right and right_anchored(plan, packed, jname):
        # Columns that cannot shift left keep their first column when the lanes past the last stay
        # inside: a "same" convolution's first block along x1 + k1 - 1 at k1 = 0 (reads column -1
        # shifted left) ran the generic nest, 16x slower per point than the block.
        keep = " && ".join(dict.fromkeys(right))
        cond += f"(({shift}) || ({keep}))"
        first = [f"const long pt_j0 = ({shift}) ? ({jub}) - {NR - 1} : ({jlb});"]
    else:
        cond += shift
        first = [f"const long pt_j0 = ({jub}) - {NR - 1};"]
    cell = bp.access(body.array, tuple(subst(e, {iname: "(pt_i0 + pt_err)", jname: "(pt_j0 + pt_ec)"})
                                       for e in body.index))
    lines = outer_binds + [f"const long pt_i0 = {ilb};"] + first + [
        f"const long pt_erows = ({iub}) - ({ilb}) + 1; const long pt_eoff = ({jlb}) - pt_j0; "
        f"const long pt_ecols = ({jub}) - pt_j0 + 1;",
    ] + [f"const long {rows[r]} = {r} < pt_erows ? {r} : pt_erows - 1;" for r in range(MR)] + [
        f"{ct} pt_et[{MR}][{NR}] __attribute__((aligned(64)));",
        f"for (long pt_er = 0; pt_er < {MR}; pt_er++) {{ const long pt_err = pt_er < pt_erows ? pt_er : pt_erows - 1; "
        f"for (long pt_ec = 0; pt_ec < {NR}; pt_ec++) "
        f"pt_et[pt_er][pt_ec] = pt_ec < pt_eoff || pt_ec >= pt_ecols ? ({ct})0 : {cell}; }}",
    ]
    lines += [f"{vt} acc_{r}_{v} = *({vt} *)&pt_et[{r}][{v * V}];" for r in range(MR) for v in range(NV)]
    row_packs = [pk for pk in packed.values() if pk.it == iname]
    pre = [cgen.Line(x) for x in lines]
    loop = reduction_loop(False, rows, False)
    if row_packs:
        # Rows read their packed slivers when the block starts on one (as a full block's do).
        pre += [cgen.Line(x) for pk in packed.values() for x in pk.bases(bp)]
        loop = cgen.If(" && ".join(pk.aligned() for pk in row_packs),
                       cgen.Block([reduction_loop(True, rows, False)]), cgen.Block([loop]))
    if len(row_packs) < len(packed):
        # Columns too when they are not shifted (rows alone left over: the common edge): there the block's
        # columns are a full one's, on the packed slivers' boundaries; the shifted ones straddle two.
        if not row_packs:
            pre += [cgen.Line(x) for pk in packed.values() for x in pk.bases(bp)]
        loop = cgen.If("pt_eoff == 0 && " + " && ".join(pk.aligned() for pk in packed.values()),
                       cgen.Block([reduction_loop(True, rows, True)]), cgen.Block([loop]))
    if pad:
        # Padded columns read their slivers only (aligned: the entry condition); rows theirs when aligned.
        padded = reduction_loop(True, rows, True, pack_rows=False)
        if row_packs:
            padded = cgen.If(" && ".join(pk.aligned() for pk in row_packs),
                             cgen.Block([reduction_loop(True, rows, True)]), cgen.Block([padded]))
        loop = cgen.If("!pt_eshift", cgen.Block([padded]), cgen.Block([loop]))
    post = [cgen.Line(f"*({vt} *)&pt_et[{r}][{v * V}] = acc_{r}_{v};") for r in range(MR) for v in range(NV)]
    post.append(cgen.Line(
        f"for (long pt_er = 0; pt_er < pt_erows; pt_er++) {{ const long pt_err = pt_er; "
        f"for (long pt_ec = pt_eoff; pt_ec < pt_ecols; pt_ec++) {cell} = pt_et[pt_er][pt_ec]; }}"))
    return cond, cgen.Block(pre + [loop] + post)


def _inside_index(root: B.Node, x: B.Node) -> bool:
    for ld in B.loads(root):
        for e in ld.index:
            if any(y is x for y in B.walk(e)):
                return True
    return False


def _collect_loads(n: B.Node, out: List[B.Load]) -> None:
    if isinstance(n, B.Load):
        if n not in out:
            out.append(n)
        return
    for c in B.children(n):
        _collect_loads(c, out)


def _vexpr(n: B.Node, names, r, v, per_k, per_r, per_v, per_rv, printer) -> str:
    if isinstance(n, B.Load):
        base = names[n]
        if n in per_k:
            return base
        if n in per_r:
            return f"{base}_{r}"
        if n in per_v:
            return f"{base}_{v}"
        return f"{base}_{r}_{v}"
    if isinstance(n, B.Const):
        return printer.body.expr(n)
    if isinstance(n, B.Bin) and n.op in ("+", "-", "*", "/"):
        return f"({_vexpr(n.a, names, r, v, per_k, per_r, per_v, per_rv, printer)} {n.op} " \
               f"{_vexpr(n.b, names, r, v, per_k, per_r, per_v, per_rv, printer)})"
    if isinstance(n, B.Neg):
        return f"(-{_vexpr(n.operand, names, r, v, per_k, per_r, per_v, per_rv, printer)})"
    if isinstance(n, B.Cast) and n.dtype == n.operand.dtype:
        return _vexpr(n.operand, names, r, v, per_k, per_r, per_v, per_rv, printer)
    raise _Fallback(f"cannot vectorise {type(n).__name__}")
