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
    (3, (2, 4), dtype('float64'))

Semantics pinned down here (the reference interpreter and the compilers follow them)
-----------------------------------------------------------------------------------

Names and definitions (:func:`check`)
    Every name is used after its definition: an input, a dimension (bound by
    an input's header, or by an earlier ``DimDef`` statement) or the target of
    an earlier statement.  A name is one thing only: a tensor or a dimension.
    Each tensor is assigned once, inputs never; every header output is
    assigned, and is a tensor (not a dimension).  Input and output names are
    unique.  Index variables appear only in index polynomials and contraction
    constraints' left sides, never in sizes, constraint bounds, dimension
    definitions or elementwise expressions.  Contraction operands and
    ``default`` name tensors.  Where a tensor's rank is known statically
    (inputs declared with dimensions, contraction outputs, elementwise
    results whose operands all have known ranks) every access must use that
    many indices; otherwise the check happens in :func:`bind`.

Index polynomials
    Built from integers, index variables, dimension names, ``+ - *``, unary
    ``-`` and ``/``.  They must be affine in the index variables: a product
    of two sub-expressions that both contain index variables (``i * j``) or a
    division whose divisor contains one (``i / j``) raises
    :class:`NonAffineError`; dimension names are constants, so ``t * S + i``
    and ``i / S`` are fine.  Float literals are errors.  A division whose
    numerator contains index variables is *exact*: ``O[i / 2]`` only includes
    even ``i``.  A division whose numerator has no index variable is a
    constant and is computed like a size (floor division), so ``KH / 2`` with
    ``KH = 3`` is ``1``.

Sizes and dimension definitions
    Integer expressions of integers and dimension names with ``+ - * /`` and
    unary ``-``; ``/`` is floor division (Python's ``//``).  A ``DimDef``
    (``HO = (H + 1) / 2``) names a new dimension usable as a size, an offset
    in an index, or a value.  Its value may be negative (it can be an
    offset); an output *size* must not be (zero is allowed).

Builtins
    :data:`BUILTINS` lists the elementwise functions (their semantics live in
    :mod:`polytile.elemwise`).  ``as_float(X, bits)`` takes bits 16, 32 or
    64 in :func:`check`, but float16 is rejected by :func:`bind` because no
    backend computes in half precision; ``as_int``/``as_uint`` take 8, 16,
    32 or 64; ``index(T, axis)`` takes an integer literal ``axis < rank(T)``.
    Statement-level builtins (``reshape``, ``gather``, ``shape``,
    ``prng_*``) and PlaidML's inline definitions are put in normal form by
    :mod:`polytile.desugar` first.

Sizes
    Dimension statements and sizes fold as PlaidML folds them: ``/``
    truncates toward zero; ``max``, ``min``, ``broadcast`` and
    ``assert_*`` (a false assertion is a located error) are evaluated here.
    A size input's value (see :func:`polytile.desugar.size_inputs`) binds a
    dimension.

Element types
    Inputs may be any of :data:`SUPPORTED_DTYPES` (bool, signed and unsigned
    integers of 8 to 64 bits, float32, float64).  Elementwise expressions
    are typed as PlaidML 0.7.0 types them (:mod:`polytile.dtypes`,
    :mod:`polytile.elemwise`): literals are int32/float32, the result of an
    operation is the first widest operand type with floats beating
    integers, integer ``/`` truncates, comparisons give bool.
    :meth:`Bound.expr_type` runs the same evaluator as the reference on
    zero-size arrays, so the two always agree.

Contractions (:func:`contraction_dtype`)
    The promoted type (as above) of the operands, left to right; ``==``
    gives bool.  ``A == B ? C``: where ``A != B`` the point contributes the
    aggregation's :func:`identity` (for ``=``, which has none, it writes 0).
    Unreached output cells are 0 or the ``default`` tensor (cast to the
    output dtype; its shape must equal the output's).

Layout
------

* :mod:`polytile.sema.functions`: the builtin table, aggregation identities and the
  elementwise evaluator shared with the reference interpreter.
* :mod:`polytile.sema.checks`: :func:`check`, the shape-independent checks.
* :mod:`polytile.sema.bound`: :class:`Bound` and :class:`TensorInfo`, and the shape,
  dtype and size queries on a bound program.
* :mod:`polytile.sema.binding`: :func:`bind`, which builds a :class:`Bound` input by
  input and statement by statement, with the checks that need sizes.
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
