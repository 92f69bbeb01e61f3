"""Semantic analysis of Tile programs: static checks, then binding to concrete shapes.

Two stages, so that shape-independent mistakes are reported once, with a
source location, before any array is seen:

* :func:`check` validates a :class:`~polytile.ir.Program` on its own and
  raises :class:`~polytile.errors.TileSemanticError` (or its subclass
  :class:`~polytile.errors.NonAffineError`) pointing at the offending node.
* :func:`bind` specialises a checked program to input shapes and dtypes and
  returns an immutable :class:`Bound`: every dimension's value and every
  tensor's shape, dtype and kind.  Mismatched arrays raise
  :class:`~polytile.errors.ShapeError`.

Example::

    >>> from polytile import ir
    >>> p = ir.Program(
    ...     inputs=(ir.Input("A", ("M", "K")), ir.Input("B", ("K", "N"))), outputs=("C",),
    ...     body=(ir.Contraction("C", (ir.Index("i"), ir.Index("j")), (ir.Ref("M"), ir.Ref("N")), "+", "*",
    ...           (ir.Access("A", (ir.Index("i"), ir.Index("k"))), ir.Access("B", (ir.Index("k"), ir.Index("j"))))),))
    >>> b = bind(p, [(2, 3), (3, 4)], ["float32", "int32"])
    >>> b.dims["K"], b.tensors["C"].shape, b.tensors["C"].dtype
    (3, (2, 4), dtype('float32'))

The semantics pinned down here (names and definitions, affine index
polynomials, sizes, builtins, element types, contractions), which the
reference interpreter and the compilers follow: docs/tile-language.md,
"Checked semantics".

Modules: :mod:`.functions` (the builtin table, aggregation identities and the
elementwise evaluator shared with the reference interpreter), :mod:`.checks`
(:func:`check`), :mod:`.bound` (:class:`Bound`, :class:`TensorInfo` and their
queries), :mod:`.binding` (:func:`bind`, with the checks that need sizes).
"""
from .binding import SUPPORTED_DTYPES, bind
from .bound import Bound, TensorInfo, contraction_dtype
from .checks import check
from .functions import BUILTINS, Builtin, eval_elementwise, identity

__all__ = [
    "BUILTINS",
    "Builtin",
    "Bound",
    "SUPPORTED_DTYPES",
    "TensorInfo",
    "bind",
    "check",
    "contraction_dtype",
    "eval_elementwise",
    "identity",
]
