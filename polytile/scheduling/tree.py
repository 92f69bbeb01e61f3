"""What a :class:`~polytile.scheduling.core.Schedule` looks like from outside: its isl schedule tree (with
``mark`` nodes for parallel / simd / unroll / regtile loops, local buffers and packed panels), its readable
loop tree, and its JSON document.  The marks are values of :mod:`.marks`, written into the tree as their text.

All are derived from the schedule's data on demand.  The functions double as ``Schedule`` methods
(``s.tree()``, ``s.describe()``, ``str(s)``, ``s.dumps()``, ...): ``polytile/scheduling/__init__.py``
attaches :data:`VIEWS`.  They live here, not in :mod:`.core`, because the tree asks array contraction
(:mod:`.contract`) which temporaries become scalars, and contraction reads schedules.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import islpy as isl

from .contract import contractible
from ..atomicfile import write_atomic
from ..errors import ScheduleError
from .core import PARALLEL, REGTILE, SIMD, UNROLL, Schedule, value_bounds
from .marks import Dim, Local, Mark, Pack, Parallel, Reduction, RegTile, Simd, Unroll, encode

FORMAT_VERSION = 1


# ---------------------------------------------------------------------------
# the isl schedule tree
# ---------------------------------------------------------------------------


def tree(s: Schedule) -> isl.Schedule:
    """The isl schedule tree, with marks, equivalent to this schedule."""
    return isl.Schedule(tree_text(s), context=s.scop.domain.get_ctx())


def tree_text(s: Schedule) -> str:
    """The isl YAML text of :func:`tree`."""
    dom = str(s.scop.domain)
    names = [n for n, _ in s.stmts]
    if not names:
        return f'{{ domain: "{dom}" }}'
    child = _subtree(s, names, 0)
    return f'{{ domain: "{dom}"' + (f", child: {child}" if child else "") + " }"


def _filter(s: Schedule, group: Sequence[str]) -> str:
    """isl text of the union of the group's domains (parameters included)."""
    u = None
    for n in group:
        d = isl.UnionSet.from_set(s.scop.statement(n).domain)
        u = d if u is None else u.union(d)
    return str(u)


def _subtree(s: Schedule, group: List[str], dim: int) -> str:
    n = s.n_dims
    while dim < n:
        values = {name: s.table[name].constant(dim) for name in group}
        if all(v is not None for v in values.values()):
            distinct = sorted(set(values.values()))
            if len(distinct) == 1:
                if s.packs_at(group, dim):
                    # A loop of one iteration has no band, but its packs still run
                    # (once), around everything inside it.
                    return _wrap_packs(s, group, dim, _subtree(s, group, dim + 1))
                dim += 1
                continue
            kids = []
            for v in distinct:
                sub = [g for g in group if values[g] == v]
                inner = _subtree(s, sub, dim + 1)
                kids.append(f'{{ filter: "{_filter(s, sub)}"' + (f", child: {inner}" if inner else "") + " }")
            return "{ sequence: [ " + ", ".join(kids) + " ] }"
        # A loop: one-member band, wrapped in the marks its statements carry.
        upa = None
        for name in group:
            pa = isl.UnionPwAff.from_pw_aff(isl.PwMultiAff.from_map(s.table[name].map).get_pw_aff(dim))
            upa = pa if upa is None else upa.union_add(pa)
        band = f'{{ schedule: "{isl.MultiUnionPwAff.from_union_pw_aff(upa)}"'
        inner = _subtree(s, group, dim + 1)
        inner = _wrap_locals(s, group, dim, inner)
        inner = _wrap_packs(s, group, dim, inner)
        text = band + (f", child: {inner}" if inner else "") + " }"
        # "dim N" sits right on the band, so the code generator can tell whether
        # isl emitted this band's loop (it drops loop marks when it did not).
        text = _wrap(Dim(dim), text)
        for mark in _marks_at(s, group, dim):
            text = _wrap(mark, text)
        return text
    return ""


def _wrap(mark: Mark, inner: str) -> str:
    """isl text of a mark node around the subtree ``inner``."""
    return f'{{ mark: "{encode(mark)}", child: {inner} }}'


def _marks_at(s: Schedule, group: Sequence[str], dim: int) -> List[Mark]:
    """The loop marks of loop ``dim`` of ``group``, innermost first (the order they wrap the band)."""
    found: Dict[str, Any] = {}
    for stmt, loop, kind, arg in s._marks_of(group):
        # A statement without instances runs no loop (Schedule.group gives it none to share), so its marks
        # were checked against nothing: on a band it shares with others they would mark their loop
        # unchecked (simd on S1's k loop, which carries a dependence, from an empty S2 placed beside it).
        if s.table[stmt].names[dim] == loop and not s.table[stmt].empty:
            found[kind] = arg
    out: List[Mark] = []
    if REGTILE in found:
        out.append(RegTile.from_arg(found[REGTILE]))
    if PARALLEL in found:
        out.append(Parallel(_reductions(s, group, dim) if found[PARALLEL] else ()))
    if SIMD in found:
        out.append(Simd(_reductions(s, group, dim) if found[SIMD] else ()))
    if UNROLL in found:
        out.append(Unroll(int(found[UNROLL])))
    return out


def _reductions(s: Schedule, group: Sequence[str], dim: int) -> Tuple[Reduction, ...]:
    """The reductions whose dependences this loop carries, ordered by their text ``op:array``."""
    items = set()
    for name in group:
        st = s.scop.statement(name)
        if not st.is_reduction:
            continue
        red = s.carried([name], dim, s.deps.reduction)
        if not red.is_empty():
            items.add(Reduction(st.body.reduce, st.body.array))
    return tuple(sorted(items, key=lambda r: f"{r.op}:{r.array}"))


def _wrap_locals(s: Schedule, group: Sequence[str], dim: int, inner: str) -> str:
    for arr in local_arrays(s, group, dim):
        inner = _wrap(Local(arr), inner) if inner else inner
    return inner


def _wrap_packs(s: Schedule, group: Sequence[str], dim: int, inner: str) -> str:
    # Inside the band: the copy runs once per iteration of this loop, before its body.
    for arr, d, block in reversed(s.packs_at(group, dim)):
        inner = _wrap(Pack(arr, d, block), inner) if inner else inner
    return inner


def local_arrays(s: Schedule, group: Sequence[str], dim: int) -> List[str]:
    """Temporaries that can live in a scalar inside loop ``dim`` of ``group`` (array contraction)."""
    return contractible(s, group, dim)


# ---------------------------------------------------------------------------
# the readable loop tree
# ---------------------------------------------------------------------------


def describe(s: Schedule) -> str:
    """Readable loop tree: loops with their marks, statements at the leaves."""
    lines: List[str] = []
    _describe(s, sorted((n for n, _ in s.stmts), key=functools.partial(_order_key, s)), 0, 0, lines)
    head = [f"schedule of {s.scop.name}" + (" (" + " -> ".join(str(st) for st in s.steps) + ")" if s.steps else "")]
    return "\n".join(head + lines)


def _order_key(s: Schedule, name: str):
    """Sort key: the statement's earliest time vector."""
    pt = s.table[name].map.range().lexmin()
    if pt.is_empty():
        return [0] * s.n_dims
    p = pt.sample_point()
    return [p.get_coordinate_val(isl.dim_type.set, d).to_python() for d in range(s.n_dims)]


def _describe(s: Schedule, group: List[str], dim: int, indent: int, lines: List[str],
              at: Optional[Dict[str, List[str]]] = None) -> None:
    at = at if at is not None else {}
    n = s.n_dims
    while dim < n:
        values = {g: s.table[g].constant(dim) for g in group}
        if all(v is not None for v in values.values()):
            distinct = sorted(set(values.values()))
            if len(distinct) > 1:
                for v in distinct:
                    _describe(s, [g for g in group if values[g] == v], dim + 1, indent, lines, at)
                return
            loop = "/".join(sorted({s.table[g].names[dim] for g in group if s.table[g].names[dim]}))
            for a, d, b in s.packs_at(group, dim):  # a one-iteration loop: packed once here
                lines.append("  " * indent + f"[pack {a} dim {d} by {b}]  (at {loop}, one iteration)")
            dim += 1
            continue
        loops = sorted({s.table[g].names[dim] for g in group if s.table[g].names[dim]})
        marks = _marks_at(s, group, dim)
        locs = local_arrays(s, group, dim)
        packs = s.packs_at(group, dim)
        rng = value_bounds([s.table[g].map for g in group], dim)
        note = ("".join(f"  [{encode(m)}]" for m in marks) + "".join(f"  [{encode(Local(a))}]" for a in locs)
                + "".join(f"  [pack {a} dim {d} by {b}]" for a, d, b in packs))
        lines.append("  " * indent + f"for {'/'.join(loops)} in {rng}:{note}")
        # A statement with a constant here runs in one iteration of this loop only.
        inner_at = {g: list(at.get(g, [])) for g in group}
        for g in group:
            if not s.table[g].names[dim] and values[g] is not None:
                inner_at[g].append(f"{'/'.join(loops)}={values[g]}")
        _describe(s, group, dim + 1, indent + 1, lines, inner_at)
        return
    for g in sorted(group, key=functools.partial(_order_key, s)):
        st = s.scop.statement(g)
        only = f"   (only at {', '.join(at[g])})" if at.get(g) else ""
        lines.append("  " * indent + f"{g}: {st.text or st.kind}{only}")


# ---------------------------------------------------------------------------
# the JSON document
# ---------------------------------------------------------------------------


def to_json(s: Schedule) -> Dict[str, Any]:
    """The document :func:`dumps` writes, as a dict."""
    return {
        "polytile_schedule": FORMAT_VERSION,
        "scop": s.scop.name,
        "steps": [st.to_json() for st in s.steps],
        "tree": tree_text(s),
        "statements": {name: {"map": str(ss.map), "names": list(ss.names)} for name, ss in s.stmts},
        "marks": sorted([list(m) for m in s.marks], key=str),
        **({"meta": dict(s.meta)} if s.meta else {}),
    }


def dumps(s: Schedule) -> str:
    """JSON text: steps (replayable), isl YAML tree, per-statement maps, marks, provenance."""
    return json.dumps(to_json(s), indent=2)


def save(s: Schedule, path) -> None:
    """Write :meth:`dumps` to ``path`` (atomically, so a crash never leaves half a file).

    A path that cannot be written is a :class:`ScheduleError` naming ``path`` itself (not the
    temporary file beside it), and nothing is left behind.

        >>> # s.save("matmul.sched.json");  s.save("/no/dir/x.json") -> ScheduleError: cannot save ...
    """
    target = os.path.abspath(str(path))
    if os.path.isdir(target):
        raise ScheduleError(f"cannot save the schedule to {path}: it is a directory; name a file")
    d = os.path.dirname(target)
    if not os.path.isdir(d):
        raise ScheduleError(f"cannot save the schedule to {path}: the directory {d} does not exist")
    text = dumps(s) + "\n"  # before any file exists: an error here leaves nothing behind
    try:
        write_atomic(Path(target), text.encode("utf-8"))  # created like any file the user writes
    except OSError as e:
        raise ScheduleError(f"cannot save the schedule to {path}: {e.strerror or e}") from None


#: ``Schedule`` methods defined here (attached in ``polytile/scheduling/__init__.py``).
VIEWS = {
    "tree": tree, "tree_text": tree_text, "local_arrays": local_arrays, "describe": describe, "__str__": describe,
    "to_json": to_json, "dumps": dumps, "save": save,
}
