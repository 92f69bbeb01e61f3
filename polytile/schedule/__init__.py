"""Schedules: data (:mod:`.core`), transformations (:mod:`.transforms`), isl's scheduler (:mod:`.auto`),
array contraction (:mod:`.contract`)."""
from .core import PARALLEL, SIMD, UNROLL, Schedule, Step, StmtSchedule, initial
from .transforms import (TRANSFORMS, apply_step, auto_parallel, distribute, fuse, interchange, pack, parallel, reorder,
                         regtile, reverse, shift, skew, split, tile, unmark, unroll, vectorize)
from .auto import FUSION, automatic, from_flat, isl_schedule
from .contract import contracted_bytes, traffic_saved

__all__ = [
    "Schedule", "Step", "StmtSchedule", "initial", "automatic", "from_flat", "isl_schedule", "FUSION",
    "interchange", "reorder", "tile", "split", "skew", "reverse", "shift", "fuse", "distribute", "parallel",
    "vectorize", "unroll", "unmark", "regtile", "pack", "auto_parallel", "apply_step", "TRANSFORMS", "contracted_bytes",
    "traffic_saved", "PARALLEL", "SIMD", "UNROLL",
]

# Transformations are pure functions ``f(schedule, ...) -> schedule``; they
# double as methods so chains read naturally: ``s.tile("C", i=32).parallel("C", "i_t")``.
for _name, _fn in TRANSFORMS.items():
    setattr(Schedule, _name, _fn)
del _name, _fn


# ``polytile.schedule(...)`` is a documented API call and ``polytile.schedule`` is
# also this module: a module class with ``__call__`` serves both.  The call
# lives in the pipeline (which wires the stages); it is imported on use, the
# one deliberate upward reference (see FACADES in tests/test_layering.py).
def _make_callable() -> None:
    import sys
    import types

    class _CallableModule(types.ModuleType):
        def __call__(self, *args, **kwargs):
            from .. import pipeline

            return pipeline.schedule(*args, **kwargs)

    sys.modules[__name__].__class__ = _CallableModule


_make_callable()
