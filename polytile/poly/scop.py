"""The Scop record: one program's polyhedral description (after ppcg's ``ppcg_scop``).

A :class:`Scop` holds, as isl union objects over all statements,

* ``domain``      -- ``{ S0[i, j, k] : 0 <= i < 64 and ... ; S1[i, j] : ... }``
* ``reads``       -- ``{ S0[i, j, k] -> A[i, k]; S0[i, j, k] -> B[k, j]; ... }``
* ``must_writes`` -- ``{ S0[i, j, k] -> C[i, j] }`` (every write here is unconditional)
* ``schedule``    -- the original program order, a schedule tree
  ``sequence(S0: band[i, j, k], S1: band[i, j])``

plus the statements' bodies (:mod:`polytile.poly.body`) and the arrays.  It is
built from statements only: access relations are derived from the bodies.
Frontends produce Scops; ``deps``, ``schedule`` and ``codegen`` consume them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

import islpy as isl

from ..errors import SourceLocation
from ..isl_parts import maps_of
from . import body as B


@dataclass(frozen=True, eq=False)
class Statement:
    """One polyhedral statement: ``name[iters] : domain`` executing ``body``.

    ``kind`` says where it came from: ``fill`` (output initialisation to 0 or
    the default tensor), ``reset`` (reached cells to the aggregation
    identity), ``contract`` (a contraction's update) or ``elementwise``; a C
    frontend uses ``c``.  ``origin`` names the source-level statement (its
    target tensor) so schedules and reports can speak the user's language.
    """

    name: str
    iters: Tuple[str, ...]
    domain: isl.Set
    body: B.Store
    kind: str
    origin: str = ""
    text: str = ""  # the source statement, for printing
    loc: Optional[SourceLocation] = field(default=None, repr=False)
    # Frontends that keep the statement as source text (the C frontend) give its
    # C code (iterators as free identifiers) and its accesses explicitly; the body
    # then only describes the written array for reports.
    c_text: Optional[str] = None
    # A C update ``lhs op= e`` (also ``lhs = lhs op e``) as (lhs, "+=" / "-=" / "*=", e) in C
    # text, e.g. ("C[i][j]", "+=", "alpha * A[i][k] * A[j][k]"), whether or not it may be
    # reordered: a register block holds the running value of ``lhs`` in a variable
    # (codegen/c_regblock.py), and a reduction's SIMD loop accumulates e (``c_reduction``).
    c_update: Optional[Tuple[str, str, str]] = None
    # Arithmetic operations per instance of a C statement (its body does not spell them out), for
    # cost estimates; 0 when the body is a real expression (count that instead).
    c_ops: int = 0
    reads_override: Optional[isl.UnionMap] = field(default=None, repr=False)
    write_override: Optional[isl.Map] = field(default=None, repr=False)

    @property
    def is_reduction(self) -> bool:
        return self.body.reduce is not None

    @property
    def c_reduction(self) -> Optional[Tuple[str, str, str]]:
        """``c_update`` when the update may be reordered (a reduction), so a SIMD reduction loop can
        accumulate ``e`` into a scalar and update the cell once after the loop; else None."""
        return self.c_update if self.is_reduction else None

    def _tuple(self) -> str:
        return f"{self.name}[{', '.join(self.iters)}]"

    def access_map(self, array: str, index: Tuple[B.Node, ...]) -> isl.Map:
        """``{ S[iters] -> array[index] }`` restricted to the domain.

        A data-dependent index (a :class:`~polytile.poly.body.Clamp` of a load,
        as ``gather`` makes) is a may-access of its whole range ``lo <= a <= hi``,
        so dependences stay sound.
        """
        outs, cons = [], []
        for d, e in enumerate(index):
            if B.is_affine(e):
                outs.append(B.affine_text(e))
            else:
                a = f"pt_a{d}"
                outs.append(a)
                lo, hi = (e.lo, e.hi) if isinstance(e, B.Clamp) else (None, None)
                if lo is not None:
                    cons.append(f"{lo} <= {a} <= {hi}")
        cond = f" : {' and '.join(cons)}" if cons else ""
        m = isl.Map(f"{{ {self._tuple()} -> {array}[{', '.join(outs)}]{cond} }}", context=self.domain.get_ctx())
        return m.intersect_domain(self.domain)

    def reads(self) -> isl.UnionMap:
        if self.reads_override is not None:
            return self.reads_override.intersect_domain(isl.UnionSet.from_set(self.domain))
        loads = list(B.loads(self.body.value))
        for e in self.body.index:
            loads.extend(B.loads(e))
        acc = isl.UnionMap.empty(self.domain.get_space().params())
        for ld in loads:
            acc = acc.union(isl.UnionMap.from_map(self.access_map(ld.array, ld.index)))
        if self.body.reduce is not None:
            acc = acc.union(isl.UnionMap.from_map(self.write_map()))
        return acc

    def write_map(self) -> isl.Map:
        if self.write_override is not None:
            return self.write_override.intersect_domain(self.domain)
        return self.access_map(self.body.array, self.body.index)


@dataclass(frozen=True)
class Array:
    """An array of the kernel: C identifier, user name, concrete shape, dtype, role."""

    name: str
    source_name: str
    shape: Tuple[int, ...]
    dtype: str
    kind: str  # 'input' | 'output' | 'temp'

    @property
    def nbytes(self) -> int:
        import numpy as np

        n = 1
        for s in self.shape:
            n *= s
        return n * np.dtype(self.dtype).itemsize


@dataclass(frozen=True, eq=False)
class Scop:
    """A whole program's polyhedral model (see module docstring)."""

    name: str
    statements: Tuple[Statement, ...]
    arrays: Tuple[Array, ...]
    context: isl.Set
    domain: isl.UnionSet
    reads: isl.UnionMap
    must_writes: isl.UnionMap
    may_writes: isl.UnionMap
    schedule: isl.Schedule

    @classmethod
    def build(cls, name: str, statements: Sequence[Statement], arrays: Sequence[Array],
              context: Optional[isl.Set] = None, schedule: Optional[isl.Schedule] = None) -> "Scop":
        """Derive the union objects and the original schedule from statements."""
        statements = tuple(statements)
        ctx = context if context is not None else isl.Set("{ : }")
        space = ctx.get_space()
        domain = isl.UnionSet.empty(space)
        reads = isl.UnionMap.empty(space)
        writes = isl.UnionMap.empty(space)
        for s in statements:
            domain = domain.union(isl.UnionSet.from_set(s.domain))
            reads = reads.union(s.reads())
            writes = writes.union(isl.UnionMap.from_map(s.write_map()))
        if schedule is None:
            schedule = original_schedule(statements, domain)
        return cls(name, statements, tuple(arrays), ctx, domain, reads, writes, writes, schedule)

    def statement(self, name: str) -> Statement:
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)

    def array(self, name: str) -> Array:
        for a in self.arrays:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def statement_map(self) -> Dict[str, Statement]:
        return {s.name: s for s in self.statements}

    def describe(self) -> str:
        """Readable multi-line dump: domains, accesses, schedule (isl notation)."""
        lines = [f"scop {self.name}"]
        lines.append("  arrays:")
        for a in self.arrays:
            shape = "x".join(map(str, a.shape)) or "scalar"
            lines.append(f"    {a.name:<10} {a.kind:<6} {a.dtype:<8} {shape}")
        lines.append("  statements:")
        for s in self.statements:
            lines.append(f"    {s.name} ({s.kind}{', ' + s.origin if s.origin else ''}){': ' + s.text if s.text else ''}")
            lines.append(f"      domain: {s.domain}")
            lines.append(f"      write:  {s.write_map()}")
            for r in maps_of(s.reads()):
                lines.append(f"      read:   {r}")
        lines.append(f"  schedule: {self.schedule.get_map()}")
        return "\n".join(lines)


def original_schedule(statements: Sequence[Statement], domain: isl.UnionSet) -> isl.Schedule:
    """Program order: a sequence of statements, each an identity band over its iterators.

    ``{ S0[i,j,k] -> [0, i, j, k]; S1[i,j] -> [1, i, j] }`` as a tree.
    """
    sched = isl.Schedule.from_domain(domain)
    if not statements:
        return sched
    node = sched.get_root().child(0)
    if len(statements) > 1:
        filters = isl.UnionSetList.alloc(domain.get_ctx(), len(statements))
        for s in statements:
            filters = filters.add(isl.UnionSet.from_set(s.domain))
        node = node.insert_sequence(filters)
        for k, s in enumerate(statements):
            node = _insert_identity_band(node.child(k).child(0), s).parent().parent()
        return node.get_schedule()
    return _insert_identity_band(node, statements[0]).get_schedule()


def _insert_identity_band(node: isl.ScheduleNode, s: Statement) -> isl.ScheduleNode:
    if not s.iters:
        return node
    its = ", ".join(s.iters)
    um = isl.UnionMap(f"{{ {s.name}[{its}] -> [{its}] }}", context=s.domain.get_ctx())
    mupa = isl.MultiUnionPwAff.from_union_map(um)
    return node.insert_partial_schedule(mupa)
