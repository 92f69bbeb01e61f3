"""Schedules (the ``scheduling`` stage; ``polytile.schedule(...)`` is the API call that builds one): data (:mod:`.core`), transformations (:mod:`.transforms`, :mod:`.locality`; by name: :mod:`.steps`), isl's scheduler (:mod:`.auto`),
array contraction (:mod:`.contract`), the isl tree, loop tree and JSON of a schedule (:mod:`.tree`), the typed marks
of that tree and their text (:mod:`.marks`)."""
from .core import PARALLEL, SIMD, UNROLL, Schedule, Step, StmtSchedule
from .transforms import (auto_parallel, distribute, fuse, interchange, pack, parallel, reorder, regtile, reverse, shift,
                         skew, split, tile, unmark, unroll, vectorize)
from .locality import tile_transposes, vector_inner
from .steps import TRANSFORMS, apply_step
from .auto import FUSION, automatic, from_flat, initial, isl_schedule
from .contract import contracted_bytes, traffic_saved
from .tree import VIEWS

__all__ = [
    "Schedule", "Step", "StmtSchedule", "initial", "automatic", "from_flat", "isl_schedule", "FUSION",
    "interchange", "reorder", "tile", "split", "skew", "reverse", "shift", "fuse", "distribute", "parallel",
    "vectorize", "unroll", "unmark", "regtile", "pack", "auto_parallel", "vector_inner", "tile_transposes", "apply_step", "TRANSFORMS", "contracted_bytes",
    "traffic_saved", "PARALLEL", "SIMD", "UNROLL",
]

# Transformations are pure functions ``f(schedule, ...) -> schedule``; they
# double as methods so chains read naturally: ``s.tile("C", i=32).parallel("C", "i_t")``.
# So do the views of a schedule (``s.tree()``, ``s.describe()``, ``str(s)``, ``s.dumps()``, ``s.save(path)``).
for _name, _fn in {**TRANSFORMS, **VIEWS}.items():
    setattr(Schedule, _name, _fn)
del _name, _fn
