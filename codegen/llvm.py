"""LLVM back end: the isl AST of a schedule tree -> LLVM IR (llvmlite.ir), for the ``llvm`` target.

The AST is the one the C back end prints (:func:`.c.build_ast`: same counters, pack footprints,
contracted temporaries), walked node by node into IR.  The entry point has the C target's calling
convention (``i32 entry(i8* a0, i8* a1, ...)``: inputs, outputs, temporaries; 0 on success, 12 when
a pack buffer cannot be allocated), so :class:`polytile.specialization.Specialization` calls it the
same way.  Statement bodies are emitted by :mod:`.llvm_body`, register tiles and packs by
:mod:`.llvm_tile`.

Marks are decoded as in :class:`.c.AstPrinter`:

* ``Parallel``: the loop body becomes an internal function ``pt.parN`` (array pointers ``noalias``,
  as C's ``restrict`` parameters; the dot keeps it apart from any entry name, which is sanitised to C
  identifier characters) run by ``pt.parN.omp(data)`` on every thread of a libgomp team
  (``GOMP_parallel``); each thread takes its static share of the iterations (a contiguous block, or
  every T-th iteration where C would use ``schedule(static, 1)``).  Reductions the mark carries get a
  private copy per thread, started at the identity and combined under ``GOMP_critical``, as
  OpenMP's ``reduction`` clause does.  Nested parallel loops, and parallel loops inside a contracted
  temporary's scope, run serially (as OpenMP would run a nested region: on one thread).
* ``Simd`` / ``Unroll``: hints left to LLVM's O3 vectoriser and unroller.
* ``Local``: an ``alloca`` scalar; ``Pack``, ``RegTile``: :mod:`.llvm_tile`; ``Dim``: as in C.

    >>> # src = generate(scop, sched.tree()); src.text is LLVM IR with `define i32 @"pt_matmul"(...)`
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import islpy as isl
import numpy as np
from llvmlite import ir

from polytile.deadline import interrupts_after
from polytile.errors import InternalError
from polytile.poly.scop import Array, Scop
from polytile.scheduling.marks import Dim, Local, Mark, Pack, Parallel, RegTile, Simd, Unroll, decode, encode

from . import c_accumulate, llvm_tile, pack
from .c import KernelSource, build_ast, cyclic_loop
from .llvm_body import I1, I8, I8P, I32, I64, VOID, BodyEmitter, UnsupportedConstruct, _Unbound, identity, memory_type
from .llvm_vmath import VectorMath


def sanitize(name: str) -> str:
    """A symbol-safe spelling of ``name`` (user text never reaches a symbol as it is).

    >>> sanitize("my kernel-2")
    'my_kernel_2'
    """
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "kernel"


@dataclass
class _Frame:
    """The function being emitted and what is in scope there."""

    fn: ir.Function
    allocas: ir.IRBuilder  # positioned in the function's first block, for allocas only
    b: ir.IRBuilder
    ptrs: Dict[str, ir.Value]  # array -> element pointer
    vals: Dict[str, ir.Value] = field(default_factory=dict)  # AST iterators, pack buffers, views, origins
    locals: Dict[str, ir.Value] = field(default_factory=dict)  # contracted array -> its scalar's alloca


class LlvmGenerator:
    """Walks an isl AST and emits LLVM IR into :attr:`module` (one per kernel)."""

    def __init__(self, scop: Scop, *, parallel: bool = True, min_parallel_copy: int = 0,
                 vector_math: Optional[VectorMath] = None):
        self.scop = scop
        self.module = ir.Module(name=sanitize(scop.name))
        self.arrays: Dict[str, Array] = {a.name: a for a in scop.arrays}
        self.stmts = scop.statement_map
        self.body = BodyEmitter(self.module, self.arrays, vector_math)
        self.lanes = False  # inside a loop whose one statement reduces into one cell (c_accumulate.lane_reduction)
        self.use_threads = parallel  # libgomp is there: parallel marks become parallel regions
        self.min_parallel_copy = min_parallel_copy
        self.frame: _Frame = None  # type: ignore[assignment]
        self.parallel_depth = 0
        self.parallel_regions = 0
        self.notes: List[str] = []
        self.locals: set = set()
        self.unsafe_locals: set = set()
        self.footprints: Dict[str, pack.Footprint] = {}
        self.pack_slots: Dict[str, Tuple[int, bool]] = {}  # pack annotation -> (buffer number, per thread)
        self.packed: Dict[str, pack.PackBuffer] = {}  # array -> its packed buffer in scope

    # -- functions -------------------------------------------------------------
    @property
    def b(self) -> ir.IRBuilder:
        return self.frame.b

    def _enter(self, fn: ir.Function, ptrs: Dict[str, ir.Value], vals: Dict[str, ir.Value]) -> _Frame:
        """Start emitting ``fn``; returns the frame to give back to :meth:`_leave`."""
        first = fn.append_basic_block("allocas")
        start = fn.append_basic_block("start")
        saved = self.frame
        self.frame = _Frame(fn, ir.IRBuilder(first), ir.IRBuilder(start), ptrs, dict(vals))
        self._sync()
        return saved

    def _leave(self, saved: Optional[_Frame]) -> None:
        f = self.frame
        f.allocas.branch(f.fn.blocks[1])
        self.frame = saved
        if saved is not None:
            self._sync()

    def _sync(self) -> None:
        self.body.b, self.body.ptrs, self.body.locals = self.frame.b, self.frame.ptrs, self.frame.locals

    def alloca(self, t: ir.Type, count: int = 1) -> ir.Value:
        return self.frame.allocas.alloca(t, size=count if count != 1 else None)

    def declare(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        return self.body.function(name, ret, args)

    # -- isl AST expressions -------------------------------------------------
    def aexpr(self, e: isl.AstExpr) -> ir.Value:
        """An isl AST expression in int64 (a condition as i1)."""
        b = self.b
        t = e.get_type()
        if t == isl.ast_expr_type.int:
            return ir.Constant(I64, int(e.int_get_val().to_python()))
        if t == isl.ast_expr_type.id:
            name = e.id_get_id().get_name()
            try:
                return self.frame.vals[name]
            except KeyError:
                raise _Unbound(name) from None
        if t != isl.ast_expr_type.op:
            raise InternalError(f"isl AST expression of type {t}")
        op = e.op_get_type()
        args = [self.aexpr(e.op_get_arg(k)) for k in range(e.op_get_n_arg())]
        O = isl.ast_expr_op_type
        if op in (O.and_, O.and_then):
            return b.and_(self._bool(args[0]), self._bool(args[1]))
        if op in (O.or_, O.or_else):
            return b.or_(self._bool(args[0]), self._bool(args[1]))
        if op in (O.cond, O.select):
            return b.select(self._bool(args[0]), self._int(args[1]), self._int(args[2]))
        args = [self._int(a) if op not in (O.eq,) else a for a in args]
        if op in (O.max, O.min):
            v = args[0]
            for a in args[1:]:
                v = b.select(b.icmp_signed(">" if op == O.max else "<", v, a), v, a)
            return v
        if op == O.minus:
            return b.sub(ir.Constant(I64, 0), args[0])
        simple = {O.add: b.add, O.sub: b.sub, O.mul: b.mul, O.div: b.sdiv, O.pdiv_q: b.sdiv,
                  O.pdiv_r: b.srem, O.zdiv_r: b.srem}
        if op in simple:
            return simple[op](args[0], args[1])
        if op == O.fdiv_q:
            return self.body.floordiv(args[0], args[1])
        cmp = {O.eq: "==", O.le: "<=", O.lt: "<", O.ge: ">=", O.gt: ">"}
        if op in cmp:
            return b.icmp_signed(cmp[op], self._int(args[0]), self._int(args[1]))
        raise UnsupportedConstruct(f"the llvm target cannot compile the isl AST operation {op}")

    def _bool(self, v: ir.Value) -> ir.Value:
        return v if v.type == I1 else self.b.icmp_signed("!=", v, ir.Constant(v.type, 0))

    def _int(self, v: ir.Value) -> ir.Value:
        return self.b.zext(v, I64) if v.type == I1 else v

    # -- control flow ----------------------------------------------------------
    def loop(self, lo: ir.Value, hi: ir.Value, body: Callable[[ir.Value], None], step: ir.Value = None,
             inclusive: bool = False) -> None:
        """``for (v = lo; v < hi (or <= hi); v += step) body(v)`` with ``v`` a phi node."""
        v, head, done = self._open_loop(lo, lambda v: self.b.icmp_signed("<=" if inclusive else "<", v, hi), "loop")
        body(v)
        self._close_loop(v, step if step is not None else ir.Constant(I64, 1), head, done)

    def when(self, cond: ir.Value, then: Callable[[], None], otherwise: Optional[Callable[[], None]] = None) -> None:
        """``if (cond) then() else otherwise()``."""
        b = self.b
        yes = b.append_basic_block("then")
        no = b.append_basic_block("else") if otherwise is not None else None
        merge = b.append_basic_block("endif")
        b.cbranch(cond, yes, no or merge)
        b.position_at_end(yes)
        then()
        self.b.branch(merge)
        if no is not None:
            self.b.position_at_end(no)
            otherwise()
            self.b.branch(merge)
        self.b.position_at_end(merge)

    def node(self, n: isl.AstNode, marks: Tuple[Mark, ...] = ()) -> None:
        """Emit the AST node ``n``; ``marks`` decorate the next loop (parallel, simd, unroll)."""
        t = n.get_type()
        if t == isl.ast_node_type.block:
            children = n.block_get_children()
            for i in range(children.n_ast_node()):
                self.node(children.get_at(i))
        elif t == isl.ast_node_type.mark:
            self._mark(n, decode(n.mark_get_id().get_name()), n.mark_get_node(), marks)
        elif t == isl.ast_node_type.for_:
            self._for(n, marks)
        elif t == isl.ast_node_type.if_:
            cond = self._bool(self.aexpr(n.if_get_cond()))
            otherwise = (lambda: self.node(n.if_get_else_node())) if n.if_has_else_node() else None
            self.when(cond, lambda: self.node(n.if_get_then_node()), otherwise)
        elif t == isl.ast_node_type.user:
            self._user(n.user_get_expr())
        else:
            raise InternalError(f"unexpected isl AST node type {t}")

    def _mark(self, n: isl.AstNode, mark: Mark, inner: isl.AstNode, marks: Tuple[Mark, ...]) -> None:
        if isinstance(mark, Local):
            if mark.array in self.unsafe_locals:
                return self.node(inner, marks)  # kept in memory (see codegen.c._local_arrays)
            f = self.frame
            saved = dict(f.locals)
            f.locals[mark.array] = self.alloca(memory_type(self.arrays[mark.array].dtype))
            try:
                self.node(inner, marks)
            finally:
                f.locals.clear()
                f.locals.update(saved)
            return None
        if isinstance(mark, Pack):
            return llvm_tile.pack(self, n, mark, inner, marks)
        if isinstance(mark, RegTile):
            if not llvm_tile.regtile(self, inner, mark, lambda: self.node(inner, marks)):
                self.node(inner, marks)
            return None
        if isinstance(mark, Dim):
            if inner.get_type() == isl.ast_node_type.for_:
                return self.node(inner, marks)
            if marks:
                self.notes.append(f"marks {', '.join(map(encode, marks))} dropped: isl generated no loop for "
                                  f"{encode(mark)}")
            return self.node(inner)
        if isinstance(mark, (Parallel, Simd, Unroll)):
            return self.node(inner, marks + (mark,))
        raise InternalError(f"no LLVM IR for schedule-tree mark {mark!r}")

    def _for(self, n: isl.AstNode, marks: Tuple[Mark, ...]) -> None:
        it = n.for_get_iterator().id_get_id().get_name()
        vals = self.frame.vals
        saved = vals.get(it)
        try:
            if n.for_is_degenerate():
                vals[it] = self.aexpr(n.for_get_init())
                self.node(n.for_get_body())
                return
            par = next((m for m in marks if isinstance(m, Parallel)), None)
            if par is not None and self._parallel(n, it, par):
                return
            jam = None if marks else c_accumulate.jammable(self, n, it)
            # Rows summed side by side first (c_accumulate.jam_rows); the loop as it was runs the rest.
            init = self._jammed(n, it, jam[0]) if jam else self.aexpr(n.for_get_init())
            inc = self.aexpr(n.for_get_inc())
            v, head, done = self._open_loop(init, lambda v: self._cond(n, it, v), "for")
            # A Tile reduction into one cell along this loop may be regrouped: LLVM then runs it in lanes.
            lanes, self.lanes = self.lanes, c_accumulate.lane_reduction(self, n, it) is not None
            try:
                self.node(n.for_get_body())
            finally:
                self.lanes = lanes
            self._close_loop(v, inc, head, done)
        finally:
            if saved is None:
                vals.pop(it, None)
            else:
                vals[it] = saved

    def _jammed(self, n: isl.AstNode, it: str, inner: isl.AstNode) -> ir.Value:
        """``c_accumulate.jam_rows`` in IR: rows of loop ``n`` JAM_ROWS at a time, each row's statement in
        one pass of the ``inner`` lane loop (whose sums LLVM keeps in registers and splits into lanes);
        returns the first row left.  ``vals[it]`` is left to the caller, which binds it next."""
        rows, vals = c_accumulate.JAM_ROWS, self.frame.vals
        it_in = inner.for_get_iterator().id_get_id().get_name()
        saved = vals.get(it_in)
        # The block's last row in range: the loop's own condition at row + rows - 1.
        last = lambda row: self._cond(n, it, self.b.add(row, ir.Constant(I64, rows - 1)))  # noqa: E731
        row, head, done = self._open_loop(self.aexpr(n.for_get_init()), last, "jam")
        v, khead, kdone = self._open_loop(self.aexpr(inner.for_get_init()), lambda v: self._cond(inner, it_in, v),
                                          "jam.k")
        lanes, self.lanes = self.lanes, True
        try:
            for r in range(rows):
                vals[it] = self.b.add(row, ir.Constant(I64, r))
                self.node(inner.for_get_body())
        finally:
            self.lanes = lanes
            if saved is None:
                vals.pop(it_in, None)
            else:
                vals[it_in] = saved
        self._close_loop(v, ir.Constant(I64, 1), khead, kdone)
        self._close_loop(row, ir.Constant(I64, rows), head, done)
        return row

    def _cond(self, n: isl.AstNode, it: str, v: ir.Value) -> ir.Value:
        """Loop ``n``'s condition with its iterator ``it`` at ``v`` (which stays bound)."""
        self.frame.vals[it] = v
        return self._bool(self.aexpr(n.for_get_cond()))

    def _open_loop(self, first: ir.Value, cond: Callable[[ir.Value], ir.Value], name: str):
        """Open ``for (v = first; cond(v); ...)`` (``first`` evaluated before the loop, where the phi
        names it) and move into its body; returns ``(v, head, done)`` for :meth:`_close_loop`."""
        b = self.b
        pre = b.block
        head, inside, done = (b.append_basic_block(x) for x in (name, f"{name}.body", f"{name}.end"))
        b.branch(head)
        b.position_at_end(head)
        v = b.phi(I64)
        v.add_incoming(first, pre)
        b.cbranch(cond(v), inside, done)
        b.position_at_end(inside)
        return v, head, done

    def _close_loop(self, v: ir.Value, step: ir.Value, head, done) -> None:
        """End the body of a loop :meth:`_open_loop` opened: step ``v``, back to the head, on after the loop."""
        v.add_incoming(self.b.add(v, step), self.b.block)
        self.b.branch(head)
        self.b.position_at_end(done)

    def _user(self, call: isl.AstExpr) -> None:
        name = call.op_get_arg(0).id_get_id().get_name()
        st = self.stmts[name]
        if st.c_text is not None:
            raise UnsupportedConstruct(f"statement {name} is C text (from the C frontend): the llvm target "
                                       "compiles Tile programs; use the openmp target")
        env = {v: self.aexpr(call.op_get_arg(k + 1)) for k, v in enumerate(st.iters)}
        self.body.store(st.body, env, lanes=self.lanes)

    # -- parallel loops --------------------------------------------------------
    def _bounds(self, n: isl.AstNode, it: str) -> Optional[Tuple[ir.Value, ir.Value, ir.Value]]:
        """(first, last inclusive, step) of a loop in OpenMP's canonical form ``it <(=) bound``, else None."""
        cond = n.for_get_cond()
        try:
            op = cond.op_get_type()
        except isl.Error:
            return None
        if op not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt):
            return None
        lhs, rhs = cond.op_get_arg(0), cond.op_get_arg(1)
        if lhs.get_type() != isl.ast_expr_type.id or lhs.id_get_id().get_name() != it:
            return None
        if re.search(rf"\b{re.escape(it)}\b", rhs.to_C_str()):
            return None
        last = self.aexpr(rhs)
        if op == isl.ast_expr_op_type.lt:
            last = self.b.sub(last, ir.Constant(I64, 1))
        return self.aexpr(n.for_get_init()), last, self.aexpr(n.for_get_inc())

    def _parallel(self, n: isl.AstNode, it: str, mark: Parallel) -> bool:
        """Emit loop ``n`` as a parallel region; False (nothing emitted) when it runs serially instead."""
        f = self.frame
        if not self.use_threads or self.parallel_depth > 0 or f.locals:
            return False
        bounds = self._bounds(n, it)
        if bounds is None:
            return False
        reductions = []
        for op, name in mark.reductions:
            if name not in f.ptrs:
                return False  # a reduction into something that is not an array in memory: serially
            if any(d < 0 for d in self.arrays[name].shape):
                raise UnsupportedConstruct(f"a parallel reduction into {name} needs its extents")
            reductions.append((op, name))
        first, last, step = bounds
        b = self.b
        trip = b.add(b.sdiv(b.sub(last, first), step), ir.Constant(I64, 1))
        trip = b.select(b.icmp_signed("<", last, first), ir.Constant(I64, 0), trip)
        cyclic = cyclic_loop(self.stmts, n, it)
        k = self.parallel_regions
        self.parallel_regions += 1

        arrays = list(f.ptrs.items())
        vals = list(f.vals.items())
        # The loop body: an internal function whose arrays are noalias parameters (C's restrict).
        types = [p.type for _, p in arrays] + [v.type for _, v in vals] + [I64] * 5
        inner = ir.Function(self.module, ir.FunctionType(VOID, types), f"pt.par{k}")
        inner.linkage = "internal"
        for a in inner.args[:len(arrays)]:
            a.add_attribute("noalias")
        saved = self._enter(inner, {name: a for (name, _), a in zip(arrays, inner.args)},
                            {name: a for (name, _), a in zip(vals, inner.args[len(arrays):])})
        lo, inc, q0, q1, dq = inner.args[-5:]
        self.parallel_depth += 1
        try:
            def iteration(q):
                self.frame.vals[it] = self.b.add(lo, self.b.mul(q, inc))
                self.node(n.for_get_body())
            self.loop(q0, q1, iteration, dq)
            self.b.ret_void()
        finally:
            self.parallel_depth -= 1
            self._leave(saved)

        # The team's function: unpack the shared record, take this thread's iterations, call the body.
        record = ir.LiteralStructType(types[:-5] + [I64, I64, I64])
        thunk = ir.Function(self.module, ir.FunctionType(VOID, [I8P]), f"pt.par{k}.omp")
        thunk.linkage = "internal"
        saved = self._enter(thunk, {}, {})
        try:
            tb = self.b
            data = tb.bitcast(thunk.args[0], record.as_pointer())
            fields = [tb.load(tb.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, i)])) for i in range(len(record))]
            lo_v, inc_v, trip_v = fields[-3:]
            nthreads = tb.sext(tb.call(self.declare("omp_get_num_threads", I32, []), []), I64)
            tid = tb.sext(tb.call(self.declare("omp_get_thread_num", I32, []), []), I64)
            if cyclic:  # schedule(static, 1): iterations tid, tid + T, ...
                start, end, stride = tid, trip_v, nthreads
            else:  # schedule(static): the first trip % T threads take one iteration more
                chunk, extra = tb.sdiv(trip_v, nthreads), tb.srem(trip_v, nthreads)
                more = tb.icmp_signed("<", tid, extra)
                start = tb.add(tb.mul(tid, chunk), tb.select(more, tid, extra))
                end = tb.add(start, tb.select(more, tb.add(chunk, ir.Constant(I64, 1)), chunk))
                stride = ir.Constant(I64, 1)
            args = list(fields[:-3])
            private = self._private_copies(reductions, [name for name, _ in arrays], args)
            tb.call(inner, args + [lo_v, inc_v, start, end, stride])
            self._combine(private)
            self.b.ret_void()
        finally:
            self._leave(saved)

        # In the caller: fill the record and start the team (GOMP_parallel's thread count 0 takes
        # omp_set_num_threads' choice: polytile.runtime.threads sets it per call).
        b = self.b
        rec = self.alloca(record)
        for i, v in enumerate([p for _, p in arrays] + [v for _, v in vals] + [first, step, trip]):
            b.store(v, b.gep(rec, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
        gomp = self.declare("GOMP_parallel", VOID, [thunk.type, I8P, I32, I32])
        self.when(b.icmp_signed(">", trip, ir.Constant(I64, 0)),
                  lambda: self.b.call(gomp, [thunk, self.b.bitcast(rec, I8P), ir.Constant(I32, 0), ir.Constant(I32, 0)]))
        return True

    def _private_copies(self, reductions, names: List[str], args: List[ir.Value]):
        """A thread's private copy of every reduction array, filled with the identity; ``args`` (the
        body's array arguments, in ``names`` order) are pointed at the copies."""
        out = []
        b = self.b
        for op, name in reductions:
            malloc = self.declare("malloc", I8P, [I64])
            arr = self.arrays[name]
            count = max(1, math.prod(arr.shape))
            t = memory_type(arr.dtype)
            size = count * np.dtype(arr.dtype).itemsize
            mem = b.bitcast(b.call(malloc, [ir.Constant(I64, size)]), t.as_pointer())
            ident = identity(op, arr.dtype)
            stored = b.zext(ident, I8) if arr.dtype == "bool" else ident
            self.loop(ir.Constant(I64, 0), ir.Constant(I64, count),
                      lambda i, mem=mem, stored=stored: self.b.store(stored, self.b.gep(mem, [i])))
            slot = names.index(name)
            out.append((op, arr, args[slot], mem, count))
            args[slot] = mem
        return out

    def _combine(self, private) -> None:
        """Add each thread's partial results into the shared arrays, one thread at a time."""
        if not private:
            return
        b = self.b
        b.call(self.declare("GOMP_critical_start", VOID, []), [])
        for op, arr, shared, mem, count in private:
            def combine(i, op=op, arr=arr, shared=shared, mem=mem):
                p, q = self.b.gep(shared, [i]), self.b.gep(mem, [i])
                v = self.body.reduce(op, self.body.load_elem(p, arr.dtype), self.body.load_elem(q, arr.dtype), arr.dtype)
                self.body.store_elem(v, p, arr.dtype)
            self.loop(ir.Constant(I64, 0), ir.Constant(I64, count), combine)
        self.b.call(self.declare("GOMP_critical_end", VOID, []), [])
        free = self.declare("free", VOID, [I8P])
        for _, _, _, mem, _ in private:
            self.b.call(free, [self.b.bitcast(mem, I8P)])


def _pack_marks(ast: isl.AstNode, footprints: Dict[str, pack.Footprint]) -> Dict[str, Tuple[int, bool]]:
    """Every pack mark with a footprint, numbered in AST order, and whether it lies under a parallel
    mark (its buffer then has one slice per thread: a parallel loop that ends up serial, nested in
    another region, still runs on that region's threads)."""
    out: Dict[str, Tuple[int, bool]] = {}

    def walk(n: isl.AstNode, under: bool) -> None:
        t = n.get_type()
        if t == isl.ast_node_type.block:
            children = n.block_get_children()
            for i in range(children.n_ast_node()):
                walk(children.get_at(i), under)
        elif t == isl.ast_node_type.mark:
            mark = decode(n.mark_get_id().get_name())
            if isinstance(mark, Pack):
                key = pack.annotation(n)
                if key in footprints and key not in out:
                    out[key] = (len(out), under)
            walk(n.mark_get_node(), under or isinstance(mark, Parallel))
        elif t == isl.ast_node_type.for_:
            walk(n.for_get_body(), under)
        elif t == isl.ast_node_type.if_:
            walk(n.if_get_then_node(), under)
            if n.if_has_else_node():
                walk(n.if_get_else_node(), under)

    with interrupts_after():
        walk(ast, False)
    return out


def generate(scop: Scop, schedule: Optional[isl.Schedule] = None, *, entry: Optional[str] = None,
             header: str = "", min_parallel_copy: int = 0, parallel: bool = True,
             vector_math: Optional[VectorMath] = None) -> KernelSource:
    """LLVM IR for ``scop`` in the order of the schedule tree ``schedule`` (default: the original order).

    ``parallel=False`` runs every parallel loop serially (no OpenMP runtime to start threads with).
    ``vector_math``: the libm functions whose vector variants the JIT's machine has (:mod:`.llvm_vmath`).

    >>> # src = generate(scop, sched.tree()); src.lang == "llvm"; src.params as the C target's
    """
    entry = sanitize(entry or f"pt_{scop.name}")
    parts = build_ast(scop, schedule)
    gen = LlvmGenerator(scop, parallel=parallel, min_parallel_copy=min_parallel_copy, vector_math=vector_math)
    gen.footprints = parts.footprints
    gen.notes.extend(parts.errors)
    gen.locals |= parts.contracted
    gen.unsafe_locals |= parts.repeated
    gen.pack_slots = _pack_marks(parts.ast, parts.footprints)

    order = {"input": 0, "inout": 1, "output": 2, "temp": 3}
    params = tuple(sorted((a for a in scop.arrays if a.name not in gen.locals), key=lambda a: order[a.kind]))
    fn = ir.Function(gen.module, ir.FunctionType(I32, [I8P] * len(params)), entry)
    for a in fn.args:
        a.add_attribute("noalias")  # the C target's restrict: inputs, outputs and temporaries never overlap
    gen._enter(fn, {}, {})
    b = gen.b
    for a, arg in zip(params, fn.args):
        gen.frame.ptrs[a.name] = b.bitcast(arg, memory_type(a.dtype).as_pointer())
    buffers = llvm_tile.allocate_packs(gen)
    gen.node(parts.ast)
    llvm_tile.free_packs(gen, buffers)
    gen.b.ret(ir.Constant(I32, 0))
    gen._leave(None)
    gen.body.vector.keep_declarations()

    lines = [f"; Generated by polytile (llvm target) for {sanitize(scop.name)}."]
    lines += [f"; {ln}" for ln in header.splitlines()]
    lines += [f"; {s.name}: {(s.text or s.kind).replace(chr(10), ' ')}" for s in scop.statements]
    lines += [f"; note: {note}".replace("\n", " ") for note in gen.notes]
    return KernelSource(entry, "\n".join(lines) + "\n" + str(gen.module), params, lang="llvm")
