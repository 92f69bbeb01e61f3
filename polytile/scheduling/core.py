"""Schedules as data: per-statement affine schedules, loop names, marks, and the steps that made them.

Representation
--------------
Every statement ``S`` has a *flat* schedule, an isl map into a time vector
shared by all statements, in the "2d+1" form of Kelly/Pugh and CLooG::

    S0[i, j, k] -> [0, i, 0, j, 0, k, 0]        β0 α1 β1 α2 β2 α3 β3
    E1[a, b]    -> [1, a, 0, b, 0, 0, 0]

Odd positions (α) are loops, even positions (β) are constants that order the
statements sharing the loops outside them.  Two statements share a loop at
α position ``d`` when their β values agree at every β position before ``d``
(that is what *fusion* means here).  Each α position of a statement has a
*name* (``i``, ``i_t`` for its tile loop, ``None`` for padding); users and
steps address loops as ``(statement, name)``.  Tiling inserts
``floor(i/32)`` dimensions, skewing replaces ``j`` with ``j + i``, and so on:
every transformation is an isl map applied to the time vectors of the
statements that share the transformed loops.

Legality
--------
A schedule ``θ`` respects a dependence relation ``D`` (source -> sink) when
every pair runs in order: ``D ⊆ { a -> b : θ(a) ≺ θ(b) }``.  Reduction
dependences (a Tile aggregation onto its own cell) are left out, because
aggregations may be reordered; they still forbid running a loop in parallel
unless the loop is given a reduction clause.  A loop at position ``d`` of a
group ``G`` of statements is parallel when no dependence between instances
of ``G`` with equal time prefix ``θ[0..d-1]`` has different ``θ[d]``.

The isl schedule *tree* (with ``mark`` nodes for parallel / simd / unroll /
local buffers) is derived from this data on demand, for code generation and
for isl's YAML text, by :mod:`.tree` (with the readable loop tree and the JSON
document); the package attaches those as methods (``s.tree()``, ``s.describe()``,
``s.dumps()``, ``s.save(path)``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from ..deps import Dependences
from ..errors import IllegalSchedule, ScheduleError
from ..isl_parts import maps_of, sets_of
from ..poly import body as B
from ..poly.scop import Scop
from .marks import Pack, Parallel, RegTile, Simd, Unroll

# Mark kinds a loop can carry: the keywords of their schedule-tree marks (.marks), so the two never drift apart.
PARALLEL = Parallel.keyword  # arg: whether reductions may ride on the loop
SIMD = Simd.keyword  # arg: likewise
UNROLL = Unroll.keyword  # arg: the factor
REGTILE = RegTile.keyword  # arg: RegTile(...).arg(), e.g. "1 i=8 j=32 16"
PACK = Pack.keyword  # arg (array, array dim, block): copy the array's tile footprint into a packed buffer
MARK_KINDS = (PARALLEL, SIMD, UNROLL, REGTILE, PACK)


@dataclass(frozen=True)
class Step:
    """One transformation step: ``Step("tile", (("stmt", "S0"), ("sizes", {"i": 32})))``.

    Steps are small frozen data; a schedule is the replay of its steps on a
    base schedule, so they can be stored, diffed, hashed and replayed on
    other shapes.
    """

    op: str
    args: Tuple[Tuple[str, Any], ...] = ()

    @classmethod
    def make(cls, op: str, **args) -> "Step":
        return cls(op, tuple((k, _freeze(v)) for k, v in args.items()))

    def kwargs(self) -> Dict[str, Any]:
        return {k: _thaw(v) for k, v in self.args}

    def to_json(self) -> Dict[str, Any]:
        return {"op": self.op, **self.kwargs()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Step":
        if not isinstance(d, Mapping) or "op" not in d:
            raise ScheduleError(f"a schedule step must be an object with an 'op' field, got {d!r}")
        args = {k: v for k, v in d.items() if k != "op"}
        return cls.make(str(d["op"]), **args)

    def __str__(self) -> str:
        return f"{self.op}({', '.join(f'{k}={_thaw(v)!r}' for k, v in self.args)})"


def _freeze(v):
    if isinstance(v, dict):
        return ("__dict__", tuple((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def _thaw(v):
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "__dict__":
        return {k: _thaw(x) for k, x in v[1]}
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


def _share_loops(me: StmtSchedule, ss: StmtSchedule, dim: int) -> bool:
    """``ss`` runs inside every loop of ``me`` outside time dimension ``dim``.

    A statement without instances shares no loop with another: its loop names are the band's, but isl
    runs no loop for it, so a statement at a constant of that band (``[0, 1, ...]`` against an empty
    ``[0, i, ...]``) is not inside it (a fused schedule's full check once flagged a legal parallel loop
    with a dependence of statements in another nest; fuzz campaign, fusion "max", seeds 2375 and 2675).
    """
    if me is not ss and (me.empty or ss.empty):
        return False
    for d in range(0, dim):
        # Different constants at any dimension where neither runs a loop (a β position, or an α
        # position isl used for a sequence: [0, 1, 0, i] vs [0, 2, 0, i]) separate them; so do two
        # different single values of a band's loop (one statement only at its iteration 0, another only
        # at 1: no instances of the two share an iteration of it, nor so any loop inside it).
        mine = me.constant(d)
        if mine is None:
            continue
        if me.names[d] is None and ss.names[d] is None:
            if ss.constant(d) != mine:
                return False
        elif ss.constant(d) not in (None, mine):
            return False
    return True


class Padded(tuple):
    """The ``stmts`` of a transformed schedule, with ``touched``: the statements whose time maps changed
    other than by inserting the same constant dimensions at the same places (which every other
    statement got).  Lets :meth:`Schedule.check` re-check only around ``touched``."""

    touched: FrozenSet[str]

    def __new__(cls, items, touched):
        out = super().__new__(cls, items)
        out.touched = frozenset(touched)
        return out


@dataclass(frozen=True, eq=False)
class StmtSchedule:
    """One statement's time map and the names of its α (loop) positions."""

    map: isl.Map
    names: Tuple[Optional[str], ...]  # per time dimension; None for β and padding

    def loops(self) -> List[Tuple[int, str]]:
        """``[(dim, name), ...]`` of this statement's loops, outermost first."""
        return [(d, n) for d, n in enumerate(self.names) if n is not None]

    def constant(self, dim: int) -> Optional[int]:
        """The value of time dimension ``dim`` if it is a constant, else None (cached: the map never changes)."""
        cache = self.__dict__.setdefault("_constants", {})
        if dim not in cache:
            cache[dim] = _dim_constant(self.map, dim)
        return cache[dim]

    @property
    def empty(self) -> bool:
        """Whether the statement has no instances at these sizes (cached: the map never changes)."""
        found = self.__dict__.get("_empty")
        if found is None:
            found = self.__dict__["_empty"] = self.map.is_empty()
        return found


@dataclass(frozen=True, eq=False)
class Schedule:
    """An immutable schedule of a Scop (see the module docstring).

    >>> # s = polytile.schedule("examples/matmul.tile", dims="M=64,N=64,K=64")
    >>> # s2 = s.tile("C", i=32, j=32).parallel("C", "i_t")
    >>> # s2.steps -> (Step('base'...), Step('tile'...), Step('parallel'...))
    """

    scop: Scop
    deps: Dependences
    stmts: Tuple[Tuple[str, StmtSchedule], ...]
    marks: FrozenSet[Tuple[str, str, str, Any]] = frozenset()  # (stmt, loop name, kind, arg)
    steps: Tuple[Step, ...] = ()
    parallel_reductions: bool = True  # the target can give threads private accumulators
    meta: Tuple[Tuple[str, Any], ...] = ()  # provenance the pipeline records (program, shapes, dtypes)

    def __repr__(self) -> str:
        steps = " -> ".join(str(st) for st in self.steps) or "no steps"
        return f"<polytile Schedule of {self.scop.name}: {len(self.stmts)} statements, {steps}>"

    # -- access ---------------------------------------------------------------
    @property
    def table(self) -> Dict[str, StmtSchedule]:
        """``{statement: StmtSchedule}`` (built once per schedule: read it, never change it)."""
        t = self.__dict__.get("_table")
        if t is None:
            t = dict(self.stmts)
            object.__setattr__(self, "_table", t)
        return t

    @property
    def n_dims(self) -> int:
        return len(self.stmts[0][1].names) if self.stmts else 0

    def resolve(self, ref: str) -> str:
        """A statement name from ``S0`` or from a Tile tensor name (its main statement)."""
        names = [s.name for s in self.scop.statements]
        if ref in names:
            return ref
        cands = [s for s in self.scop.statements if s.origin == ref]
        for kind in ("contract", "elementwise", "c"):
            for s in cands:
                if s.kind == kind:
                    return s.name
        if cands:
            return cands[-1].name
        raise ScheduleError(f"no statement or tensor named {ref!r}; statements: "
                            + ", ".join(f"{s.name} ({s.origin})" if s.origin else s.name for s in self.scop.statements))

    def loop_dim(self, stmt: str, loop: str) -> int:
        """Time dimension of loop ``loop`` of statement ``stmt``."""
        ss = self.table[stmt]
        for d, n in ss.loops():
            if n == loop:
                return d
        raise ScheduleError(f"statement {stmt} has no loop {loop!r}; its loops are "
                            + (", ".join(n for _, n in ss.loops()) or "(none)"))

    def loop_names(self, stmt: str) -> List[str]:
        """Loop names of a statement (``S0``) or of a Tile tensor's statement, outermost first."""
        ss = self.table.get(stmt)
        if ss is None:
            ss = self.table[self.resolve(stmt)]
        return [n for _, n in ss.loops()]

    def time_map(self) -> isl.UnionMap:
        """``{ S[x] -> [t...] }`` for all statements (the flat schedule)."""
        um = isl.UnionMap.empty(self.scop.domain.get_space())
        for _, ss in self.stmts:
            um = um.union(isl.UnionMap.from_map(ss.map))
        return um

    def constant(self, stmt: str, dim: int) -> Optional[int]:
        """The value of time dimension ``dim`` for ``stmt`` if it is a constant (a β position)."""
        return self.table[stmt].constant(dim)

    def group(self, stmt: str, dim: int) -> List[str]:
        """Statements sharing every loop of ``stmt`` outside ``dim`` (same β values before ``dim``)."""
        me = self.table[stmt]
        cands = self.stmts
        top = me.constant(0) if dim > 0 and me.names[0] is None else None
        if top is not None:
            # Only statements with the same first β (or a loop there) can share ``stmt``'s loops:
            # scanning that nest instead of the program keeps a step on a long program cheap.
            cands = self._by_top().get(top, cands)
        return [name for name, ss in cands if _share_loops(me, ss, dim)]

    def _by_top(self) -> Dict[int, Tuple[Tuple[str, StmtSchedule], ...]]:
        """``{β: statements whose time dimension 0 is that constant}``, program order; empty when some
        statement has a loop or a non-constant at dimension 0 (then every group scans everything)."""
        idx = self.__dict__.get("_top")
        if idx is None:
            buckets: Dict[int, List[Tuple[str, StmtSchedule]]] = {}
            for name, ss in self.stmts:
                v = ss.constant(0) if ss.names[0] is None else None
                if v is None:
                    buckets = {}
                    break
                buckets.setdefault(v, []).append((name, ss))
            idx = {v: tuple(b) for v, b in buckets.items()}
            object.__setattr__(self, "_top", idx)
        return idx

    def nests(self, group: Optional[Sequence[str]] = None, dim: int = 0, *,
              loopless: bool = False) -> List[Tuple[List[str], int]]:
        """Loop nests in program order: ``(statements, dim of their first loop)``.

        Statements are split by the constant (β) dimensions until a dimension
        that is a loop for one of them.  By default the top-level nests of all
        statements; with ``group`` and ``dim``, the nests of those statements
        from time dimension ``dim`` on (inside an enclosing loop).  With
        ``loopless``, a group that has no loop at all is listed too, with
        ``n_dims`` as its "first loop".

        >>> # matmul with its zero-fill: s.nests() -> [(['Z0'], 1), (['S0'], 1)]
        """
        out: List[Tuple[List[str], int]] = []

        def visit(group: List[str], dim: int) -> None:
            while dim < self.n_dims:
                vals = {g: self.constant(g, dim) for g in group}
                if all(v is not None for v in vals.values()):
                    distinct = sorted(set(vals.values()))
                    if len(distinct) > 1:
                        for v in distinct:
                            visit([g for g in group if vals[g] == v], dim + 1)
                        return
                    dim += 1
                    continue
                out.append((group, dim))
                return
            if loopless:
                out.append((group, self.n_dims))

        start = list(group) if group is not None else [n for n, _ in self.stmts]
        if start:
            visit(start, dim)
        return out

    # -- legality -------------------------------------------------------------
    def violations(self, deps: Optional[isl.UnionMap] = None) -> isl.UnionMap:
        """Dependence pairs this schedule runs in the wrong order (empty when legal)."""
        d = self.deps.all(include_reductions=False) if deps is None else deps
        if d.is_empty():
            return d
        # Each dependence map S -> T on its own: { [θS(x)] -> [θT(y)] } and its differences.  One
        # union-map composition would pair every dependence with every time map (quadratic in the
        # program); most programs are legal and stop here.
        table = self.table
        suspects: List[isl.Map] = []
        for m in maps_of(d):
            a = table.get(m.get_tuple_name(isl.dim_type.in_))
            b = table.get(m.get_tuple_name(isl.dim_type.out))
            if a is None or b is None or not _lex_positive(m.apply_domain(a.map).apply_range(b.map).deltas()):
                suspects.append(m)
        if not suspects:
            return isl.UnionMap.empty(d.get_space())
        d = isl.UnionMap.empty(d.get_space())
        named: set = set()
        for m in suspects:
            d = d.union(isl.UnionMap.from_map(m))
            named.update((m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)))
        theta = isl.UnionMap.empty(self.scop.domain.get_space())
        for n, ss in self.stmts:
            if n in named:
                theta = theta.union(isl.UnionMap.from_map(ss.map))
        # Fast path: map each dependence to its pair of time stamps and compare with
        # { [t] -> [t'] : t <lex t' } -- far cheaper than ordering all instance pairs.
        times = d.apply_domain(theta).apply_range(theta)
        spaces = [m.get_space() for m in maps_of(times)]
        if len({str(sp) for sp in spaces}) == 1:
            # t <lex t' iff t' - t is lexicographically positive: testing the differences (n dims)
            # is about three times cheaper than testing the pairs (2n dims).
            if _all_lex_positive(times.deltas()):
                return isl.UnionMap.empty(d.get_space())
            lt = isl.UnionMap.from_map(isl.Map.lex_lt(spaces[0].range()))
            bad = times.subtract(lt)
            # The violated pairs: d ∩ θ⁻¹(bad), i.e. { x -> y in d : (θ(x), θ(y)) not lex-ordered }.
            # theta.lex_lt_union_map(theta) would order every pair of statements (quadratic: minutes
            # on a 40-statement program where one fusion attempt was illegal).
            return d.intersect(theta.apply_range(bad).apply_range(theta.reverse()))
        ordered = theta.lex_lt_union_map(theta)
        return d.subtract(ordered)

    def carried(self, group: Sequence[str], dim: int, deps: isl.UnionMap, *,
                touching: Optional[FrozenSet[str]] = None) -> isl.UnionMap:
        """Pairs of ``deps`` among ``group`` with equal time before ``dim`` and different at ``dim``.

        Per dependence map ``S -> T``: ``R = { [t] -> [t'] : t = θS(x), t' = θT(y), (x -> y) in deps,
        t_k = t'_k for k < dim, t_dim != t'_dim }``, and the pairs are ``deps ∩ θS⁻¹ ∘ R ∘ θT``
        (the union-map form paired every member with every other: quadratic in a fused nest).
        With ``touching``, only dependences with a source or sink among those statements.
        """
        table = self.table
        out = isl.UnionMap.empty(deps.get_space())
        inn, outd = isl.dim_type.in_, isl.dim_type.out
        for m in self.deps.among(deps, group):
            if touching is not None and m.get_tuple_name(inn) not in touching \
                    and m.get_tuple_name(outd) not in touching:
                continue
            ta = table[m.get_tuple_name(inn)].map
            tb = table[m.get_tuple_name(outd)].map
            times = m.apply_domain(ta).apply_range(tb)
            for k in range(dim):
                times = times.equate(inn, k, outd, k)
            if times.is_empty():
                continue
            differ = times.subtract(times.equate(inn, dim, outd, dim))
            if differ.is_empty():
                continue
            out = out.union(isl.UnionMap.from_map(m.intersect(ta.apply_range(differ).apply_range(tb.reverse()))))
        return out

    def check(self, what: str, since: Optional["Schedule"] = None) -> "Schedule":
        """Raise :class:`IllegalSchedule` if any dependence or mark is violated; else self.

        With ``since`` (a schedule this one was derived from that passed ``check``, with the same
        dependences), only what can have changed is checked: dependences into or out of statements
        whose time map or loop names changed, and marks that are new or whose loop now holds a
        changed statement.
        A step that only marks a loop re-checks that mark alone; without this, each step of a long
        program re-checked all of it (quadratic in the number of statements).

        >>> # s2 = s.with_(marks=s.marks | {mark}); s2.check("parallel", since=s)
        """
        changed: Optional[set] = None
        if (since is not None and getattr(since, "_checked", False) and since.deps is self.deps
                and since.parallel_reductions == self.parallel_reductions):
            if since.n_dims == self.n_dims:
                before = since.table
                changed = {n for n, ss in self.stmts if before.get(n) is not ss}
            elif isinstance(self.stmts, Padded):
                # Dimensions were inserted: every statement but ``touched`` only got constants at the
                # same places, which keeps their order and their loops' carried dependences.
                changed = set(self.stmts.touched)
        deps = None
        if changed is not None:
            if not changed:
                deps = isl.UnionMap.empty(self.scop.domain.get_space())
            else:
                deps = self.deps.touching(sorted(changed), include_reductions=False)
        viol = self.violations(deps)
        if not viol.is_empty():
            raise IllegalSchedule(self._explain(what, viol, "would run a dependence's sink before its source"))
        table = self.table
        marks = self.marks
        if changed is not None:
            # New marks, and old ones on statements of the nests a changed statement is in (the only
            # ones whose loops can now hold it); not every mark of the program at every step.
            tops = self._by_top()
            near = {table[c].constant(0) for c in changed}
            if tops and None not in near:
                nearby = {n for v in near for n, _ in tops.get(v, ())}
                marks = {m for m in marks if m[0] in nearby or m not in since.marks}
        done: set = set()  # (group, dim, kind, arg, only): one test per shared loop, not per member
        for stmt, loop, kind, arg in sorted(marks, key=str):
            only = None
            if changed is not None and (stmt, loop, kind, arg) in since.marks:
                dim = self.loop_dim(stmt, loop)
                if not any(_share_loops(table[stmt], table[c], dim) for c in changed):
                    continue
                if stmt not in changed:
                    # The loop passed before and its owner did not move: dependences between two
                    # statements that did not move either are carried as before.
                    only = frozenset(changed)
            if kind == SIMD:
                self._check_innermost(what, stmt, loop)
            if kind in (PARALLEL, SIMD):
                self._check_parallel(what, stmt, loop, kind, arg, only=only, done=done)
            elif kind == PACK:
                self._check_pack(what, stmt, loop, arg)
        object.__setattr__(self, "_checked", True)  # not a field: ``with_`` copies do not inherit it
        return self

    def _check_innermost(self, what: str, stmt: str, loop: str) -> None:
        """A simd loop stays innermost: an interchange or tiling after vectorize must not put a loop
        (a parallel one above all) inside it."""
        dim = self.loop_dim(stmt, loop)
        inner = [name for d, name in self.table[stmt].loops() if d > dim]
        if inner:
            raise IllegalSchedule(f"{what} is illegal: simd loop {loop!r} of {stmt} would no longer be innermost "
                                  f"(inside it: {', '.join(inner)}); vectorize the new innermost loop instead")

    def _check_pack(self, what: str, stmt: str, loop: str, arg) -> None:
        """A packed copy is only a copy if nothing inside the loop writes the array."""
        array = arg[0]
        group = self.group(stmt, self.loop_dim(stmt, loop))
        writers = [g for g in group if self.scop.statement(g).write_map().get_tuple_name(isl.dim_type.out) == array]
        if writers:
            raise IllegalSchedule(f"{what} is illegal: array {array!r} is written inside loop {loop!r} "
                                  f"(by {', '.join(sorted(writers))}), so a packed copy of it would go stale")

    def _check_parallel(self, what: str, stmt: str, loop: str, kind: str, arg, *,
                        only: Optional[FrozenSet[str]] = None, done: Optional[set] = None) -> None:
        """``loop`` carries no dependence it may not (with ``only``: none with an end in ``only``)."""
        dim = self.loop_dim(stmt, loop)
        group = self.group(stmt, dim)
        if done is not None:
            key = (tuple(group), dim, kind, bool(arg), only)
            if key in done:
                return
            done.add(key)
        # A SIMD reduction keeps one partial accumulator per lane in registers; a
        # parallel one needs the target to give each thread a private copy.
        reduction_ok = bool(arg) and (kind == SIMD or (kind == PARALLEL and self.parallel_reductions))
        deps = self.deps.all(include_reductions=not reduction_ok)
        carried = self.carried(group, dim, deps, touching=only)
        if not carried.is_empty():
            red = self.carried(group, dim, self.deps.reduction)
            hint = ""
            request = "parallel(..., reduction=True)" if kind == PARALLEL else "vectorize(..., reduction=True)"
            if not red.is_empty() and carried.subtract(self.deps.reduction).is_empty():
                if kind == PARALLEL and not self.parallel_reductions:
                    hint = " (the loop carries a reduction and this target has no parallel reductions)"
                else:
                    hint = f" (only reduction dependences are carried: request a reduction, e.g. {request})"
            raise IllegalSchedule(self._explain(
                what, carried, f"loop {loop!r} of {stmt} carries a dependence, so it cannot be {kind}{hint}"))
        if kind == SIMD and arg:
            why = self.simd_reduction_blocker(group, dim)
            if why:
                raise IllegalSchedule(f"{what} is illegal: loop {loop!r} of {stmt}: {why}")

    def simd_reduction_blocker(self, group: Sequence[str], dim: int) -> str:
        """Why loop ``dim`` cannot be a SIMD reduction loop for its reductions ('' when it can).

        Each lane keeps a partial value of the accumulated cell, so within one
        iteration of the outer loops every reduction the loop carries must
        update one cell: a scalar, or (C statements, accumulated in a scalar
        and written back after the loop) one element, e.g. ``C[i][j]`` with
        ``k`` the SIMD loop: ``{ S[i,j,k] -> S[i,j,k'] }`` pairs all write
        ``C[i,j]``.
        """
        for name in group:
            st = self.scop.statement(name)
            if not st.is_reduction or self.carried([name], dim, self.deps.reduction).is_empty():
                continue
            if st.c_text is None:
                why = tile_simd_reduction_blocker(st, self.scop.array(st.body.array).dtype)
                if why:
                    return why
            elif not self.scop.array(st.body.array).shape:
                continue
            elif st.c_reduction is None:
                return f"{name} updates {st.body.array!r} in a form the code generator cannot accumulate"
            w = st.write_map()
            pairs = isl.Map.from_domain_and_range(st.domain, st.domain)
            other_cell = isl.UnionMap.from_map(pairs.subtract(w.apply_range(w.reverse())))
            if not self.carried([name], dim, other_cell).is_empty():
                return f"{name} updates different cells of {st.body.array!r} along the loop"
        return ""

    def _explain(self, what: str, pairs: isl.UnionMap, why: str) -> str:
        """Name the violated dependence (kind, statements, isl text) and one concrete pair."""
        kinds = [("flow (RAW)", self.deps.flow), ("anti (WAR)", self.deps.anti), ("output (WAW)", self.deps.output)]
        kind = "dependence"
        rel = pairs
        for k, r in kinds:
            inter = pairs.intersect(r)
            if not inter.is_empty():
                kind, rel = k, inter
                break
        m = maps_of(rel)[0]
        src = m.get_tuple_name(isl.dim_type.in_)
        snk = m.get_tuple_name(isl.dim_type.out)
        a, b = map_sample(m)
        ta = _time_of(self.table[src].map, a)
        tb = _time_of(self.table[snk].map, b)
        full = self.deps.all().intersect(isl.UnionMap.from_map(
            isl.Map.universe(m.get_space()))).coalesce()
        return (f"{what} is illegal: {why}.\n"
                f"  violated {kind} dependence {src} -> {snk}: {full}\n"
                f"  e.g. {src}[{', '.join(map(str, a))}] (time {ta}) must run before "
                f"{snk}[{', '.join(map(str, b))}] (time {tb})")

    # -- marks ----------------------------------------------------------------
    def _marks_of(self, group: Sequence[str]) -> List[Tuple[str, str, str, Any]]:
        """The marks of ``group``'s statements (indexed once per schedule)."""
        idx = self.__dict__.get("_marks_idx")
        if idx is None:
            idx = {}
            for m in self.marks:
                idx.setdefault(m[0], []).append(m)
            object.__setattr__(self, "_marks_idx", idx)
        return [m for g in dict.fromkeys(group) for m in idx.get(g, ())]

    def packs_at(self, group: Sequence[str], dim: int) -> List[Tuple[str, int, int]]:
        """``[(array, array dim, block), ...]`` packed at the start of each iteration of loop ``dim``."""
        found = {}
        for stmt, loop, kind, arg in self._marks_of(group):
            if kind == PACK and self.table[stmt].names[dim] == loop:
                found[arg[0]] = (str(arg[0]), int(arg[1]), int(arg[2]))
        return [found[a] for a in sorted(found)]

    # -- copies ---------------------------------------------------------------
    def with_(self, **changes) -> "Schedule":
        return replace(self, **changes)


# ---------------------------------------------------------------------------
# isl helpers
# ---------------------------------------------------------------------------


def _dim_constant(m: isl.Map, dim: int) -> Optional[int]:
    """The single value of output dimension ``dim`` over the map's domain, else None."""
    fixed = m.plain_get_val_if_fixed(isl.dim_type.out, dim)  # an equality in every piece: cheap
    if not fixed.is_nan() and fixed.is_int() and not m.is_empty():
        return int(fixed.to_python())
    vals = dim_values([m], dim)
    if vals.is_empty():
        return 0
    if not vals.is_singleton():
        return None
    pt = vals.sample_point()
    return int(pt.get_coordinate_val(isl.dim_type.set, 0).to_python())


def dim_values(maps: Sequence[isl.Map], dim: int) -> Optional[isl.Set]:
    """The values output dimension ``dim`` of the maps takes over their domains: a one-dimensional set, the
    parameters kept (None for no maps).

    >>> str(dim_values([isl.Map("{ S[i, j] -> [i, j, 0] : 0 <= i < 4 and 0 <= j < 3 }")], 1))
    '{ [i0] : 0 <= i0 <= 2 }'
    """
    vals = None
    for m in maps:
        n = m.dim(isl.dim_type.out)
        v = m.range().project_out(isl.dim_type.set, dim + 1, n - dim - 1).project_out(isl.dim_type.set, 0, dim)
        vals = v if vals is None else vals.union(v)
    return vals


def value_span(maps: Sequence[isl.Map], dim: int) -> Optional[Tuple[int, int]]:
    """``(lo, hi)`` of time dimension ``dim`` over all the maps' domains (concrete sizes); None when no
    point runs.

    >>> value_span([isl.Map("{ S[k] -> [k] : 0 <= k < 32 }")], 0), value_span([isl.Map("{ S[k] -> [k] : 1 = 0 }")], 0)
    ((0, 31), None)
    """
    vals = dim_values(maps, dim)
    if vals is None or vals.is_empty():
        return None
    lo = vals.lexmin().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    hi = vals.lexmax().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    return int(lo), int(hi)


def value_bounds(maps: Sequence[isl.Map], dim: int) -> str:
    """``[lo, hi]`` of time dimension ``dim`` over all the maps' domains, as C expressions in the parameters
    where they are not numbers (``[0, nk - 1]``): what a schedule's description prints.  Unlike
    :func:`value_span`, which samples a parametric set (``[0, 0]`` at ``nk = 1``).

    >>> value_bounds([isl.Map("[nk] -> { S[k] -> [k] : 0 <= k < nk }")], 0)
    '[0, nk - 1]'
    """
    vals = dim_values(maps, dim)
    if vals is None or vals.is_empty():
        return "[]"

    def c(pa: isl.PwAff) -> str:
        return isl.Printer.to_str(vals.get_ctx()).set_output_format(isl.format.C).print_pw_aff(pa).get_str()
    return f"[{c(vals.dim_min(0))}, {c(vals.dim_max(0))}]"


def map_sample(m: isl.Map) -> Tuple[List[int], List[int]]:
    """One pair ``(source point, sink point)`` of a non-empty relation."""
    pt = m.wrap().sample_point()
    n_in, n_out = m.dim(isl.dim_type.in_), m.dim(isl.dim_type.out)
    vals = [int(pt.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(n_in + n_out)]
    return vals[:n_in], vals[n_in:]


def _time_of(m: isl.Map, point: Sequence[int]) -> List[int]:
    n_in = m.dim(isl.dim_type.in_)
    names = [f"x{d}" for d in range(n_in)]
    cons = " and ".join(f"{x} = {v}" for x, v in zip(names, point)) or "true"
    tup = m.get_tuple_name(isl.dim_type.in_)
    at = isl.Set(f"{{ {tup}[{', '.join(names)}] : {cons} }}")
    img = at.apply(m)
    if img.is_empty():
        return []
    pt = img.sample_point()
    return [int(pt.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(img.dim(isl.dim_type.set))]


def _all_lex_positive(deltas: isl.UnionSet) -> bool:
    """Every vector of ``deltas`` is lexicographically positive (``t' - t`` of pairs with t <lex t').

    Dimension by dimension: none may be negative at k among those zero before k; those zero at every
    dimension (t = t') fail.  Cheaper than one lexicographic set of n dimensions when n is large
    (long programs have many time dimensions).
    """
    return all(_lex_positive(rest) for rest in sets_of(deltas))


def _lex_positive(rest: isl.Set) -> bool:
    """:func:`_all_lex_positive` of one set."""
    ctx = rest.get_ctx()
    for k in range(rest.dim(isl.dim_type.set)):
        if rest.is_empty():
            break
        if not rest.upper_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(ctx, -1)).is_empty():
            return False
        rest = rest.fix_val(isl.dim_type.set, k, isl.Val.zero(ctx))
    return rest.is_empty()


def range_map(n_in: int, outputs: Sequence[str], names: Optional[Sequence[str]] = None) -> isl.Map:
    """``{ [t0, ..., t(n-1)] -> [outputs...] }`` from expressions over ``t0..``."""
    ins = list(names) if names else [f"t{d}" for d in range(n_in)]
    return isl.Map(f"{{ [{', '.join(ins)}] -> [{', '.join(outputs)}] }}")


#: Element types a Tile contraction may accumulate in a SIMD reduction loop (C and the vector units
#: hold them as they are; narrower integers and float16 would need conversions at every step).
SIMD_REDUCTION_DTYPES = ("float32", "float64", "int32", "int64", "uint32", "uint64")


def tile_simd_reduction_blocker(st, dtype: str) -> str:
    """Why Tile statement ``st``, accumulating ``dtype``, cannot run its reduction as a SIMD loop ('' when it can).

    A Tile aggregation has no order, so summing one cell's terms in lanes and combining the lanes
    after the loop (a reassociation) gives one of its allowed results -- for ``+``, ``*``, ``max`` and
    ``min`` (whose lanes combine with the NaN-propagating helpers the serial code uses: a NaN
    anywhere gives NaN in any order), on element types the lanes hold, and when the value does not
    read the cell it updates.

    >>> # Y[i] = +(A[i, j] * X[j])   -> ''   (j may be a simd +:Y loop)
    """
    body = st.body
    if body.reduce not in ("+", "*", "max", "min"):
        return f"{st.name} aggregates with {body.reduce!r}: only + * max min reductions are vectorised"
    if dtype not in SIMD_REDUCTION_DTYPES:
        return f"{st.name} accumulates {dtype}: SIMD reductions hold {', '.join(SIMD_REDUCTION_DTYPES)}"
    if any(ld.array == body.array for ld in B.loads(body.value)):
        return f"{st.name} reads {body.array!r}, the array it accumulates into"
    return ""

