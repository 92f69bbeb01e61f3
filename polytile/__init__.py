"""polytile: a polyhedral loop optimizer toolkit.

    >>> import numpy as np, polytile
    >>> k = polytile.compile("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }")
    >>> A = np.arange(6, dtype=np.float32).reshape(2, 3); B = np.ones((3, 4), np.float32)
    >>> bool((k(A, B) == polytile.reference(k.program, A, B)).all())
    True
"""
__version__ = "0.1.0"

from .errors import (  # noqa: E402
    CollisionError, CompilerError, IllegalSchedule, InternalError, NonAffineError, PolytileError,
    ScheduleError, ShapeError, TileSemanticError, TileSyntaxError,
)


def _make_reference_callable() -> None:
    """Let ``polytile.reference`` be both the oracle module and the API call.

    ``polytile.reference(source, *arrays)`` is the documented way to run the
    oracle, and ``polytile.reference`` is also the module holding it; a
    module whose class has ``__call__`` serves both without a second name.
    """
    import types

    from . import reference as module

    class _CallableModule(types.ModuleType):
        def __call__(self, source, *arrays, **named):
            from .pipeline import reference as run_reference

            return run_reference(source, *arrays, **named)

    module.__class__ = _CallableModule


_make_reference_callable()


def __getattr__(name):
    # The pipeline pulls in islpy, cgen and the frontends; import it on first use
    # so that `import polytile` (and `polytile --help`) stay fast.
    if name in ("compile", "Kernel", "load_program", "shapes_from_dims"):
        from . import pipeline
        return getattr(pipeline, name)
    if name == "parse":
        from .frontends.tile import parse
        return parse
    raise AttributeError(f"module 'polytile' has no attribute {name!r}")


__all__ = [
    "compile", "reference", "Kernel", "parse", "load_program", "shapes_from_dims",
    "PolytileError", "TileSyntaxError", "TileSemanticError", "NonAffineError", "ShapeError",
    "CollisionError", "CompilerError", "ScheduleError", "IllegalSchedule", "InternalError",
]
