"""The registry of schedule steps by name, and their replay (:func:`apply_step`): every transformation
of :mod:`.transforms` and :mod:`.locality`, as a saved schedule names them."""
from __future__ import annotations

from ..errors import ScheduleError
from .core import Schedule, Step
from .locality import tile_transposes, vector_inner
from .transforms import (auto_parallel, distribute, fuse, fuse_first, fuse_last, interchange, pack, parallel, regtile,
                         reorder, reverse, shift, skew, split, tile, unmark, unroll, vectorize)

TRANSFORMS = {
    "interchange": interchange, "reorder": reorder, "tile": tile, "split": split, "skew": skew,
    "reverse": reverse, "shift": shift, "fuse": fuse, "fuse_last": fuse_last, "fuse_first": fuse_first, "distribute": distribute,
    "parallel": parallel,
    "vectorize": vectorize, "unroll": unroll, "unmark": unmark, "regtile": regtile, "pack": pack,
    "auto_parallel": auto_parallel, "vector_inner": vector_inner, "tile_transposes": tile_transposes,
}


def apply_step(s: Schedule, step: Step) -> Schedule:
    """Replay one step (from JSON) on ``s``.

    >>> # apply_step(s, Step.make("tile", stmt="C", sizes={"i": 32}))  ==  s.tile("C", i=32)
    """
    fn = TRANSFORMS.get(step.op)
    if fn is None:
        raise ScheduleError(f"unknown schedule step {step.op!r}; known: {', '.join(sorted(TRANSFORMS))}")
    kw = step.kwargs()
    try:
        return fn(s, **kw)
    except TypeError as e:
        raise ScheduleError(f"bad arguments for step {step}: {e}") from None
