"""Scops written directly in isl notation, and a slow exact interpreter for any Scop.

The schedule layer works on any Scop, not only on lowered Tile programs.
:func:`scop_from_isl` builds one from isl text -- the way papers write
kernels -- with simple bodies (a weighted sum of the reads, or an
accumulation), which is enough to give loop-carried dependences real
values to check:

    jacobi-1d with a time loop, two statements per time step:
      S[t, i] : 0 <= t < T and 1 <= i < N - 1    B[i] = (A[i-1] + A[i] + A[i+1]) / 3
      U[t, i] : 0 <= t < T and 1 <= i < N - 1    A[i] = B[i]

:func:`execute` runs a Scop instance by instance in its original schedule
order with numpy scalars: the oracle for Scops that do not come from Tile.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import islpy as isl
import numpy as np

from ..deadline import interrupts_after
from ..errors import PolytileError
from ..isl_parts import maps_of
from . import body as B
from .scop import Array, Scop, Statement


def _index_nodes(m: isl.Map) -> Tuple[Tuple[str, ...], Tuple[B.Node, ...]]:
    """Iterator names of the domain and index expressions of an affine access map."""
    n_in = m.dim(isl.dim_type.in_)
    iters = tuple(m.get_dim_name(isl.dim_type.in_, k) or f"i{k}" for k in range(n_in))
    pma = isl.PwMultiAff.from_map(m)
    nodes = []
    for d in range(m.dim(isl.dim_type.out)):
        pieces = pma.get_pw_aff(d).get_pieces()
        if len(pieces) != 1:
            raise PolytileError(f"access {m} is piecewise in output {d}; give one affine expression per index")
        aff = pieces[0][1]
        if aff.dim(isl.dim_type.div):
            raise PolytileError(f"access {m} uses integer division; not supported in isl-text Scops")
        coeffs = {iters[k]: int(aff.get_coefficient_val(isl.dim_type.in_, k).to_python()) for k in range(n_in)}
        coeffs[""] = int(aff.get_constant_val().to_python())
        node = B.from_linear({v: c for v, c in coeffs.items() if c}, iters)
        nodes.append(node)
    return iters, tuple(nodes)


def scop_from_isl(name: str, statements: Sequence[Mapping], arrays: Mapping[str, Tuple[Sequence[int], str]],
                  *, order: Optional[Sequence[str]] = None, schedule: Optional[str] = None) -> Scop:
    """Build a Scop from isl text.

    Each statement is ``{"domain": "{ S[t, i] : ... }", "write": "{ S[t, i] -> B[i] }",
    "reads": ["{ S[t, i] -> A[i - 1] }", ...], "scale": 1/3, "reduce": None | "+" | "*" | "max" | "min"}``;
    the body is ``write = scale * (sum of reads)`` (or, with ``reduce``,
    ``write = write (reduce) scale * sum``).  ``arrays`` maps names to
    ``(shape, dtype)``; arrays that are written become ``inout`` (the caller
    provides their initial contents), the others ``input``.  ``schedule`` is
    the original execution order as an isl union map, e.g. a shared time
    loop ``{ S[t, i] -> [t, 0, i]; U[t, i] -> [t, 1, i] }``; by default the
    statements run one after the other.

    >>> s = scop_from_isl("copy", [{"domain": "{ S[i] : 0 <= i < 4 }", "write": "{ S[i] -> B[i] }",
    ...                              "reads": ["{ S[i] -> A[i] }"]}], {"A": ((4,), "float64"), "B": ((4,), "float64")})
    >>> s.statements[0].name, [a.kind for a in s.arrays]
    ('S', ['input', 'inout'])
    """
    written = set()
    stmts: List[Statement] = []
    for spec in statements:
        dom = isl.Set(spec["domain"])
        sname = dom.get_tuple_name()
        w = isl.Map(spec["write"])
        iters, widx = _index_nodes(w)
        warr = w.get_tuple_name(isl.dim_type.out)
        written.add(warr)
        dtype = np.dtype(arrays[warr][1]).name
        loads = []
        for r in spec.get("reads", ()):
            rm = isl.Map(r)
            _, ridx = _index_nodes(rm)
            rarr = rm.get_tuple_name(isl.dim_type.out)
            loads.append(B.Load(rarr, ridx, np.dtype(arrays[rarr][1]).name))
        value: B.Node = B.Const(0, dtype)
        for ld in loads:
            ld_c = ld if ld.dtype == dtype else B.Cast(ld, dtype)
            value = ld_c if isinstance(value, B.Const) and value.value == 0 else B.Bin("+", value, ld_c, dtype)
        scale = spec.get("scale", 1)
        if scale != 1:
            value = B.Bin("*", B.Const(scale, dtype), value, dtype)
        dom_iters = tuple(dom.get_dim_name(isl.dim_type.set, k) or f"i{k}" for k in range(dom.dim(isl.dim_type.set)))
        if dom_iters != iters:
            raise PolytileError(f"statement {sname}: write map iterators {iters} differ from domain's {dom_iters}")
        body = B.Store(warr, widx, value, spec.get("reduce"))
        text = spec.get("text") or f"{warr}[...] {'=' if not spec.get('reduce') else spec['reduce'] + '='} ..."
        stmts.append(Statement(sname, iters, dom, body, "c", warr, text))
    if order is not None:
        by = {s.name: s for s in stmts}
        stmts = [by[n] for n in order]
    arrs = [Array(a, a, tuple(int(x) for x in shape), np.dtype(dt).name, "inout" if a in written else "input")
            for a, (shape, dt) in arrays.items()]
    tree = None
    if schedule is not None:
        domain = isl.UnionSet.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
        for st in stmts:
            domain = domain.union(isl.UnionSet.from_set(st.domain))
        umap = isl.UnionMap(schedule).intersect_domain(domain)
        tree = isl.Schedule.from_domain(domain).insert_partial_schedule(isl.MultiUnionPwAff.from_union_map(umap))
    return Scop.build(name, stmts, arrs, schedule=tree)


# ---------------------------------------------------------------------------
# The slow oracle
# ---------------------------------------------------------------------------

_NP_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide}
_CMP = {"==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal}
_REDUCE = {"+": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum}


def _eval(n: B.Node, env: Dict[str, int], arrays: Dict[str, np.ndarray]):
    if isinstance(n, B.Iter):
        return env[n.name]
    if isinstance(n, B.Const):
        return np.dtype(n.dtype).type(n.value)
    if isinstance(n, B.Load):
        idx = tuple(int(_eval(i, env, arrays)) for i in n.index)
        return arrays[n.array][idx]
    if isinstance(n, B.Bin):
        a, b = _eval(n.a, env, arrays), _eval(n.b, env, arrays)
        if n.dtype == B.INDEX and n.op in ("+", "-", "*", "//"):
            a, b = int(a), int(b)
            return {"+": a + b, "-": a - b, "*": a * b, "//": a // b}[n.op]
        t = np.dtype(n.dtype).type
        return t(_NP_OPS[n.op](t(a), t(b)))
    if isinstance(n, B.Neg):
        v = _eval(n.operand, env, arrays)
        return -v if n.dtype == B.INDEX else np.dtype(n.dtype).type(-np.dtype(n.dtype).type(v))
    if isinstance(n, B.Cast):
        return np.dtype(n.dtype).type(_eval(n.operand, env, arrays))
    if isinstance(n, B.Cmp):
        t = np.dtype(n.operand_dtype).type
        return np.bool_(_CMP[n.op](t(_eval(n.a, env, arrays)), t(_eval(n.b, env, arrays))))
    if isinstance(n, B.Select):
        c = _eval(n.cond, env, arrays)
        t = np.dtype(n.dtype).type
        return t(_eval(n.then, env, arrays)) if c else t(_eval(n.else_, env, arrays))
    if isinstance(n, B.Call):
        from .. import sema

        args = [np.dtype(n.dtype).type(_eval(a, env, arrays)) for a in n.args]
        return np.dtype(n.dtype).type(sema.BUILTINS[n.func].impl(*args))
    raise PolytileError(f"cannot interpret {n!r}")


def execute(scop: Scop, arrays: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Run ``scop`` in its original order, instance by instance (small sizes only).

    Returns copies of all arrays after execution; inputs are not modified.
    """
    state = {k: np.array(v, copy=True) for k, v in arrays.items()}
    for a in scop.arrays:
        if a.name not in state:
            state[a.name] = np.zeros(a.shape, dtype=a.dtype)
    instances: List[Tuple[Tuple[int, ...], str, Tuple[int, ...]]] = []
    sched = scop.schedule.get_map()
    stmts = scop.statement_map
    for s in scop.statements:
        maps = maps_of(sched.intersect_domain(isl.UnionSet.from_set(s.domain)))
        if not maps:
            continue
        m = maps[0]
        n_in, n_out = m.dim(isl.dim_type.in_), m.dim(isl.dim_type.out)

        def add(pt, name=s.name, n_in=n_in, n_out=n_out):
            v = [int(pt.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(n_in + n_out)]
            instances.append((tuple(v[n_in:]), name, tuple(v[:n_in])))

        with interrupts_after():  # a Ctrl-C must not unwind through isl from the callback
            m.wrap().foreach_point(add)
    instances.sort()
    for _, name, point in instances:
        st = stmts[name]
        env = dict(zip(st.iters, point))
        body = st.body
        idx = tuple(int(_eval(i, env, state)) for i in body.index) if body.index else ()
        value = _eval(body.value, env, state)
        arr = state[body.array]
        key = idx if idx else ()
        t = arr.dtype.type
        if body.reduce is None:
            arr[key] = t(value)
        else:
            arr[key] = t(_REDUCE[body.reduce](arr[key], t(value)))
    return state
