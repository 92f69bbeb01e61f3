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


def __getattr__(name):
    # The pipeline pulls in islpy, cgen and the frontends; import it on first use
    # so that `import polytile` (and `polytile --help`) stay fast.
    if name in ("compile", "Kernel", "load_program", "shapes_from_dims", "parse_dims"):
        from . import pipeline
        return getattr(pipeline, name)
    if name == "optimize_c":
        from .copt import optimize_c
        return optimize_c
    if name in ("compare", "tune", "hardware", "autotile", "cost"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name in ("reference", "schedule"):
        # Both a module and an API call (the module makes itself callable).
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name == "parse":
        from .frontends.tile import parse
        return parse
    raise AttributeError(f"module 'polytile' has no attribute {name!r}")


__all__ = [
    "compile", "reference", "schedule", "Kernel", "parse", "load_program", "shapes_from_dims", "optimize_c",
    "PolytileError", "TileSyntaxError", "TileSemanticError", "NonAffineError", "ShapeError",
    "CollisionError", "CompilerError", "ScheduleError", "IllegalSchedule", "InternalError",
]
