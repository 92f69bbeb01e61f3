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


def _make_callable(module, api: str) -> None:
    """Let ``polytile.<module>`` be both a module and the API call of the same name.

    ``polytile.reference(source, *arrays)`` and ``polytile.schedule(source,
    dims=...)`` are the documented calls, and ``polytile.reference`` /
    ``polytile.schedule`` are also the module and package implementing them;
    a module whose class has ``__call__`` serves both without a second name.
    """
    import types

    class _CallableModule(types.ModuleType):
        def __call__(self, *args, **kwargs):
            from . import pipeline

            return getattr(pipeline, api)(*args, **kwargs)

    module.__class__ = _CallableModule


from . import reference as _reference_module  # noqa: E402
from . import schedule as _schedule_package  # noqa: E402

_make_callable(_reference_module, "reference")
_make_callable(_schedule_package, "schedule")


def __getattr__(name):
    # The pipeline pulls in islpy, cgen and the frontends; import it on first use
    # so that `import polytile` (and `polytile --help`) stay fast.
    if name in ("compile", "Kernel", "load_program", "shapes_from_dims", "parse_dims"):
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
