"""SIMD reduction loops over a scalar accumulator (the C target's :class:`~polytile.codegen.c.AstPrinter`).

A loop that sums into one cell, ``for (c5 ...) { ...; C[i][j] += e; }``, is a chain of dependent
adds: one per FMA latency, and gcc keeps a float chain scalar (it may not reassociate).  With
``#pragma omp simd reduction`` over a scalar accumulator, each lane keeps a partial sum and the
lanes are combined after the loop::

    { double pt_acc0 = 0;
      #pragma omp simd reduction(+:pt_acc0)
      for (c5 ...) { const long i = c3; ...; pt_acc0 += (e); }
      C[i][j] += pt_acc0; }

That is a reassociation.  C statements get it only where the schedule asks
(``vectorize(..., reduction=True)``, ``polytile opt --reassociate``).  A Tile aggregation has no
order, so an innermost loop the schedule left plain that sums a Tile contraction into one cell
runs so by default (:func:`lane_reduction`): matvec 4096^2 went from 4.1 ms to 1.1 ms on the Zen 5
VM (numpy 1.1 ms).  A max or min does too, its lanes combined by a declared reduction over the
serial code's NaN-propagating helper (``pt_rmax_float32``; a NaN anywhere wins in any order): row
max 4096^2 from 6.9 ms to 1.4 ms.  (OpenMP array sections would name the cell directly, but GCC 12 miscompiles
``reduction(+:C[i:1][j:1])`` on a VLA.)
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import cgen

import islpy as isl

from polytile import dtypes as D
from polytile.poly import body as B
from polytile.scheduling.core import tile_simd_reduction_blocker
from polytile.scheduling.marks import Dim, Mark, Parallel, Reduction, Simd, decode

from .c_expr import c_const, ctype, last_iteration, update

Accumulator = Tuple[Dict[str, str], Tuple, List[str], List[str]]


def _c(e) -> str:
    return e.to_C_str()


def _one_statement(printer, n: isl.AstNode):
    """``(call, statement)`` when loop ``n``'s body is one statement, else ``(None, None)``."""
    body = n.for_get_body()
    if body.get_type() == isl.ast_node_type.block and body.block_get_children().n_ast_node() == 1:
        body = body.block_get_children().get_ast_node(0)
    if body.get_type() != isl.ast_node_type.user:
        return None, None
    call = body.user_get_expr()
    return call, printer.stmts[call.op_get_arg(0).id_get_id().get_name()]


def _moves(it: str, binds: Dict[str, str], used) -> bool:
    """Whether the cell (iterators ``used``) moves with loop ``it``, as the statement's binds show."""
    return any(re.search(rf"\b{re.escape(it)}\b", binds[v]) for v in used)


def simd_accumulator(printer, n: isl.AstNode, it: str, marks: Tuple[Mark, ...]) -> Accumulator:
    """The accumulator of loop ``n``'s ``simd op:A`` mark: ``({statement: accumulator}, marks, lines
    before the loop, lines after it)`` (nothing changed when there is no such mark).  A loop whose
    body is not that one statement, or whose cell moves with the loop, loses its simd mark (noted)."""
    simd = [m for m in marks if isinstance(m, Simd) and m.reductions]
    if not simd or any(isinstance(m, Parallel) for m in marks):
        return {}, marks, [], []
    if not printer.c_source:
        return tile_accumulator(printer, n, it, marks, simd[0])
    items = simd[0].reductions
    arrays = [a for _, a in items if a not in printer.body.locals and printer.arrays[a].shape]
    if not arrays:
        return {}, marks, [], []
    call, st = _one_statement(printer, n) if len(items) == 1 else (None, None)
    kept = tuple(m for m in marks if m not in simd)
    if st is None or st.c_reduction is None or arrays != [st.body.array]:
        printer.notes.append(f"simd reduction into {', '.join(arrays)} dropped: the loop body is not one "
                             "statement updating one cell")
        return {}, kept, [], []
    lhs, op, _ = st.c_reduction
    binds = {v: _c(call.op_get_arg(i + 1)) for i, v in enumerate(st.iters)}
    used = [v for v in st.iters if re.search(rf"\b{re.escape(v)}\b", lhs)]
    if _moves(it, binds, used):
        printer.notes.append(f"simd reduction into {st.body.array} dropped: its cell moves with loop {it}")
        return {}, kept, [], []
    acc = f"pt_acc{printer.accumulators}"
    printer.accumulators += 1
    before = [f"const long {v} = {binds[v]};" for v in used]
    # The element type for floats; integers sum in long long (written back modulo the cell's
    # width, as the original's wrap-around would): no <stdint.h> needed in the user's file.
    dtype = printer.arrays[st.body.array].dtype
    before.append(f"{ctype(dtype) if D.is_float(dtype) else 'long long'} {acc} = "
                  f"{1 if op == '*=' else 0};")
    clause = Simd((Reduction("*" if op == "*=" else "+", acc),))
    return {st.name: acc}, kept + (clause,), before, [f"{lhs} {'*=' if op == '*=' else '+='} {acc};"]


def _tile_sum(printer, n: isl.AstNode, it: str):
    """``(call, statement, binds)`` when loop ``n``'s body is one Tile contraction summing into a cell that
    ``it`` does not move, in a way that may be split into lanes (``tile_simd_reduction_blocker``); else None."""
    call, st = _one_statement(printer, n)
    if st is None or st.c_text is not None or st.body.array in printer.body.locals:
        return None
    if tile_simd_reduction_blocker(st, printer.arrays[st.body.array].dtype):
        return None
    binds = {v: _c(call.op_get_arg(i + 1)) for i, v in enumerate(st.iters)}
    if _moves(it, binds, _cell_iterators(st)):
        return None
    return call, st, binds


def lane_reduction(printer, n: isl.AstNode, it: str) -> Optional[Simd]:
    """The ``simd op:A`` mark a plain innermost loop ``n`` gets by default, or None: its body is one
    Tile contraction that sums into a cell ``it`` does not move (:func:`_tile_sum`).  ``printer`` has
    the C printer's ``stmts``, ``arrays`` and ``body.locals`` (the llvm emitter asks too: it lets LLVM
    reassociate such a sum).

    >>> # for (c1 ...) { const long i = c0; const long j = c1; Y[i] += (A[i][j] * X[j]); }  -> simd +:Y
    """
    found = None if n.for_is_degenerate() else _tile_sum(printer, n, it)
    if found is None:
        return None
    _, st, binds = found
    if not any(re.search(rf"\b{re.escape(it)}\b", e) for e in binds.values()):
        return None
    return Simd((Reduction(st.body.reduce, st.body.array),))


def _cell_iterators(st) -> List[str]:
    """The statement's iterators its written cell's index uses, in the statement's order."""
    used = {x.name for e in st.body.index for x in B.walk(e) if isinstance(x, B.Iter)}
    return [v for v in st.iters if v in used]


def tile_accumulator(printer, n: isl.AstNode, it: str, marks: Tuple[Mark, ...], simd: Simd) -> Accumulator:
    """:func:`simd_accumulator` for a Tile contraction: ``Y[i] += A[i][j] * X[j]`` over ``j`` becomes::

        { float pt_acc0 = 0;
          #pragma omp simd reduction(+:pt_acc0)
          for (c1 ...) { const long i = c0; const long j = c1; pt_acc0 += (A[i][j] * X[j]); }
          { const long i = c0; Y[i] += pt_acc0; } }

    The accumulator has the cell's type: the same wrap-around for integers.  The write-back binds
    the cell's iterators as a statement line does.
    """
    kept = tuple(m for m in marks if m is not simd)
    found = _tile_sum(printer, n, it) if len(simd.reductions) == 1 else None
    if found is None or simd.reductions[0][1] != found[1].body.array:
        printer.notes.append(f"simd reduction into {simd.reductions[0][1]} dropped: the loop body is not one "
                             "Tile contraction summing into one cell the loop does not move")
        return {}, kept, [], []
    _, st, binds = found
    dtype, op = printer.arrays[st.body.array].dtype, st.body.reduce
    acc = f"pt_acc{printer.accumulators}"
    printer.accumulators += 1
    printer.accumulator_dtypes[acc] = dtype
    before = [f"{ctype(dtype)} {acc} = {c_const(D.reduction_identity(op, dtype), dtype)};"]
    target = printer.body.access(st.body.array, st.body.index)
    cell = " ".join([f"const long {v} = {binds[v]};" for v in _cell_iterators(st)] + [update(target, op, acc, dtype)])
    return {st.name: acc}, kept + (Simd((Reduction(op, acc),)),), before, [f"{{ {cell} }}"]


def lane_update(printer, st, acc: str) -> str:
    """The statement line inside a Tile lane reduction loop: the value combined into accumulator ``acc``.

    >>> # Y[i] += A[i][j] * X[j]  ->  pt_acc0 += (A[i][j] * X[j]);
    >>> # O[i] = pt_max_float32(O[i], I[i][j])  ->  pt_acc0 = pt_max_float32(pt_acc0, I[i][j]);
    """
    dtype = printer.arrays[st.body.array].dtype
    return update(acc, st.body.reduce, printer.body.as_type(st.body.value, dtype), dtype)


#: Rows :func:`jam_rows` sums side by side: 8 vector accumulators, the chains that hide a 4-cycle FMA
#: latency on two pipes.  Zen 5 VM, gcc 12, one thread, a k loop summing A[i, k] * x[k] (exploratory,
#: best of 3 x 20000 calls): 1000x100 9.4 us one row at a time, 5.5 four, 5.2 eight; 750x36 5.3, 3.2,
#: 2.8; 256x256 3.4, 2.7, 2.5; 2048^2 (from memory) 225, 216, 233.
JAM_ROWS = 8


def _only_loop(n: isl.AstNode) -> Optional[isl.AstNode]:
    """The one loop that is loop ``n``'s whole body (through blocks of one node and ``dim`` marks), or None."""
    body = n.for_get_body()
    while True:
        t = body.get_type()
        if t == isl.ast_node_type.block and body.block_get_children().n_ast_node() == 1:
            body = body.block_get_children().get_ast_node(0)
        elif t == isl.ast_node_type.mark and isinstance(decode(body.mark_get_id().get_name()), Dim):
            body = body.mark_get_node()
        else:
            break
    if body.get_type() != isl.ast_node_type.for_ or body.for_is_degenerate():
        return None
    return body


def jammable(printer, n: isl.AstNode, it: str) -> Optional[Tuple[isl.AstNode, Simd]]:
    """``(inner loop, its lane mark)`` when rows of loop ``n`` may be summed side by side
    (:func:`jam_rows`), else None: ``n`` steps by one over at least :data:`JAM_ROWS` rows (when its
    bounds are numbers), its whole body is one loop stepping by one whose bounds do not move with
    ``n``, that loop sums a Tile contraction in SIMD lanes (:func:`lane_reduction`), and the summed
    cell moves with ``n``.  Both code generators ask (``printer`` as for :func:`lane_reduction`).
    """
    if n.for_is_degenerate() or _c(n.for_get_inc()) != "1":
        return None
    inner = _only_loop(n)
    if inner is None or _c(inner.for_get_inc()) != "1":
        return None
    init, cond = _c(n.for_get_init()), _c(n.for_get_cond())
    bound = re.match(rf"^{re.escape(it)} (<=|<) (-?\d+)$", cond)
    if bound and init.lstrip("-").isdigit() and int(bound.group(2)) - int(init) + (bound.group(1) == "<=") < JAM_ROWS:
        return None
    it_in = _c(inner.for_get_iterator())
    lane = lane_reduction(printer, inner, it_in)
    if lane is None or any(re.search(rf"\b{re.escape(it)}\b", _c(e)) for e in (inner.for_get_init(), inner.for_get_cond())):
        return None
    _, st, binds = _tile_sum(printer, inner, it_in)
    if not _moves(it, binds, _cell_iterators(st)):
        return None  # every row sums into one cell: the rows would be one more reduction loop
    return inner, lane


def jam_rows(printer, n: isl.AstNode, it: str, span: Optional[Tuple[str, str]] = None) -> Optional[Tuple[List, str]]:
    """Loop ``n`` over rows whose body is one Tile sum along a SIMD lane loop (:func:`lane_reduction`), as
    :data:`JAM_ROWS` rows at a time, each with its own accumulator in one SIMD loop, or None::

        for (c0 = 0; c0 <= 69; c0 += 1) { float pt_acc0 = 0; #pragma omp simd reduction(+:pt_acc0)
                                          for (c1 ...) pt_acc0 += A[c0][c1] * X[c1]; Y[c0] += pt_acc0; }
      ->
        { const long pt_j0 = (0) + ((69) - (0) + 1) / 8 * 8;
          for (long pt_j0_r = 0; pt_j0_r < pt_j0; pt_j0_r += 8) {
            float pt_acc0 = 0, ..., pt_acc7 = 0;
            #pragma omp simd reduction(+:pt_acc0) ... reduction(+:pt_acc7)
            for (c1 ...) { { const long c0 = pt_j0_r + 0; pt_acc0 += A[c0][c1] * X[c1]; } ... }
            { const long c0 = pt_j0_r + 0; Y[c0] += pt_acc0; } ... }
          for (long c0 = pt_j0; c0 <= 69; c0 += 1) <the loop as it was> }

    One row's sum is a chain of dependent vector adds (one per FMA latency); eight rows' are eight
    chains, and each ``X[c1]`` is loaded once for all of them.  Each row's terms are still summed in its
    own lanes, in the order the one-row loop sums them: a Tile aggregation has no order, and no other
    statement runs in the loop.  ``span`` is the first and last row to run when not the loop's own (a thread's chunk of them).  Returns
    the code and the variable holding the first row left (the loop as it was runs from there on).
    """
    found = jammable(printer, n, it)
    if found is None:
        return None
    inner, lane = found
    it_in = _c(inner.for_get_iterator())
    init_in, cond_in = _c(inner.for_get_init()), _c(inner.for_get_cond())
    init, last = span or (_c(n.for_get_init()), last_iteration(_c(n.for_get_cond()), it))
    if last is None or last_iteration(cond_in, it_in) is None:
        return None
    row = f"pt_j{printer.accumulators}"
    before, after, copies, clauses = [], [], [], []
    saved = printer.accumulate
    printer.scope.extend([it, it_in])
    try:
        for r in range(JAM_ROWS):
            accumulate, marks, head, tail = tile_accumulator(printer, inner, it_in, (lane,), lane)
            clauses.extend(marks[-1].reductions)
            at = f"const long {it} = {row}_r + {r};"
            before.extend(head)
            after.extend(f"{{ {at} {line} }}" for line in tail)
            printer.accumulate = {**saved, **accumulate}
            copies.append(cgen.Block([cgen.Line(at)] + printer.node(inner.for_get_body())))
    finally:
        printer.accumulate = saved
        del printer.scope[-2:]
    pragmas = printer._pragmas((Simd(tuple(clauses)),))
    lanes = cgen.For(f"long {it_in} = {init_in}", cond_in, f"{it_in} += 1", cgen.Block(copies))
    block = [cgen.Line(b) for b in before] + [cgen.Pragma(p) for p in pragmas] + [lanes] + [cgen.Line(a) for a in after]
    # The first row left, worked out before the loop: gcc then knows the rest runs fewer than JAM_ROWS rows
    # (counting on from the jammed loop's variable, it warned of an out-of-bounds iteration it could not rule out).
    jammed = cgen.For(f"long {row}_r = {init}", f"{row}_r < {row}", f"{row}_r += {JAM_ROWS}", cgen.Block(block))
    return [cgen.Line(f"const long {row} = ({init}) + (({last}) - ({init}) + 1) / {JAM_ROWS} * {JAM_ROWS};"), jammed], row
