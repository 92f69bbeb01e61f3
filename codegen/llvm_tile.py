"""Register tiles and packed panels in LLVM IR: the ``regtile`` and ``pack`` marks of the llvm target.

Both follow their C counterparts exactly, sharing the analysis: :func:`.microkernel.analyse` decides
whether a register tile applies and classifies its loads, :func:`.block_operands.packed_loads` which
loads read a packed buffer, and :mod:`.pack` computes footprints and the blocked layout.

A register tile's ``MR x NR/V`` accumulators are ``<V x T>`` values (kept in ``alloca`` slots that
LLVM's SROA turns into registers); loads varying along the columns are unaligned vector loads, those
varying along the rows are scalars broadcast to every lane.  A full block sums its segment from the
reduction's identity and adds it to the output once (:func:`.microkernel.segment_sum`); partial blocks
at the edges run the micro-kernel as edge blocks (:func:`.microkernel._edge_block`), or the generic
loop nest where that cannot be.

    >>> # regtile(gen, inner, RegTile(1, "i", 8, "j", 32, 16), generic) -> True when emitted
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import islpy as isl
from llvmlite import ir

from polytile import dtypes as D
from polytile.poly import body as B
from polytile.errors import ENTRY_ENOMEM
from polytile.scheduling.marks import Pack, RegTile, encode

from . import block_operands, microkernel, pack as pack_mod
from .llvm_body import FP, I1, I8P, I32, I64, UnsupportedConstruct, _Unbound, memory_type, value_type

# -- packs ---------------------------------------------------------------------------


def allocate_packs(gen) -> List[Tuple[ir.Value, pack_mod.PackBuffer]]:
    """Allocate every pack buffer in the entry (one slice per thread where the pack lies in a parallel
    loop); the entry returns ENOMEM when one cannot be had.  Binds ``pt_pkbufK`` in the frame."""

    b = gen.b
    out = []
    if not gen.pack_slots:
        return out
    threads = b.sext(b.call(gen.declare("omp_get_max_threads", I32, []), []), I64) if gen.use_threads \
        else ir.Constant(I64, 1)
    alloc = gen.declare("aligned_alloc", I8P, [I64, I64])
    failed = ir.Constant(I1, 0)
    for key, (k, per_thread) in sorted(gen.pack_slots.items(), key=lambda x: x[1][0]):
        fp = gen.footprints[key]
        buf = pack_mod.PackBuffer(f"pt_pk{k}", gen.arrays[fp.array], fp.dim, fp.block, fp.size)
        item = D.width(buf.array.dtype) // 8 if buf.array.dtype != "bool" else 1
        count = ir.Constant(I64, buf.elements * item)
        if per_thread:
            count = b.mul(count, threads)
        align = ir.Constant(I64, pack_mod.ALIGN)
        size = b.mul(b.sdiv(b.add(count, ir.Constant(I64, pack_mod.ALIGN - 1)), align), align)
        mem = b.call(alloc, [align, size])
        failed = b.or_(failed, b.icmp_unsigned("==", mem, ir.Constant(I8P, None)))
        out.append((mem, buf))
        gen.frame.vals[f"pt_pkbuf{k}"] = b.bitcast(mem, memory_type(buf.array.dtype).as_pointer())

    def fail():
        free_packs(gen, out)
        gen.b.ret(ir.Constant(I32, ENTRY_ENOMEM))
        gen.b.position_at_end(gen.b.append_basic_block("unreachable"))  # the 'then' branch's merge jump
    gen.when(failed, fail)
    return out


def free_packs(gen, buffers) -> None:
    free = gen.declare("free", ir.VoidType(), [I8P])
    for mem, _ in buffers:
        gen.b.call(free, [mem])


def pack(gen, n: isl.AstNode, mark: Pack, inner: isl.AstNode, marks) -> None:
    """Copy the mark's footprint into its blocked buffer, then emit the subtree reading through it."""
    key = pack_mod.annotation(n)
    fp = gen.footprints.get(key) if key else None
    if fp is None or key not in gen.pack_slots:
        gen.notes.append(f"{encode(mark)} not applied: no footprint")
        return gen.node(inner, marks)
    k, per_thread = gen.pack_slots[key]
    arr = gen.arrays[fp.array]
    buf = pack_mod.PackBuffer(f"pt_pk{k}", arr, fp.dim, fp.block, fp.size)
    b = gen.b
    vals = gen.frame.vals
    base = vals[f"pt_pkbuf{k}"]
    if per_thread and gen.use_threads:  # without threads (no libgomp) every "thread" is thread 0
        tid = b.sext(b.call(gen.declare("omp_get_thread_num", I32, []), []), I64)
        base = b.gep(base, [b.mul(tid, ir.Constant(I64, buf.elements))])
    saved_vals, saved_packed = dict(vals), dict(gen.packed)
    vals[buf.name] = base
    for d in range(len(fp.size)):
        vals[buf.origin(d)] = gen.aexpr(fp.lo_ast[d])
    _copy(gen, buf)
    gen.packed[arr.name] = buf
    try:
        gen.node(inner, marks)
    finally:
        vals.clear()
        vals.update(saved_vals)
        gen.packed = saved_packed


def strides(buf: pack_mod.PackBuffer) -> Dict[int, int]:
    """The multiplier of each non-packed axis in a block (:meth:`.pack.PackBuffer.inner_offset`'s, as numbers)."""
    out, stride = {}, buf.block
    for d in reversed(range(len(buf.size))):
        if d == buf.dim:
            continue
        out[d] = stride
        stride *= buf.size[d]
    return out


def _offset(gen, buf: pack_mod.PackBuffer, t: List[ir.Value]) -> ir.Value:
    """``inner_offset(t)``: the position of the non-packed axes ``t`` (relative to the box) in a block."""
    b = gen.b
    off = ir.Constant(I64, 0)
    for d, s in strides(buf).items():
        off = b.add(off, b.mul(t[d], ir.Constant(I64, s)))
    return off


def _copy(gen, buf: pack_mod.PackBuffer) -> None:
    """The loops of :func:`.pack.copy_code` (serial): every cell of the box inside the array, blocked, and
    zeros in each row's lanes past the array or the box (``PackBuffer.padded``)."""
    n, D_, BS = len(buf.size), buf.dim, buf.block
    vals = gen.frame.vals
    origin = [vals[buf.origin(d)] for d in range(n)]
    shape = buf.array.shape
    x: Dict[int, ir.Value] = {}
    state: Dict[str, ir.Value] = {}

    def smax(a, c):
        return gen.b.select(gen.b.icmp_signed(">", a, c), a, c)

    def smin(a, c):
        return gen.b.select(gen.b.icmp_signed("<", a, c), a, c)

    def lo(d):
        return smax(origin[d], ir.Constant(I64, 0))

    def hi(d):
        return smin(gen.b.add(origin[d], ir.Constant(I64, buf.size[d])), ir.Constant(I64, shape[d]))

    pf_step = pack_mod.row_prefetch_step(buf)
    group = pack_mod.block_group(buf) if D_ == n - 1 else 0
    if D_ == n - 1:
        loops = ([("group", D_)] if group else []) + [("axis", d) for d in range(n) if d != D_] + \
                [("block", D_), ("lane", D_)]
    else:
        loops = [("axis", d) for d in range(n) if d < D_] + [("block", D_), ("lane", D_)] + \
                [("axis", d) for d in range(n) if d > D_]

    def level(i: int) -> None:
        b = gen.b
        if i == len(loops):
            xs = dict(x)
            xs[D_] = b.add(b.add(origin[D_], b.mul(state["b"], ir.Constant(I64, BS))), state["l"])
            t = [b.sub(xs[d], origin[d]) for d in range(n)]
            target = b.add(b.add(b.mul(state["b"], ir.Constant(I64, buf.block_stride)), _offset(gen, buf, t)), state["l"])
            dtype = buf.array.dtype
            if state.get("zero"):
                v = ir.Constant(value_type(dtype), 0)
            else:
                v = gen.body.load_elem(gen.body.address(buf.array.name, [xs[d] for d in range(n)]), dtype)
            gen.body.store_elem(v, b.gep(vals[buf.name], [target], inbounds=True), dtype)
            return
        kind, d = loops[i]
        if kind == "axis":
            def axis(v, d=d):
                x[d] = v
                level(i + 1)
            gen.loop(lo(d), hi(d), axis)
        elif kind == "group":  # blocks filled together, row by row (pack.block_group)
            def groups(v):
                state["g"] = b.mul(v, ir.Constant(I64, group))
                level(i + 1)
            gen.loop(ir.Constant(I64, 0), ir.Constant(I64, -(-buf.nblocks // group)), groups)
        elif kind == "block":
            def block(v):
                state["b"] = v
                level(i + 1)
            if group:
                first_b = state["g"]
                gen.loop(first_b, smin(b.add(first_b, ir.Constant(I64, group)), ir.Constant(I64, buf.nblocks)), block)
            else:
                gen.loop(ir.Constant(I64, 0), ir.Constant(I64, buf.nblocks), block)
        else:
            at = b.add(origin[d], b.mul(state["b"], ir.Constant(I64, BS)))
            first = smax(ir.Constant(I64, 0), b.sub(lo(d), at))
            last = smin(ir.Constant(I64, BS), b.sub(hi(d), at))

            def lane(v):
                state["l"] = v
                if pf_step and not state.get("zero"):
                    _prefetch_row(gen, buf, x, state, origin, lo, hi, pf_step)
                level(i + 1)
            gen.loop(first, last, lane)
            if buf.padded:  # the row's lanes past the array or the box: zeros (pack._copy_nest)
                state["zero"] = True
                gen.loop(smax(first, last), ir.Constant(I64, BS), lane)
                state["zero"] = False
    level(0)


def _prefetch_row(gen, buf: pack_mod.PackBuffer, x: Dict[int, ir.Value], state, origin, lo, hi, step: int) -> None:
    """:func:`.pack._row_prefetch` in LLVM IR: read-prefetch the row one block further on, if inside the array."""
    b = gen.b
    n, D_ = len(buf.size), buf.dim
    ahead = b.add(b.add(b.add(origin[D_], b.mul(state["b"], ir.Constant(I64, buf.block))), state["l"]),
                  ir.Constant(I64, buf.block))
    fn = gen.body.intrinsic("llvm.prefetch.p0", ir.VoidType(), [I8P, I32, I32, I32])

    def line(y: ir.Value) -> None:
        index = [x[d] for d in range(D_)] + [ahead, y]
        ptr = gen.b.bitcast(gen.body.address(buf.array.name, index), I8P)
        gen.b.call(fn, [ptr, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
    gen.when(b.icmp_signed("<", ahead, ir.Constant(I64, buf.array.shape[D_])),
             lambda: gen.loop(lo(n - 1), hi(n - 1), line, ir.Constant(I64, step)))


# -- register tiles -----------------------------------------------------------------------


def regtile(gen, n: isl.AstNode, mark: RegTile, generic: Callable[[], None]) -> bool:
    """Emit the register tile of ``mark`` over subtree ``n``; False (nothing emitted) when it does not apply."""
    try:
        plan = microkernel.analyse(gen.stmts, gen.arrays, n, mark)
        _check_vectorisable(plan.st.body.value, plan.dtype)
        # Everything evaluated before the tile's first block: a name out of scope falls back cleanly.
        (i0, iub), (j0, jub) = (_bounds(gen, plan, k, role) for k, role in enumerate((mark.rows, mark.cols)))
        env = {v: gen.aexpr(plan.call.op_get_arg(plan.st.iters.index(v) + 1))
               for v in plan.outer_iters(mark.rows, mark.cols)}
    except (microkernel.Fallback, _Unbound) as why:
        gen.notes.append(f"regtile not applied: {why}")
        return False
    b = gen.b
    one = ir.Constant(I64, 1)
    rows, cols = b.add(b.sub(iub, i0), one), b.add(b.sub(jub, j0), one)
    full = b.and_(b.icmp_signed("==", rows, ir.Constant(I64, mark.mr)),
                  b.icmp_signed("==", cols, ir.Constant(I64, mark.nr)))
    if microkernel.reads_output(plan) or microkernel.always_full(plan, mark):
        gen.when(full, lambda: _fast(gen, plan, mark, env, i0, j0), generic)
        return True
    # The edge block (microkernel._edge_block): rows past the edge repeat the last, columns shifted
    # left to end at the edge, when the shifted columns stay inside every array that moves with them.
    shifted = b.sub(jub, ir.Constant(I64, mark.nr - 1))
    edge = b.and_(b.and_(b.icmp_signed(">=", rows, one), b.icmp_signed("<=", rows, ir.Constant(I64, mark.mr))),
                  b.and_(b.icmp_signed(">=", cols, one), b.icmp_signed("<=", cols, ir.Constant(I64, mark.nr))))
    at = {**env, microkernel.ROW_LO: i0, microkernel.ROW_HI: iub}
    inside, keep = ir.Constant(I1, 1), ir.Constant(I1, 1)
    last = b.add(j0, ir.Constant(I64, mark.nr - 1))
    bounds = microkernel.edge_bounds(plan, mark.rows, mark.cols, gen.arrays)
    if bounds is None:
        inside = keep = ir.Constant(I1, 0)
    else:
        for least in bounds[0]:
            e = gen.body.as_type(least, "int64", {**at, mark.cols: shifted})
            inside = b.and_(inside, b.icmp_signed(">=", e, ir.Constant(I64, 0)))
        for most, extent in bounds[1] or []:
            e = gen.body.as_type(most, "int64", {**at, mark.cols: last})
            keep = b.and_(keep, b.icmp_signed("<", e, ir.Constant(I64, extent)))
        if bounds[1] is None:
            keep = ir.Constant(I1, 0)
    nr = ir.Constant(I64, mark.nr)

    def shifted_edge() -> None:
        _fast(gen, plan, mark, env, i0, shifted, (rows, gen.b.sub(j0, shifted), nr, False))
    packed = block_operands.packed_loads(gen.packed, plan.per_r, plan.per_v, mark.rows, mark.cols, mark.mr, mark.nr,
                                      plan.red_iters)
    def unshifted(where: ir.Value, padded: bool) -> None:
        """A full block; else an edge block shifted left; else, where ``where`` holds, one kept at its
        first column (reading packed slivers when ``padded``); else the generic nest."""
        gen.when(full, lambda: _fast(gen, plan, mark, env, i0, j0),
                 lambda: gen.when(b.and_(edge, inside), shifted_edge,
                                  lambda: gen.when(b.and_(edge, where),
                                                   lambda: _fast(gen, plan, mark, env, i0, j0,
                                                                 (rows, ir.Constant(I64, 0), cols, padded)),
                                                   generic)))
    if microkernel.right_anchored(plan, packed, mark.cols):
        # Columns that cannot shift left keep their first when the lanes past the last stay inside.
        unshifted(keep, False)
    elif microkernel.padded_columns(plan, packed, mark.cols):
        # Columns that cannot shift left run padded from their packed slivers (microkernel._edge_block).
        on = ir.Constant(I1, 1)
        for ld, pk in packed.items():
            if pk.it == mark.cols:
                on = b.and_(on, _sliver(gen, ld, pk, env, j0)[1])
        unshifted(on, True)
    else:
        gen.when(full, lambda: _fast(gen, plan, mark, env, i0, j0),
                 lambda: gen.when(b.and_(edge, inside), shifted_edge, generic))
    return True


def _sliver(gen, ld: B.Load, pk, env: Dict[str, ir.Value], start: ir.Value) -> Tuple[ir.Value, ir.Value]:
    """``(q, on)`` of a packed load for a block whose first row/column is ``start``: its position in the
    packed box along the packed axis, and whether that begins a sliver (:class:`.block_operands.PackedLoad`)."""
    b = gen.b
    q = b.sub(gen.body.as_type(ld.index[pk.axis], "int64", {**env, pk.it: start}),
              gen.frame.vals[pk.buf.origin(pk.axis)])
    return q, b.icmp_signed("==", b.srem(q, ir.Constant(I64, pk.buf.block)), ir.Constant(I64, 0))


def _bounds(gen, plan: microkernel.Plan, k: int, role: str) -> Tuple[ir.Value, ir.Value]:
    """First and last value of a block loop; both the statement's argument where isl left the loop
    out (one iteration, microkernel.chain)."""
    node = plan.block[k][3]
    if node is None:
        arg = gen.aexpr(plan.call.op_get_arg(1 + plan.st.iters.index(role)))
        return arg, arg
    first = gen.aexpr(node.for_get_init())
    return first, (first if node.for_is_degenerate() else _upper(gen, node))


def _upper(gen, node: isl.AstNode) -> ir.Value:
    cond = node.for_get_cond()
    ub = gen.aexpr(cond.op_get_arg(1))
    if cond.op_get_type() == isl.ast_expr_op_type.lt:
        ub = gen.b.sub(ub, ir.Constant(I64, 1))
    return ub


def _check_vectorisable(n: B.Node, dtype: str) -> None:
    """What :func:`_vexpr` can emit: loads, constants, + - * (and / of floats), negation, no-op casts."""
    if isinstance(n, (B.Load, B.Const)):
        return
    if isinstance(n, B.Bin) and n.op in ("+", "-", "*", "/"):
        if n.op == "/" and dtype not in ("float32", "float64"):
            # C's vector division by zero traps where pt_div gives 0: the generic code keeps that rule.
            raise microkernel.Fallback("integer division is not vectorised")
        _check_vectorisable(n.a, dtype)
        _check_vectorisable(n.b, dtype)
        return
    if isinstance(n, B.Neg) or (isinstance(n, B.Cast) and n.dtype == n.operand.dtype):
        return _check_vectorisable(n.operand, dtype)
    raise microkernel.Fallback(f"cannot vectorise {type(n).__name__}")


def _fast(gen, plan: microkernel.Plan, mark: RegTile, env: Dict[str, ir.Value], i0: ir.Value, j0: ir.Value,
          edge: Optional[Tuple[ir.Value, ir.Value, ir.Value, bool]] = None) -> None:
    """A full ``MR x NR`` block: accumulators loaded, the reduction loops, accumulators stored.

    With ``edge = (rows, off, ecols, padded)`` an edge block (:func:`.microkernel._edge_block`): ``j0``
    is the first column (shifted left, or the block's own when ``padded``), row ``r`` reads row
    ``min(r, rows - 1)``, and the accumulators go through a small array so that only rows ``< rows``
    and columns ``off <= c < ecols`` of the output are read and written; padded columns read their
    packed slivers whatever the rows do."""
    iname, jname, MR, NR, V = mark.rows, mark.cols, mark.mr, mark.nr, mark.lanes
    NV = NR // V
    body, dtype = plan.st.body, plan.dtype
    scalar = value_type(dtype)
    vt = ir.VectorType(scalar, V)
    align = D.width(dtype) // 8
    isf = dtype in ("float32", "float64")
    b = gen.b
    if edge is None:
        row = [ir.Constant(I64, r) for r in range(MR)]
    else:
        last = b.sub(edge[0], ir.Constant(I64, 1))
        row = [b.select(b.icmp_signed("<", ir.Constant(I64, r), edge[0]), ir.Constant(I64, r), last) for r in range(MR)]

    def at(r: int, v: int) -> Dict[str, ir.Value]:
        """Where accumulator (r, v) lies (r past MR: the next block's rows, for the prefetch)."""
        b = gen.b
        return {**env, iname: b.add(i0, row[r] if r < MR else ir.Constant(I64, r)),
                jname: b.add(j0, ir.Constant(I64, v * V))}

    def vload(ptr):
        return gen.b.load(gen.b.bitcast(ptr, vt.as_pointer()), align=align)

    acc = [[gen.alloca(vt) for _ in range(NV)] for _ in range(MR)]
    segment = edge is None and microkernel.segment_sum(plan)
    if edge is None:
        out_ptr = [[gen.body.access(body.array, body.index, at(r, v)) for v in range(NV)] for r in range(MR)]
        start = ir.Constant(vt, [ir.Constant(scalar, 0 if body.reduce == "+" else 1)] * V) if segment else None
        for r in range(MR):
            for v in range(NV):
                gen.b.store(start if segment else vload(out_ptr[r][v]), acc[r][v])
        if not plan.out_strided:  # microkernel._emit: whole lines only along a unit-stride output
            _prefetch_next_block(gen, body, MR, NR, V, at, iname)
    else:
        cells = gen.alloca(scalar, MR * NR)
        _edge_cells(gen, body, env, iname, jname, i0, j0, row, cells, edge[1], edge[2], MR, NR, load=True)
        for r in range(MR):
            for v in range(NV):
                gen.b.store(vload(gen.b.gep(cells, [ir.Constant(I64, r * NR + v * V)])), acc[r][v])
    packed = block_operands.packed_loads(gen.packed, plan.per_r, plan.per_v, iname, jname, MR, NR, plan.red_iters)
    bases: Dict[B.Load, ir.Value] = {}
    aligned = aligned_rows = ir.Constant(I1, 1)
    for ld, pk in packed.items():
        bases[ld], on = _sliver(gen, ld, pk, env, {iname: i0, jname: j0}[pk.it])
        aligned = gen.b.and_(aligned, on)
        if pk.it == iname:
            aligned_rows = gen.b.and_(aligned_rows, on)
    if edge is not None:
        # Shifted columns straddle two packed slivers: an edge block's columns use theirs only unshifted
        # (rows alone left over), its rows whenever they start on one (microkernel._edge_block).
        aligned = gen.b.and_(aligned, gen.b.icmp_signed("==", edge[1], ir.Constant(I64, 0)))

    def combine(a: ir.Value, x: ir.Value) -> ir.Value:
        """``a`` reduced with ``x`` (the statement's + or *)."""
        b = gen.b
        if body.reduce == "+":
            return b.fadd(a, x, flags=FP) if isf else b.add(a, x)
        return b.fmul(a, x, flags=FP) if isf else b.mul(a, x)

    def splat(x: ir.Value) -> ir.Value:
        b = gen.b
        one = b.insert_element(ir.Constant(vt, ir.Undefined), x, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, V), [0] * V))

    def packed_address(ld: B.Load, lane, inner_env) -> ir.Value:
        """``buf[(q / block) * block_stride + inner_offset(t) + lane]`` (see block_operands.PackedLoad)."""
        b = gen.b
        pk = packed[ld]
        vals = gen.frame.vals
        # Only the other axes' positions: along the packed axis the block's own loop decides (q).
        t = [b.sub(gen.body.as_type(e, "int64", inner_env), vals[pk.buf.origin(d)]) if d != pk.buf.dim
             else None for d, e in enumerate(ld.index)]
        off = b.mul(b.sdiv(bases[ld], ir.Constant(I64, pk.buf.block)), ir.Constant(I64, pk.buf.block_stride))
        off = b.add(b.add(off, _offset(gen, pk.buf, t)), ir.Constant(I64, lane) if isinstance(lane, int) else lane)
        return b.gep(vals[pk.buf.name], [off], inbounds=True)

    def gather(ld: B.Load, v: int, inner_env) -> ir.Value:
        """Vector ``v`` of a strided column operand (``B[j][k]``) read lane by lane: its columns are
        ``j0 + v*V + x``, not adjacent in memory (microkernel.Plan.strided)."""
        b = gen.b
        vec = ir.Constant(vt, ir.Undefined)
        for x in range(V):
            where = {**inner_env, iname: i0, jname: b.add(j0, ir.Constant(I64, v * V + x))}
            elem = gen.body.load_elem(gen.body.access(ld.array, ld.index, where), ld.dtype)
            vec = b.insert_element(vec, elem, ir.Constant(I32, x))
        return vec

    def inner_body(use_packs: bool, inner_env, pack_cols: bool = True, pack_rows: bool = True) -> None:
        b = gen.b
        values: Dict[Tuple[B.Load, int, int], ir.Value] = {}
        for ld in plan.per_k:
            x = gen.body.load_elem(gen.body.access(ld.array, ld.index, inner_env), ld.dtype)
            values[(ld, 0, 0)] = splat(x)
        for v in range(NV):
            for ld in plan.per_v:
                if use_packs and pack_cols and ld in packed:
                    values[(ld, 0, v)] = vload(packed_address(ld, v * V, inner_env))
                elif ld in plan.strided:
                    values[(ld, 0, v)] = gather(ld, v, inner_env)
                else:
                    ptr = gen.body.access(ld.array, ld.index, {**inner_env, **_shift(gen, at(0, v), iname, jname)})
                    values[(ld, 0, v)] = vload(ptr)
        for r in range(MR):
            for ld in plan.per_r:
                if use_packs and pack_rows and ld in packed:
                    ptr = packed_address(ld, row[r], inner_env)
                else:
                    ptr = gen.body.access(ld.array, ld.index, {**inner_env, **_shift(gen, at(r, 0), iname, jname)})
                values[(ld, r, 0)] = splat(gen.body.load_elem(ptr, ld.dtype))
            for v in range(NV):
                for ld in plan.per_rv:
                    ptr = gen.body.access(ld.array, ld.index, {**inner_env, **_shift(gen, at(r, v), iname, jname)})
                    values[(ld, r, v)] = vload(ptr)
                x = _vexpr(gen, body.value, plan, values, r, v, splat, isf)
                b.store(combine(b.load(acc[r][v]), x), acc[r][v])

    def reduction_loops(use_packs: bool, pack_cols: bool = True, pack_rows: bool = True) -> None:
        def level(i: int) -> None:
            if i == len(plan.red_loops):
                inner_env = dict(env)
                for k, name in enumerate(plan.st.iters):
                    if name not in (iname, jname) and plan.uses_red(plan.args[name]):
                        inner_env[name] = gen.aexpr(plan.call.op_get_arg(k + 1))
                inner_body(use_packs, inner_env, pack_cols, pack_rows)
                return
            node, it = plan.red_loops[i][0], plan.red_loops[i][1]
            cond = node.for_get_cond()
            # isl's reduction loops read `it <= bound` / `it < bound`, the bound free of `it`
            # (microkernel.analyse took them as a plain chain; the C emitter prints the same condition).
            if cond.op_get_type() not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt):
                raise UnsupportedConstruct("a register tile's reduction loop has an unexpected condition")
            first, bound = gen.aexpr(node.for_get_init()), gen.aexpr(cond.op_get_arg(1))
            vals = gen.frame.vals
            saved = vals.get(it)

            def step(value):
                vals[it] = value
                level(i + 1)
            gen.loop(first, bound, step, gen.aexpr(node.for_get_inc()),
                     inclusive=cond.op_get_type() == isl.ast_expr_op_type.le)
            if saved is None:
                vals.pop(it, None)
            else:
                vals[it] = saved
        level(0)

    if edge is not None and edge[3]:
        # Padded columns: their slivers always (aligned, by the caller's condition), rows' when aligned.
        if any(pk.it == iname for pk in packed.values()):
            gen.when(aligned_rows, lambda: reduction_loops(True), lambda: reduction_loops(True, True, False))
        else:
            reduction_loops(True)
    elif not packed:
        reduction_loops(False)
    elif edge is None:
        gen.when(aligned, lambda: reduction_loops(True), lambda: reduction_loops(False))
    else:
        def rows_only() -> None:
            if any(pk.it == iname for pk in packed.values()):
                gen.when(aligned_rows, lambda: reduction_loops(True, False), lambda: reduction_loops(False))
            else:
                reduction_loops(False)
        if any(pk.it != iname for pk in packed.values()):
            gen.when(aligned, lambda: reduction_loops(True), rows_only)
        else:
            rows_only()
    if edge is None:
        for r in range(MR):
            for v in range(NV):
                value = gen.b.load(acc[r][v])
                if plan.out_strided:
                    # Each lane to its own cell (microkernel.analyse: out_strided implies the segment sum).
                    for x in range(V):
                        where = {**at(r, v), jname: gen.b.add(at(r, v)[jname], ir.Constant(I64, x))}
                        ptr = gen.body.access(body.array, body.index, where)
                        lane = gen.b.extract_element(value, ir.Constant(I32, x))
                        gen.body.store_elem(combine(gen.body.load_elem(ptr, dtype), lane), ptr, dtype)
                    continue
                if segment:
                    value = combine(vload(out_ptr[r][v]), value)
                gen.b.store(value, gen.b.bitcast(out_ptr[r][v], vt.as_pointer()), align=align)
        return
    for r in range(MR):
        for v in range(NV):
            gen.b.store(gen.b.load(acc[r][v]), gen.b.bitcast(gen.b.gep(cells, [ir.Constant(I64, r * NR + v * V)]),
                                                             vt.as_pointer()), align=align)
    _edge_cells(gen, body, env, iname, jname, i0, j0, row, cells, edge[1], edge[2], MR, NR, load=False, rows=edge[0])


def _edge_cells(gen, body, env, iname: str, jname: str, i0, j0, row, cells, off, ecols, MR: int, NR: int, *,
                load: bool, rows=None) -> None:
    """An edge block's accumulator array ``cells`` (``MR x NR``) from the output (``load``: columns
    outside ``[off, ecols)`` zero, row ``r`` from row ``row[r]``) or back to it (rows ``< rows``, columns
    ``off <= c < ecols``): only the block's own cells of the output are read or written."""
    dtype = gen.arrays[body.array].dtype
    scalar = cells.type.pointee
    for r in range(MR):
        def column(c, r=r):
            b = gen.b
            slot = b.gep(cells, [b.add(ir.Constant(I64, r * NR), c)])
            ptr = gen.body.access(body.array, body.index, {**env, iname: b.add(i0, row[r]), jname: b.add(j0, c)})
            if load:
                b.store(gen.body.load_elem(ptr, dtype), slot)
            else:
                gen.body.store_elem(b.load(slot), ptr, dtype)
        if load:
            for c in range(NR):
                gen.b.store(ir.Constant(scalar, 0), gen.b.gep(cells, [ir.Constant(I64, r * NR + c)]))
            gen.loop(off, ecols, column)
        else:
            gen.when(gen.b.icmp_signed("<", ir.Constant(I64, r), rows),
                     lambda r=r: gen.loop(off, ecols, lambda c: column(c, r)))


def _prefetch_next_block(gen, body, MR: int, NR: int, V: int, at, iname: str) -> None:
    """The C target's :func:`.block_operands.next_block_prefetch`: ``llvm.prefetch`` (write, L2) of the
    accumulator block ``MR`` rows further on, when those rows are inside the array."""
    array = gen.arrays[body.array]
    cells, checks, axes = block_operands.next_rows(body.index, iname, MR, NR, V, array.dtype)
    if not cells:
        return
    b = gen.b
    inside = ir.Constant(I1, 1)
    for r in checks:
        for d in axes:
            e = gen.body.as_type(body.index[d], "int64", at(r, 0))
            inside = b.and_(inside, b.and_(b.icmp_signed(">=", e, ir.Constant(I64, 0)),
                                           b.icmp_signed("<", e, ir.Constant(I64, array.shape[d]))))

    def prefetch() -> None:
        fn = gen.body.intrinsic("llvm.prefetch.p0", ir.VoidType(), [I8P, I32, I32, I32])
        for r, v in cells:
            ptr = gen.b.bitcast(gen.body.access(body.array, body.index, at(r, v)), I8P)
            gen.b.call(fn, [ptr, ir.Constant(I32, 1), ir.Constant(I32, 2), ir.Constant(I32, 1)])
    gen.when(inside, prefetch)


def _shift(gen, where: Dict[str, ir.Value], iname: str, jname: str) -> Dict[str, ir.Value]:
    return {iname: where[iname], jname: where[jname]}


def _vexpr(gen, n: B.Node, plan, values, r: int, v: int, splat, isf: bool) -> ir.Value:
    """The vector value of ``n`` for accumulator (r, v) (shapes checked by :func:`_check_vectorisable`)."""
    b = gen.b
    if isinstance(n, B.Load):
        if n in plan.per_k:
            return values[(n, 0, 0)]
        if n in plan.per_r:
            return values[(n, r, 0)]
        if n in plan.per_v:
            return values[(n, 0, v)]
        return values[(n, r, v)]
    if isinstance(n, B.Const):
        return splat(gen.body.convert(gen.body.expr(n, {}), n.dtype, plan.dtype))
    if isinstance(n, B.Bin):
        x, y = _vexpr(gen, n.a, plan, values, r, v, splat, isf), _vexpr(gen, n.b, plan, values, r, v, splat, isf)
        if isf:
            return {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[n.op](x, y, flags=FP)
        return {"+": b.add, "-": b.sub, "*": b.mul}[n.op](x, y)
    if isinstance(n, B.Neg):
        x = _vexpr(gen, n.operand, plan, values, r, v, splat, isf)
        return b.fneg(x) if isf else b.sub(ir.Constant(x.type, None), x)
    return _vexpr(gen, n.operand, plan, values, r, v, splat, isf)  # a cast to its own dtype
