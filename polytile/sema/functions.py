"""Builtin functions, aggregation identities and elementwise evaluation.

The value-level rules that :func:`~polytile.sema.check`, :func:`~polytile.sema.bind`,
the reference interpreter and the compilers share: which builtins exist (their
semantics live in :mod:`polytile.elemwise`), where an aggregation starts, and
how an elementwise expression is evaluated with numpy.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np

from .. import dtypes as D, elemwise, ir
from ..ir import Call, Ref


@dataclass(frozen=True)
class Builtin:
    """One builtin function: its name, arity and numpy implementation.

    ``int_arg`` is the position of an argument that must be an integer
    literal (``bits`` of ``as_float``/``as_int``, ``axis`` of ``index``);
    ``int_choices`` lists its allowed values (empty: any axis below the rank).

        >>> BUILTINS["relu"].impl(np.array([-1.0, 2.0]))
        array([0., 2.])
    """

    name: str
    arity: int
    impl: Callable[..., Any]
    int_arg: Optional[int] = None
    int_choices: Tuple[int, ...] = ()


def _impl(name: str) -> Callable[..., Any]:
    """numpy implementation of builtin ``name`` with PlaidML's typing (see :mod:`polytile.elemwise`)."""

    def run(*args):
        env = {f"A{k}": np.asarray(a) for k, a in enumerate(args)}
        call = Call(name, tuple(Ref(f"A{k}") for k in range(len(args))))
        return elemwise.evaluate(call, env)

    return run


def _table() -> Dict[str, Builtin]:
    t: Dict[str, Builtin] = {}
    for name, arity in elemwise.FUNCTIONS.items():
        if name in elemwise.CASTS:
            t[name] = Builtin(name, arity, None, int_arg=1, int_choices=elemwise.CASTS[name][1])
        elif name == "index":
            t[name] = Builtin(name, arity, None, int_arg=1)
        else:
            t[name] = Builtin(name, arity, _impl(name))
    return t


BUILTINS: Mapping[str, Builtin] = MappingProxyType(_table())


def identity(agg: str, dtype) -> Any:
    """The starting value of a reached output cell for aggregation ``agg``.

    0 for ``+``, 1 for ``*``, -inf/+inf for ``>``/``<`` (integers: the
    dtype's min/max; bool: False/True).  ``=`` has no identity: ``None``.

        >>> identity(">", "int32"), identity("<", "float32"), identity("=", "float64")
        (np.int32(-2147483648), np.float32(inf), None)
    """
    dt = np.dtype(dtype)
    if agg == "=":
        return None
    if agg not in _AGG_OPS:
        raise ValueError(f"unknown aggregation {agg!r}")
    if dt.kind not in "biuf":
        raise ValueError(f"no identity for {agg!r} over {dt}")
    return dt.type(D.reduction_identity(_AGG_OPS[agg], dt.name))


#: The IR's reduction op of each Tile aggregation with an identity.
_AGG_OPS = {"+": "+", "*": "*", ">": "max", "<": "min"}


def eval_elementwise(expr: ir.Expr, env: Mapping[str, Any]) -> Any:
    """Evaluate an elementwise expression with numpy, the way the reference does.

    ``env`` maps tensor names to arrays and dimension names to Python ints;
    typing follows PlaidML (:mod:`polytile.elemwise`).

        >>> eval_elementwise(Binary("*", Ref("X"), Float(2.5)), {"X": np.ones(2, np.float32)})
        array([2.5, 2.5], dtype=float32)
    """
    dims = {k: v for k, v in env.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return elemwise.evaluate(expr, env, dims)
