"""One specialisation of a kernel (program, shapes, dtypes, options -> Scop, schedule, C, library) and
calling it on numpy arrays.  Targets build these; the pipeline and the API run them.

    >>> # spec = polytile.compile(src).specialize(A, B); run_specialization(spec, [A, B]) -> C
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from .errors import ShapeError
from .memory import too_large


@dataclass(frozen=True, eq=False)
class Specialization:
    """Everything produced for one (program, shapes, dtypes, options)."""

    bound: Any
    scop: Any  # poly.Scop
    deps: Any  # deps.Dependences
    schedule: Any  # scheduling.Schedule
    source: Any  # codegen.c.KernelSource
    library_path: Optional[Path] = None
    function: Any = None

    def __repr__(self) -> str:
        built = f"built {self.library_path.name}" if self.library_path else "not built"
        return f"<polytile Specialization of {self.scop.name}: {len(self.scop.statements)} statements, {built}>"


def run_specialization(spec: Specialization, arrays: Sequence[np.ndarray]):
    """Allocate outputs and temporaries, call the compiled function, return the outputs."""
    bufs = {}
    given = {name: a for name, a in zip(spec.bound.program.input_names, arrays)}
    for p in spec.source.params:
        if p.kind == "input":
            raw = given[p.source_name]
            if p.source_name in spec.bound.sizes:
                # A constant also read as a 0-d tensor: int32, as PlaidML types every Integer/Real.
                raw = np.array(math.trunc(spec.bound.sizes[p.source_name]), dtype=p.dtype)
            a = raw if raw.flags.c_contiguous else np.ascontiguousarray(raw)  # (keeps 0-d arrays 0-d)
            if a.dtype.name != p.dtype or a.shape != tuple(p.shape):
                raise ShapeError(f"input {p.source_name}: expected {p.dtype}{list(p.shape)}, got {a.dtype}{list(a.shape)}")
            bufs[p.name] = a
    need = sum(int(np.prod(p.shape, dtype=object)) * np.dtype(p.dtype).itemsize
               for p in spec.source.params if p.kind != "input")
    why = too_large(need)
    if why:  # before allocating: an overcommitted array is killed later, not refused
        raise ShapeError(f"the outputs and temporaries need {need:,} bytes: too large to allocate ({why})")
    for p in spec.source.params:
        if p.kind != "input":
            try:
                bufs[p.name] = np.empty(p.shape, dtype=p.dtype)
            except (MemoryError, ValueError):
                size = int(np.prod(p.shape, dtype=object)) * np.dtype(p.dtype).itemsize
                raise ShapeError(f"{p.source_name}: {p.dtype}{list(p.shape)} needs {size:,} bytes: too large to "
                                 f"allocate") from None
    spec.function(*[bufs[p.name] for p in spec.source.params])
    by_source = {p.source_name: bufs[p.name] for p in spec.source.params}
    outs = tuple(by_source[o] for o in spec.bound.program.outputs)
    return outs[0] if len(outs) == 1 else outs


def run_scop(spec: Specialization, arrays: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Call a built Scop on named arrays (copied; ``inout`` arrays start from the given values).

    Returns every array after the call, by name.
    """
    bufs: Dict[str, np.ndarray] = {}
    for p in spec.source.params:
        if p.name in arrays:
            a = np.array(arrays[p.name], dtype=p.dtype, copy=True, order="C")
            if a.shape != p.shape:
                raise ShapeError(f"array {p.name}: expected shape {p.shape}, got {a.shape}")
            bufs[p.name] = a
        elif p.kind in ("input", "inout"):
            raise ShapeError(f"missing array {p.name} ({p.kind}, shape {p.shape})")
        else:
            bufs[p.name] = np.zeros(p.shape, dtype=p.dtype)
    spec.function(*[bufs[p.name] for p in spec.source.params])
    return bufs
