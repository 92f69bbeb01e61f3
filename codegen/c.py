"""OpenMP C backend: isl AST of a schedule tree -> C text (via cgen).

The generated unit is one function per kernel following the runtime's calling
convention (``int entry(void *a0, void *a1, ...)``: inputs, outputs,
temporaries; returns 0).  Arrays are re-typed as pointers to fixed-size
arrays, so accesses read like the source: ``C[i][j] += A[i][k] * B[k][j]``.

Schedule-tree marks (:mod:`polytile.scheduling.marks`, decoded once per mark
node) drive the loop decorations, register tiles, packed panels and contracted
temporaries; see :class:`AstPrinter`.  Statement bodies are printed by
:mod:`.c_expr`, whose prelude of helper functions starts every unit.

A statement instance ``S0(c0, c1, c2)`` of the AST becomes a block binding
the statement's iterators to the AST expressions, then the body::

    { const long i = c0; const long j = c1; const long k = c2;
      C[i][j] += A[i][k] * B[k][j]; }
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import cgen
import islpy as isl

from polytile import dtypes as D
from polytile.deadline import interrupts_after
from polytile.errors import ENTRY_ENOMEM, InternalError, ScheduleError
from polytile.isl_parts import maps_of
from polytile.poly import body as B
from polytile.poly.scop import Array, Scop, Statement
from polytile.codegen.c_threads import GNU_SOURCE, SPREAD_FUNCTION, THREADS_CLAUSE
from polytile.scheduling.marks import Dim, Local, Mark, Pack, Parallel, RegTile, Simd, Unroll, decode, encode

from . import c_accumulate, c_regblock, microkernel, pack
from .c_expr import PRELUDE, BodyPrinter, ctype, last_iteration, vector_math_prelude


@dataclass(frozen=True)
class KernelSource:
    """Generated source plus what the runtime needs to call it."""

    entry: str
    text: str
    params: Tuple[Array, ...]  # in call order: inputs, outputs, temporaries
    lang: str = "c"

    def __str__(self) -> str:
        return self.text


# ---------------------------------------------------------------------------
# AST walking
# ---------------------------------------------------------------------------


def _c(expr: isl.AstExpr) -> str:
    return expr.to_C_str()


class AstPrinter:
    """Walks an isl AST and builds cgen nodes.

    Marks from the schedule tree (:mod:`polytile.scheduling.marks`, built by
    :mod:`polytile.scheduling.tree`): :class:`Parallel` -> ``#pragma omp
    parallel for`` (with ``reduction(op:array[sections])``), :class:`Simd` ->
    ``#pragma omp simd``, :class:`Unroll` -> ``#pragma GCC unroll N`` (these
    three decorate the next loop), :class:`Local` -> a scalar that replaces
    array ``A`` inside the marked subtree (array contraction), :class:`Pack` ->
    a packed panel (:mod:`.pack`), :class:`RegTile` -> a register tile
    (:mod:`.microkernel`; of C statements, :mod:`.c_regblock`), :class:`Dim` -> a check that isl emitted the band's loop.
    """

    def __init__(self, scop: Scop, *, outline: bool = True, min_parallel_work: Optional[int] = None,
                 guarded_math: bool = True):
        self.outline = outline
        # Innermost parallel loops whose trip count is only known at run time run in parallel only
        # when their work (trip count x statements) reaches this many instances (see _parallel_if).
        self.min_parallel_work = min_parallel_work
        # Pack buffers shared by the threads with fewer elements are filled serially (generate()).
        self.min_parallel_copy = 0
        # Appended to every parallel loop's pragma (generate_region's adaptive_threads).
        self.thread_clause = ""
        self.scope: List[str] = []  # AST iterators of the enclosing loops
        self.outlined: List[cgen.Generable] = []  # parallel loop bodies as functions
        self.stmts: Dict[str, Statement] = scop.statement_map
        # Statements kept as C text (the C frontend): its 0-d arrays are plain scalar variables.
        self.c_source = any(st.c_text is not None for st in scop.statements)
        self.accumulate: Dict[str, str] = {}  # statement -> scalar accumulator of its SIMD reduction loop
        self.accumulators = 0
        self.accumulator_dtypes: Dict[str, str] = {}  # a Tile lane accumulator's element type (its clause)
        self.arrays = {a.name: a for a in scop.arrays}
        # exp and log through the prelude's pt_expf/pt_logf (c_expr._GUARDED): Tile kernels' C only, not CUDA's.
        self.body = BodyPrinter(self.arrays, guarded=guarded_math and not self.c_source)
        self.parallel_loops = 0  # '#pragma omp parallel for' loops emitted (a pack's parallel copy included)
        self.locals: set = set()
        self.unsafe_locals: set = set()  # 'local' marks isl's AST repeats: not one scope, keep the array
        self.vector_types: set = set()  # (dtype, lanes) used by register tiles
        self.notes: List[str] = []  # why a requested optimisation was not applied
        # Packing (see codegen/pack.py): boxes isl computed per pack mark, the
        # buffers allocated by the entry function (with whether each is per thread),
        # the packed buffer of each array inside the current subtree, and the C
        # variables (buffer slices, box origins) that outlined functions must receive.
        self.footprints: Dict[str, pack.Footprint] = {}
        self.pack_buffers: List[Tuple[pack.PackBuffer, bool]] = []
        self.packed: Dict[str, pack.PackBuffer] = {}
        self.pack_scope: List[Tuple[str, str]] = []  # (parameter declaration, name)
        self.parallel_depth = 0
        self.chunked_loops = 0  # innermost parallel loops outlined by chunks (_outline_chunks; PACK_PRELUDE's pt_chunk)
        self.nan_reductions = False  # a max/min reduction clause uses NAN_REDUCTION_PRELUDE's declarations
        self.allow_packs = outline  # the entry function owns the buffers; regions (C source) have none

    @staticmethod
    def ctype(dtype: str) -> str:
        return ctype(dtype)

    def node(self, n: isl.AstNode, marks: Tuple[Mark, ...] = ()) -> List:
        """C for the AST node ``n``; ``marks`` are the loop marks (parallel, simd, unroll) for the next loop."""
        t = n.get_type()
        if t == isl.ast_node_type.block:
            out: List = []
            children = n.block_get_children()
            for i in range(children.n_ast_node()):
                out.extend(self.node(children.get_at(i)))
            return out
        if t == isl.ast_node_type.mark:
            mark = decode(n.mark_get_id().get_name())
            inner = n.mark_get_node()
            match mark:
                case Local():
                    arr = self.arrays[mark.array]
                    if arr.name in self.unsafe_locals:
                        return self.node(inner, marks)  # the array stays in memory (see _local_arrays)
                    self.locals.add(arr.name)
                    local = f"pt_l_{arr.name}"  # pt_*: never a user's name (polytile.names)
                    saved = dict(self.body.locals)
                    self.body.locals[arr.name] = local
                    inside = self.node(inner, marks)
                    self.body.locals = saved
                    # A C file's element type is its own declaration (a typedef, `unsigned`), which
                    # the dtype only approximates (uint32 would need <stdint.h>).
                    decl = (f"__typeof__({arr.name}{'[0]' * len(arr.shape)})" if self.c_source
                            else ctype(arr.dtype))
                    return [cgen.Block([cgen.Line(f"{decl} {local};")] + inside)]
                case Pack():
                    return self._pack(n, mark, inner, marks)
                case RegTile():
                    # C statements (their own text) get the block in C text, Tile bodies in vectors.
                    emitter = c_regblock if self.c_source else microkernel
                    code = emitter.emit(self, inner, mark, lambda: self.node(inner, marks))
                    return code if code is not None else self.node(inner, marks)
                case Dim():
                    # The band's own loop must be right here; if isl generated none (one
                    # iteration, or a value fixed by outer loops), its marks are dropped
                    # rather than passed to an inner loop they were never checked for.
                    if inner.get_type() == isl.ast_node_type.for_:
                        return self.node(inner, marks)
                    if marks:
                        self.notes.append(f"marks {', '.join(map(encode, marks))} dropped: "
                                          f"isl generated no loop for {encode(mark)}")
                    return self.node(inner)
                case Parallel() | Simd() | Unroll():
                    return self.node(inner, marks + (mark,))
            raise InternalError(f"no C for schedule-tree mark {mark!r}")
        if t == isl.ast_node_type.for_:
            return self._for(n, marks)
        if t == isl.ast_node_type.if_:
            then = cgen.Block(self.node(n.if_get_then_node()))
            if n.if_has_else_node():
                return [cgen.If(_c(n.if_get_cond()), then, cgen.Block(self.node(n.if_get_else_node())))]
            return [cgen.If(_c(n.if_get_cond()), then)]
        if t == isl.ast_node_type.user:
            return [self._user(n.user_get_expr())]
        raise InternalError(f"unexpected isl AST node type {t}")

    def _pack(self, n: isl.AstNode, mark: Pack, inner: isl.AstNode, marks: Tuple[Mark, ...]) -> List:
        """Copy the mark's footprint into a blocked buffer, then the subtree reading through it."""
        key = pack.annotation(n)
        fp = self.footprints.get(key) if key else None
        if fp is None or not self.allow_packs:
            self.notes.append(f"{encode(mark)} not applied: " + ("no footprint" if self.allow_packs else "no buffers in a C region"))
            return self.node(inner, marks)
        arr = self.arrays[fp.array]
        k = len(self.pack_buffers)
        buf = pack.PackBuffer(f"pt_pk{k}", arr, fp.dim, fp.block, fp.size)
        per_thread = self.parallel_depth > 0
        self.pack_buffers.append((buf, per_thread))
        t = ctype(arr.dtype)
        where = f"pt_pkbuf{k}" + (f" + (long)pt_thread_num() * {buf.elements}" if per_thread else "")
        head: List[cgen.Generable] = [cgen.Line(f"{t} *restrict {buf.name} = {where};")]
        parallel_copy = not per_thread and buf.elements >= self.min_parallel_copy
        self.parallel_loops += parallel_copy
        head += pack.copy_code(buf, fp, lambda idx: self.body.access(arr.name, tuple(B.Iter(x) for x in idx)),
                               parallel=parallel_copy)
        saved_packed, saved_scope = dict(self.packed), list(self.pack_scope)
        self.packed[arr.name] = buf
        self.pack_scope.append((f"{t} *restrict {buf.name}", buf.name))
        self.pack_scope += [(f"const long {buf.origin(d)}", buf.origin(d)) for d in range(len(fp.size))]
        try:
            inside = self.node(inner, marks)
        finally:
            self.packed, self.pack_scope = saved_packed, saved_scope
        return [cgen.Block(head + inside)]

    def _reductions(self, mark: Union[Parallel, Simd]) -> str:
        """The ``reduction(...)`` clauses of a ``parallel op:A,...`` or ``simd op:s`` mark."""
        clause = ""
        for op, arr in mark.reductions:
            if arr in self.arrays and self.arrays[arr].dtype == "bool":
                # GCC combines _Bool partial results of '+' modulo 2 (1 + 1 -> 0), and '*' alike;
                # on truth values the saturating sum is 'or' and the product 'and'.
                op = _BOOL_REDUCTION.get(op, op)
            dtype = self.arrays[arr].dtype if arr in self.arrays else self.accumulator_dtypes.get(arr)
            if op in ("max", "min") and dtype in NAN_REDUCTIONS and not self.c_source:
                # OpenMP's built-in max/min combine partial results with C's comparison, which drops a
                # NaN that numpy's maximum/minimum (and the serial code, pt_max_*) keep: combine with
                # polytile's own helper instead (declared in NAN_REDUCTION_PRELUDE).
                op = f"pt_r{op}_{dtype}"
                self.nan_reductions = True
            if arr in self.body.locals:  # contracted to a scalar: reduce the scalar
                clause += f" reduction({op}:{self.body.locals[arr]})"
                continue
            if arr not in self.arrays:  # an accumulator of a SIMD reduction (see _accumulator)
                clause += f" reduction({op}:{arr})"
                continue
            a = self.arrays[arr]
            if not a.shape and self.c_source:  # a C scalar variable, not a pointer to one cell
                clause += f" reduction({op}:{arr})"
                continue
            if any(d < 0 for d in a.shape):
                raise ScheduleError(f"a reduction into {arr} needs its extents, which the source does not give: "
                                    "reduce into a scalar or an array of declared size")
            sections = "".join(f"[0:{d}]" for d in a.shape) or "[0:1]"
            clause += f" reduction({op}:{arr}{sections})"
        return clause

    def _pragmas(self, marks: Tuple[Mark, ...], cyclic: bool = False) -> List[str]:
        par = [m for m in marks if isinstance(m, Parallel)]
        simd = [m for m in marks if isinstance(m, Simd)]
        unroll = [m for m in marks if isinstance(m, Unroll)]
        out = []
        if par:
            clause = "omp parallel for"
            if simd:
                clause += " simd"
            clause += (" schedule(static, 1)" if cyclic else " schedule(static)") + self._reductions(par[0])
            out.append(clause + self.thread_clause)
        elif simd:
            out.append("omp simd" + self._reductions(simd[0]))
        if unroll:
            if out:
                # An OpenMP loop pragma must be followed by its 'for'; GCC rejects another
                # pragma in between, and unrolling a parallel/simd loop is the runtime's job.
                self.notes.append(f"unroll dropped on a loop that is also {'parallel' if par else 'simd'}")
            else:
                out.append(f"GCC unroll {unroll[0].factor}")
        return out

    def _parallel_if(self, n: isl.AstNode, it: str) -> str:
        """``trip >= k``, the test that versions an innermost parallel loop whose trip count is not a constant.

        A parallel region costs a fork and a join barrier (a few microseconds); an innermost loop of
        few iterations inside a sequential loop (durbin's ``for (i = 0; i < k; i++)`` inside
        ``for k``) pays that on every outer iteration for less work than it saves.  Where the C
        optimiser could not bound the work (the sizes are parameters), ``if (trip >= k) { parallel
        loop } else { the same loop, serial }`` starts the region only when ``trip count x statements
        >= min_parallel_work``; results are the same either way (the loop is parallel, so any order of
        its iterations is legal).  (OpenMP's ``if`` clause would still enter libgomp on every
        execution: about as slow as the region for durbin.)  Loops with inner loops, a step other
        than 1, or a constant trip count are not versioned (the optimiser decided those).
        """
        if _c(n.for_get_inc()) != "1":
            return ""
        cond = n.for_get_cond()
        try:
            op = cond.op_get_type()
        except isl.Error:
            return ""
        if op not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt) or _c(cond.op_get_arg(0)) != it:
            return ""
        users = _innermost_statements(n)
        if not users:
            return ""
        init, upper = _c(n.for_get_init()), _c(cond.op_get_arg(1))
        atom = re.compile(r"[\w.]+")
        upper = upper if atom.fullmatch(upper) else f"({upper})"
        trip = upper if init == "0" else f"{upper} - {init if atom.fullmatch(init) else f'({init})'}"
        trip += " + 1" if op == isl.ast_expr_op_type.le else ""
        if re.fullmatch(r"[()\d\s+-]*", trip):
            return ""  # a constant trip count
        need = -(-self.min_parallel_work // len(users))
        return f"{trip} >= {need}"

    def _serial_float_reduction(self, n: isl.AstNode, it: str) -> bool:
        """Innermost loop ``n`` holds a float reduction into a cell that does not move with it.

        GCC 12.2 at -O3 miscompiles such loops when it peels them completely (constant trip count
        up to about 16) and then vectorises the loop around them with a reversed read: ``T[0] +=
        A[i][7 - j]`` over 8 x 8 sums the wrong elements (tests/test_codegen_gcc_workarounds.py).
        ``#pragma GCC unroll 1`` keeps the loop; a strict float reduction is a serial chain of
        adds, so peeling it bought little.
        """
        calls = _innermost_statements(n)
        if calls is None:
            return False
        word = re.compile(rf"\b{re.escape(it)}\b")
        for call in calls:
            st = self.stmts.get(call.op_get_arg(0).id_get_id().get_name())
            if st is None or not st.is_reduction or self.arrays[st.body.array].dtype not in D.FLOATS:
                continue
            w = st.write_map().gist_domain(st.domain)  # the domain's bounds would "involve" every iterator
            moving = [k for k in range(len(st.iters))
                      if word.search(_c(call.op_get_arg(k + 1))) and w.involves_dims(isl.dim_type.in_, k, 1)]
            if not moving:
                return True
        return False

    def _cyclic(self, n: isl.AstNode, it: str) -> bool:
        """Deal the iterations of parallel loop ``n`` out cyclically (``schedule(static, 1)``)?

        Yes when it is a loop over tiles (an inner loop starts at ``32 * it``)
        and some statement inside has a domain that is not a box
        (``{ S[i,j] : j <= i }``): its tiles then differ in work (syrk's
        triangle: the last rows do most), and contiguous blocks would give one
        thread most of it.  A loop over single rows or columns stays in
        blocks: neighbouring iterations write neighbouring elements, and
        dealing them out one by one would share cache lines between threads.
        """
        return cyclic_loop(self.stmts, n, it)

    def _for(self, n: isl.AstNode, marks: Tuple[Mark, ...]) -> List:
        it = _c(n.for_get_iterator())
        init = _c(n.for_get_init())
        cond = _c(n.for_get_cond()) if not n.for_is_degenerate() else ""
        accumulate, before, after, jam = {}, [], [], None
        if not marks and not self.c_source:
            jam = c_accumulate.jam_rows(self, n, it)
            if jam is not None:  # rows summed side by side; the rest (head) and the tail as they were
                init = jam[1]
        if self.parallel_depth and any(isinstance(m, Parallel) for m in marks):
            # Inside a parallel loop, a parallel loop would open a nested region that libgomp runs on
            # the calling thread alone (nesting is off by default): the region's bookkeeping on every
            # entry and no parallelism (autotile's fused epilogues sit inside the GEMM's parallel loop).
            # It runs as a plain loop, as the llvm target runs it; a simd mark stays.
            self.notes.append(f"parallel loop {it} inside a parallel loop runs serially")
            marks = tuple(m for m in marks if not isinstance(m, Parallel))
        if marks and not n.for_is_degenerate():
            accumulate, marks, before, after = c_accumulate.simd_accumulator(self, n, it, marks)
        elif not marks and not n.for_is_degenerate() and not self.c_source:
            lanes = c_accumulate.lane_reduction(self, n, it)
            if lanes is not None:  # a Tile sum into one cell: in SIMD lanes (c_accumulate.lane_reduction)
                accumulate, marks, before, after = c_accumulate.tile_accumulator(self, n, it, (lanes,), lanes)
        cyclic = any(isinstance(m, Parallel) for m in marks) and self._cyclic(n, it)
        pragmas = self._pragmas(marks, cyclic) if marks and not n.for_is_degenerate() else []
        if pragmas and not _canonical(cond, it):
            pragmas = [p for p in pragmas if p.startswith("GCC")]
        if before and not any(p.startswith("omp simd") for p in pragmas):
            accumulate, before, after = {}, [], []  # no simd loop after all: the statement updates its cell
        if not pragmas and not n.for_is_degenerate() and self._serial_float_reduction(n, it):
            pragmas = ["GCC unroll 1"]
        par = any(p.startswith("omp parallel") for p in pragmas)
        guard = self._parallel_if(n, it) if par and self.min_parallel_work else ""
        self.scope.append(it)
        self.parallel_depth += par
        saved = self.accumulate
        self.accumulate = {**saved, **accumulate}
        try:
            body = self.node(n.for_get_body())
        finally:
            self.scope.pop()
            self.parallel_depth -= par
            self.accumulate = saved
        if n.for_is_degenerate():
            return [cgen.Block([cgen.Line(f"const long {it} = {init};")] + body)]
        inc = _c(n.for_get_inc())
        if par:
            self.parallel_loops += 1
            if self.outline and not self.body.locals:
                plain = [f"omp parallel for schedule(static){self.thread_clause}"]
                if pragmas == plain and not guard and inc == "1":
                    if _innermost_statements(n) is not None:
                        return self._outline_chunks(it, init, cond, body, pragmas)
                    rows = c_accumulate.jam_rows(self, n, it, ("pt_lo", "pt_hi"))
                    if rows is not None:  # each thread's chunk of rows summed side by side
                        return self._outline_chunks(it, init, cond, body, pragmas, rows)
                body = [self._outline(it, body)]
        loop = cgen.For(f"long {it} = {init}", cond, f"{it} += {inc}", cgen.Block(body))
        code = [cgen.Pragma(p) for p in pragmas] + [loop]
        if guard:
            # The same loop without its parallel region (a simd stays) when there is too little work.
            reductions = self._reductions(next(m for m in marks if isinstance(m, Parallel)))
            serial = ["omp simd" + reductions for p in pragmas if p.startswith("omp parallel for simd")]
            code = [cgen.If(guard, cgen.Block(code), cgen.Block([cgen.Pragma(p) for p in serial] + [loop]))]
        if before:
            code = [cgen.Block([cgen.Line(b) for b in before] + code + [cgen.Line(a) for a in after])]
        return [cgen.Block(jam[0] + code)] if jam is not None else code

    def _outline_chunks(self, it: str, init: str, cond: str, body: List, pragmas: List[str],
                        jam: Optional[Tuple[List, str]] = None) -> List:
        """An innermost parallel loop (``cond`` canonical): each thread's chunk of it as one loop in an
        outlined function, which gcc vectorises (an elementwise ``exp`` over 2^20 floats called the
        outlined body once per element: no vector code, a call per element)::

            { const long pt_cs0 = pt_chunk((1048575) - (0) + 1);
              #pragma omp parallel for schedule(static)
              for (long c0 = 0; c0 <= 1048575; c0 += pt_cs0)
                pt_par0(X, E, c0, min(c0 + pt_cs0 - 1, 1048575)); }

        ``pt_chunk`` is the iterations per thread, rounded up to 16 (PACK_PRELUDE); ``pt_par0`` loops
        ``for (c0 = pt_lo; c0 <= pt_hi; c0 += 1)`` over the statement -- or, with ``jam`` (the rows of a sum
        :func:`c_accumulate.jam_rows` runs side by side, and the variable holding the first row it left),
        over the rows left after them.
        """
        last = last_iteration(cond, it)
        self.chunked_loops += 1
        loop = cgen.For(f"long {it} = {jam[1] if jam else 'pt_lo'}", f"{it} <= pt_hi", f"{it} += 1", cgen.Block(body))
        name, args = self._outlined_function(jam[0] + [loop] if jam else [loop], ("pt_lo", "pt_hi"))
        chunk = f"pt_cs{name[len('pt_par'):]}"
        text = f"{name}({', '.join(args[:-2] + [it, f'min({it} + {chunk} - 1, {last})'])});"
        region = cgen.For(f"long {it} = {init}", f"{it} <= {last}", f"{it} += {chunk}", cgen.Block([cgen.Line(text)]))
        size = f"({last}) - ({init}) + 1"
        return [cgen.Block([cgen.Line(f"const long {chunk} = pt_chunk({size});")]
                           + [cgen.Pragma(p) for p in pragmas] + [region])]

    def _outline(self, it: str, body: List) -> cgen.Generable:
        """Move a parallel loop's body into its own function; return the call.

        GCC does not vectorise loops inside the function it outlines for an
        OpenMP region (the arrays become fields of the shared-data record and
        their accesses "complicated"); a separate function whose arrays are
        ``restrict`` parameters vectorises like serial code.
        """
        name, args = self._outlined_function(body, (it,))
        return cgen.Line(f"{name}({', '.join(args)});")

    def _outlined_function(self, body: List, own: Sequence[str]) -> Tuple[str, List[str]]:
        """Define ``body`` as a function taking the arrays it names, the enclosing iterators and
        ``own`` (the loop's iterator, or its chunk's bounds); its name and the call's arguments."""
        name = f"pt_par{len(self.outlined)}"
        # Only what the body names is passed: passing every array to every region made the C text
        # (and the C compiler's time) grow with statements x regions, quadratically in program size.
        used = set(_IDENT.findall("\n".join(str(b) for b in body)))
        arrays = [a for a in self.arrays.values() if a.name not in self.locals and a.name in used]
        # Pack buffers the body may slice, and packed views in scope around the loop.
        bufs = [(f"{ctype(b.array.dtype)} *restrict pt_pkbuf{k}", f"pt_pkbuf{k}")
                for k, (b, _) in enumerate(self.pack_buffers)]
        extra = [(d, v) for d, v in bufs + self.pack_scope if v in used]
        params = ([_param_type(a) for a in arrays] + [d for d, _ in extra]
                  + [f"const long {x}" for x in self.scope + list(own)])
        fn = cgen.FunctionBody(
            cgen.Line(f"static __attribute__((noinline)) void {name}({', '.join(params) or 'void'})"),
            cgen.Block(body))
        self.outlined.append(fn)
        return name, [a.name for a in arrays] + [v for _, v in extra] + self.scope + list(own)

    def _user(self, call: isl.AstExpr) -> cgen.Generable:
        name = call.op_get_arg(0).id_get_id().get_name()
        st = self.stmts[name]
        binds = [f"const long {v} = {_c(call.op_get_arg(i + 1))};" for i, v in enumerate(st.iters)]
        stmt = st.c_text if st.c_text is not None else self.body.store(st.body)
        if name in self.accumulate and st.c_text is None:  # a Tile contraction's SIMD reduction loop
            stmt = c_accumulate.lane_update(self, st, self.accumulate[name])
        elif name in self.accumulate:  # inside a SIMD reduction loop: update the loop's accumulator
            _, op, operand = st.c_reduction
            stmt = f"{self.accumulate[name]} {op} ({operand});"
        if binds:
            return cgen.Line("{ " + " ".join(binds) + " " + stmt + " }")
        return cgen.Line(stmt)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: OpenMP reduction operators for bool cells (see AstPrinter._reductions).
_BOOL_REDUCTION = {"+": "|", "*": "&", "max": "|", "min": "&"}


def _comment(text: str) -> str:
    """Text safe inside ``/* ... */``."""
    return text.replace("*/", "* /").replace("\\\n", " ")


def cyclic_loop(stmts: Dict[str, Statement], n: isl.AstNode, it: str) -> bool:
    """Whether parallel loop ``n`` (iterator ``it``) deals its iterations out cyclically: see :meth:`AstPrinter._cyclic`."""
    names: set = set()
    tiles = re.compile(rf"\b\d+ \* {re.escape(it)}\b")
    over_tiles = []

    def visit(node: isl.AstNode) -> bool:
        if node.get_type() == isl.ast_node_type.user:
            names.add(node.user_get_expr().op_get_arg(0).id_get_id().get_name())
        elif node.get_type() == isl.ast_node_type.for_:
            if tiles.search(_c(node.for_get_init())) or tiles.search(_c(node.for_get_cond())):
                over_tiles.append(node)
        return True
    with interrupts_after():
        n.foreach_descendant_top_down(visit)
    return bool(over_tiles) and any(not _is_box(stmts[x].domain) for x in names if x in stmts)


def _is_box(dom: isl.Set) -> bool:
    """``dom`` equals the product of its projections onto each dimension (a rectangle, for any parameters)."""
    n = dom.dim(isl.dim_type.set)
    box = isl.Set.universe(dom.get_space())
    for k in range(n):
        p = dom.project_out(isl.dim_type.set, k + 1, n - k - 1).project_out(isl.dim_type.set, 0, k)
        p = p.insert_dims(isl.dim_type.set, 0, k).add_dims(isl.dim_type.set, n - k - 1)
        box = box.intersect(p.set_tuple_id(dom.get_tuple_id()) if dom.has_tuple_id() else p)
    return box.is_subset(dom)


def _canonical(cond: str, it: str) -> bool:
    """OpenMP wants ``it <op> bound`` with a loop-invariant bound."""
    return last_iteration(cond, it) is not None


def _innermost_statements(n: isl.AstNode) -> Optional[List[isl.AstExpr]]:
    """The statement calls (user expressions) in the body of loop ``n``, or None if the body holds
    another loop (a degenerate one, a single iteration, does not count).  The expressions are taken
    inside the visitor: the node objects isl passes it are not valid after it returns."""
    nested: List[bool] = []
    users: List[isl.AstExpr] = []

    def visit(x: isl.AstNode) -> bool:
        t = x.get_type()
        if t == isl.ast_node_type.for_ and not x.for_is_degenerate():
            nested.append(True)
        elif t == isl.ast_node_type.user:
            users.append(x.user_get_expr())
        return not nested  # an inner loop settles it: stop descending
    with interrupts_after():  # (the visitor is a Python callback inside isl)
        n.for_get_body().foreach_descendant_top_down(visit)
    return None if nested else users


def _local_arrays(ast: isl.AstNode) -> Tuple[set, set]:
    """(arrays replaced by local scalars, arrays whose ``local`` mark the AST holds more than once).

    A contracted temporary lives in one scalar declared by its mark.  isl may generate a marked
    subtree more than once (a band split into pieces: ``T = A + 1`` at the first point, the
    consumers in a loop after it); each copy would declare its own scalar and the consumers would
    read one that was never written.  Such an array is not contracted.
    """
    count: Dict[str, int] = {}

    def visit(n: isl.AstNode) -> bool:
        if n.get_type() == isl.ast_node_type.mark:
            mark = decode(n.mark_get_id().get_name())
            if isinstance(mark, Local):
                count[mark.array] = count.get(mark.array, 0) + 1
        return True

    with interrupts_after():
        ast.foreach_descendant_top_down(visit)
    return {a for a, n in count.items() if n == 1}, {a for a, n in count.items() if n > 1}


def _pointer(a: Array, declarator: str) -> str:
    """``const float *D`` / ``const float (*D)[7]``: the typed pointer an array is used through."""
    t = ctype(a.dtype)
    const = "const " if a.kind == "input" else ""
    if len(a.shape) <= 1:
        return f"{const}{t} *{declarator}"
    return f"{const}{t} (*{declarator}){''.join(f'[{d}]' for d in a.shape[1:])}"


def _param_type(a: Array) -> str:
    """``const float (*restrict A)[7]``: a parameter of an outlined function."""
    return _pointer(a, f"restrict {a.name}")


def _param_decl(a: Array, k: int) -> str:
    """``const float (*restrict A)[7] = (const float (*)[7])a0;``: the entry's view of its k-th argument."""
    return f"{_param_type(a)} = ({_pointer(a, '')})a{k};"


@dataclass
class AstParts:
    """isl's AST of a schedule and what the code generators need beside it (see :func:`build_ast`)."""

    ast: isl.AstNode
    footprints: Dict[str, pack.Footprint]  # pack mark annotation -> its box
    errors: List[str]  # pack marks whose footprint could not be computed
    contracted: set  # arrays replaced by local scalars
    repeated: set  # arrays whose 'local' mark isl generated more than once (kept in memory)


def build_ast(scop: Scop, schedule: Optional[isl.Schedule] = None) -> AstParts:
    """isl's AST of ``schedule`` (default: the Scop's) with the loop counters named clear of the
    program's names, pack marks annotated with their footprints, and the contracted temporaries.
    Every code generator (C here, LLVM in :mod:`.llvm`) starts from it.

    >>> # parts = build_ast(scop, sched.tree()); parts.ast.to_C_str()
    """
    sched = schedule if schedule is not None else scop.schedule
    footprints: Dict[str, pack.Footprint] = {}
    errors: List[str] = []
    build = _counters(isl.AstBuild.from_context(scop.context), sched, fresh_counter_prefix(_names_in(scop)))
    build, hook_handle = build.set_after_each_mark(pack.footprint_hook(scop, footprints, errors))
    with interrupts_after():  # a Ctrl-C must not unwind through isl from the hook
        ast = build.node_from_schedule(sched)
    del hook_handle  # the callback is only called while the AST is built
    contracted, repeated = _local_arrays(ast)
    return AstParts(ast, footprints, errors, contracted, repeated)


def generate(scop: Scop, schedule: Optional[isl.Schedule] = None, *, entry: Optional[str] = None,
             header: str = "", min_parallel_copy: int = 0) -> KernelSource:
    """C source for ``scop`` executed in the order of the schedule tree ``schedule`` (default: original).

    A packed buffer shared by the threads is filled by a parallel loop when it holds at least
    ``min_parallel_copy`` elements (fewer cannot pay for a parallel region), else serially.

    >>> # src = generate(scop, sched); src.text starts with the prelude and holds
    >>> # int <entry>(void *a0, ...) { ... #pragma omp parallel for ... return 0; }
    """
    parts = build_ast(scop, schedule)
    printer = AstPrinter(scop)
    printer.min_parallel_copy = min_parallel_copy
    printer.footprints = parts.footprints
    printer.notes.extend(parts.errors)
    printer.locals |= parts.contracted  # known before any parallel body is outlined
    printer.unsafe_locals |= parts.repeated
    body = printer.node(parts.ast)
    vtypes = "".join(microkernel.vec_typedef(d, v, ctype(d)) + "\n" for d, v in sorted(printer.vector_types))
    if printer.vector_types:
        vtypes += microkernel.keep_macro(max(D.width(d) // 8 * v for d, v in printer.vector_types))
    helpers = "".join(str(f) + "\n\n" for f in printer.outlined)
    # A kernel with a parallel region also exports the runtime's spread region (SPREAD_FUNCTION): at the
    # end, so the entry stays the file's first function; its feature macro before every header.
    tail = SPREAD_FUNCTION if printer.parallel_loops else ""
    prelude = (GNU_SOURCE if tail else "") + PRELUDE + (PACK_PRELUDE if printer.pack_buffers or printer.chunked_loops else "") \
        + (NAN_REDUCTION_PRELUDE if printer.nan_reductions else "")
    if not printer.c_source:  # Tile kernels' libm calls may use glibc's vector variants (c_expr.LIBMVEC)
        prelude += vector_math_prelude(printer.body.libm)
    if entry is None:
        # pt_<program name>, unless the file already defines that name: a program called par0 (par0.tile)
        # would clash with the outlined loop pt_par0, one called max_float32 with a prelude helper.
        # pt_spread is reserved even where this file does not define it: the runtime takes that symbol
        # from any kernel library it loads (polytile.runtime.spread.use_library).
        taken = set(re.findall(r"\b[A-Za-z_]\w*\b", prelude + vtypes + helpers + tail)) | {"pt_spread"}
        entry = f"pt_{scop.name}"
        while entry in taken:
            entry += "_kernel"

    order = {"input": 0, "inout": 1, "output": 2, "temp": 3}
    params = tuple(sorted((a for a in scop.arrays if a.name not in printer.locals), key=lambda a: order[a.kind]))
    decls = [cgen.Line(_param_decl(a, k)) for k, a in enumerate(params)]
    alloc, free = _pack_buffers(printer.pack_buffers)
    sig = ", ".join(f"void *restrict a{k}" for k in range(len(params))) or "void"
    fn = cgen.FunctionBody(
        cgen.Line(f"int {entry}({sig})"),
        cgen.Block(decls + alloc + body + free + [cgen.Line("return 0;")]),
    )
    # User text inside a C comment: '*/' would end it early.
    comments = [f" * {_comment(ln)}" for ln in header.splitlines()] if header else []
    for s in scop.statements:
        comments.append(f" * {s.name}: {_comment(s.text or s.kind)}")
    for note in printer.notes:
        comments.append(f" * note: {_comment(note)}")
    banner = "/* Generated by polytile.\n" + "\n".join(comments) + "\n */\n"
    text = banner + prelude + vtypes + "\n" + helpers + str(fn) + "\n" + tail
    return KernelSource(entry, text, params)


#: Float types whose max/min reductions combine with a NaN-propagating declared reduction.
NAN_REDUCTIONS = ("float32", "float64")
NAN_REDUCTION_PRELUDE = "".join(
    f"#pragma omp declare reduction(pt_r{op}_{d} : {t} : omp_out = pt_{op}_{d}(omp_out, omp_in)) "
    f"initializer(omp_priv = {'-' if op == 'max' else ''}INFINITY)\n"
    for d, t in (("float32", "float"), ("float64", "double")) for op in ("max", "min"))

PACK_PRELUDE = r"""#ifdef _OPENMP
#include <omp.h>
static inline int pt_thread_num(void) { return omp_get_thread_num(); }
static inline int pt_max_threads(void) { return omp_get_max_threads(); }
#else
static inline int pt_thread_num(void) { return 0; }
static inline int pt_max_threads(void) { return 1; }
#endif
/* Iterations per thread of a loop of n, rounded up to 16 (a chunked parallel loop's step). */
static inline long pt_chunk(long n) { long p = pt_max_threads(), c = (n + p - 1) / p; return c < 16 ? 16 : (c + 15) / 16 * 16; }
"""



def _pack_buffers(buffers) -> Tuple[List[cgen.Generable], List[cgen.Generable]]:
    """Allocation (one slice per thread where the pack runs inside a parallel loop) and release."""
    if not buffers:
        return [], []
    alloc: List[cgen.Generable] = [cgen.Line("const long pt_threads = pt_max_threads();")]
    free: List[cgen.Generable] = []
    names = []
    for k, (buf, per_thread) in enumerate(buffers):
        t = ctype(buf.array.dtype)
        count = f"{buf.elements}L" + (" * pt_threads" if per_thread else "")
        nbytes = f"(({count} * (long)sizeof({t}) + {pack.ALIGN - 1}) / {pack.ALIGN}) * {pack.ALIGN}"
        alloc.append(cgen.Line(f"{t} *restrict pt_pkbuf{k} = ({t} *)aligned_alloc({pack.ALIGN}, {nbytes});"))
        names.append(f"pt_pkbuf{k}")
    frees = " ".join(f"free({x});" for x in names)
    alloc.append(cgen.Line(f"if ({' || '.join('!' + x for x in names)}) {{ {frees} return {ENTRY_ENOMEM}; }}"))
    free.append(cgen.Line(frees))
    return alloc, free


#: isl's AST helpers for a region inside the user's file, and (REGION_POSTLUDE, after the region) the user's
#: own meaning of these names restored: a macro of theirs is saved and put back, a function of theirs is
#: visible again.  Left defined, ``max(cnt++, -1)`` after the region called the macro and counted twice.
REGION_MACROS = (("floord", "(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))"),
                 ("min", "(a, b) ((a) < (b) ? (a) : (b))"), ("max", "(a, b) ((a) > (b) ? (a) : (b))"))
REGION_PRELUDE = "".join(f'#pragma push_macro("{n}")\n#undef {n}\n#define {n}{d}\n' for n, d in REGION_MACROS)
REGION_POSTLUDE = "".join(f'#pragma pop_macro("{n}")\n' for n, _ in reversed(REGION_MACROS))


def fresh_counter_prefix(taken: Sequence[str]) -> str:
    """``c`` when no name of ``taken`` is ``c<digits>``, else the first of ``pt_c``, ``pt_c_``, ... that is free.

    >>> fresh_counter_prefix({"x", "c1"}), fresh_counter_prefix({"x"})
    ('pt_c', 'c')
    """
    for k in itertools.count():
        prefix = "c" if k == 0 else "pt_c" + "_" * (k - 1)
        pat = re.compile(re.escape(prefix) + r"\d+$")
        if not any(pat.match(n) for n in taken):
            return prefix
    raise AssertionError("unreachable")


def _names_in(scop: Scop) -> set:
    """Identifiers the generated code must not shadow: parameters, arrays and the statements' C text."""
    names = {a.name for a in scop.arrays}
    space = scop.domain.get_space()
    names |= {space.get_dim_name(isl.dim_type.param, k) for k in range(space.dim(isl.dim_type.param))}
    for st in scop.statements:
        for text in (st.c_text, *(st.c_reduction or ())):
            if isinstance(text, str):
                names |= set(_IDENT.findall(text))
    return names


def _counters(build: isl.AstBuild, schedule: isl.Schedule, counter: str) -> isl.AstBuild:
    """``build`` naming loop counters ``counter0, counter1, ...`` (isl's own names are ``c0, c1, ...``)."""
    if counter == "c":
        return build
    ctx = build.get_ctx()
    dims = [0, *(m.dim(isl.dim_type.out) for m in maps_of(schedule.get_map()))]
    ids = isl.IdList.alloc(ctx, 0)
    for k in range(max(dims) + 1):  # one name per schedule dimension
        ids = ids.add(isl.Id(f"{counter}{k}", context=ctx))
    return build.set_iterators(ids)


def generate_region(scop: Scop, schedule: isl.Schedule, counter: Optional[str] = None, *,
                    min_parallel_work: Optional[int] = None, adaptive_threads: bool = False) -> Tuple[str, List[str]]:
    """Only the loop nest for ``scop`` (source-to-source output), plus notes.

    Statements with ``c_text`` are emitted as their own C code inside a block
    that binds their iterators (``{ const long i = c0; ... A[i][j] = ...; }``),
    so the region drops into the original function where the arrays and
    scalars are already declared.  The AST helper macros are guarded so the
    region can appear several times in one file.  With ``min_parallel_work``, innermost parallel
    loops with a run-time trip count start their parallel region only for that much work
    (:meth:`AstPrinter._parallel_if`).  With ``adaptive_threads``, every parallel loop takes
    ``num_threads(pt_threads())`` (:mod:`.c_threads`; the file must then define ``pt_threads``).
    """
    if counter is None:
        counter = fresh_counter_prefix(_names_in(scop))
    build = _counters(isl.AstBuild.from_context(scop.context), schedule, counter)
    ast = build.node_from_schedule(schedule)
    printer = AstPrinter(scop, outline=False, min_parallel_work=min_parallel_work)
    if adaptive_threads:
        printer.thread_clause = THREADS_CLAUSE
    body = printer.node(ast)
    if printer.vector_types:
        raise InternalError("register tiles are not available in source-to-source output")
    return REGION_PRELUDE + str(cgen.Block(body)), printer.notes
