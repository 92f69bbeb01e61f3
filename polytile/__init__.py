"""polytile: a polyhedral loop optimizer toolkit.

    >>> import numpy as np, polytile
    >>> k = polytile.compile("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }")
    >>> A = np.arange(6, dtype=np.float32).reshape(2, 3); B = np.ones((3, 4), np.float32)
    >>> bool((k(A, B) == polytile.reference(k.program, A, B)).all())
    True
"""
from .version import __version__  # noqa: E402,F401

from .errors import (  # noqa: E402
    CollisionError, CompilerError, IllegalSchedule, InternalError, MissingFileError, NonAffineError, OptionError,
    PolytileError, ScheduleError, ShapeError, TileSemanticError, TileSyntaxError, UnknownOptionError,
)


def reference(program, *arrays, **named):
    """Run the numpy oracle on a Tile program (text, path or parsed): its outputs.

    >>> import numpy as np, polytile
    >>> polytile.reference("function (A[N]) -> (B) { B = A * 2; }", np.arange(3.0))
    array([0., 2., 4.])
    """
    from . import pipeline

    return pipeline.reference(program, *arrays, **named)


def schedule(program, *args, **kwargs):
    """A schedule of ``program`` at the given shapes to transform and pass back as ``compile(..., schedule=)``:
    the untiled default (program order, outermost parallel loops) -- or, with ``hardware="host"`` (or
    another descriptor), the autotiled schedule :func:`compile` uses by default, every parallel loop kept
    (``min_parallel_work=None``: also compile's rule that leaves loops too small for a parallel region
    serial).  Every option: :func:`polytile.pipeline.schedule`.

    >>> import polytile
    >>> s = polytile.schedule("function (A[N]) -> (B) { B = A * 2; }", dims="N=8")
    >>> s.loop_names("B")
    ['i0']
    """
    from . import pipeline

    return pipeline.schedule(program, *args, **kwargs)


def __getattr__(name):
    # The pipeline pulls in islpy, cgen and the frontends; import it on first use
    # so that `import polytile` (and `polytile --help`) stay fast.
    if name in ("compile", "Kernel"):
        # Not the pipeline: a kernel found in the specialization cache runs without it (or islpy).
        from . import kernel
        return getattr(kernel, name)
    if name in ("load_program", "shapes_from_dims", "parse_dims"):
        from . import program
        return getattr(program, name)
    if name == "optimize_c":
        from .c_optimiser import optimize_c
        return optimize_c
    if name in ("compare", "tune", "hardware", "autotile", "cost", "plots"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name == "parse":
        from .frontends.tile import parse
        return parse
    raise AttributeError(f"module 'polytile' has no attribute {name!r}")


def __dir__():
    # The lazy API names (compile, Kernel, parse, ...) are part of the package even before first use.
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "compile", "reference", "schedule", "Kernel", "parse", "load_program", "shapes_from_dims", "optimize_c",
    "PolytileError", "TileSyntaxError", "TileSemanticError", "NonAffineError", "ShapeError",
    "CollisionError", "CompilerError", "ScheduleError", "IllegalSchedule", "InternalError", "OptionError",
    "UnknownOptionError", "MissingFileError",
]
