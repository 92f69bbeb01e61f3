"""One specialisation of a kernel (program, shapes, dtypes, options -> Scop, schedule, C, library) and
calling it on numpy arrays.  Targets build these; the pipeline and the API run them.

A :class:`CallPlan` is the part of a specialisation a call needs (entry point, arguments in C order,
which program input or output each one is), small enough to store beside the library in the
specialization cache; a :class:`Launcher` is a plan bound to its loaded function, with every check
and allocation worked out once, so that a call is a few microseconds of Python.

    >>> # spec = polytile.compile(src).specialize(A, B); run_specialization(spec, [A, B]) -> C
"""
from __future__ import annotations

import ctypes
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

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


def _has_parallel_region(source) -> bool:
    """Whether generated code starts threads: an OpenMP pragma in C, a libgomp team in LLVM IR."""
    if getattr(source, "lang", "c") == "llvm":
        return '@"GOMP_parallel"(' in source.text
    return "#pragma omp parallel" in source.text


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


def _data_field_reader():
    """A fast reader of an ndarray's data address, or None to use ``a.ctypes.data`` (0.8 us per array).

    numpy's array object starts with the object header and then ``char *data`` (``PyArrayObject_fields``
    in numpy's C API; ``PyArray_DATA`` reads it), so on CPython the address is the pointer-sized word at
    ``id(a) + object.__basicsize__``: 0.1 us.  Used only if it agrees with ``ctypes.data`` on probes
    (an array, a view at an offset, a 0-d array).
    """
    if sys.implementation.name != "cpython":
        return None  # id() is not an address elsewhere
    offset, word = object.__basicsize__, ctypes.c_void_p.from_address
    base = np.arange(8.0)
    for probe in (base, base[3:], np.array(1.0, np.float32), np.empty((2, 3), np.int8)):
        if word(id(probe) + offset).value != probe.ctypes.data:
            return None
    return lambda a: word(id(a) + offset).value


_DATA_ADDRESS = _data_field_reader() or (lambda a: a.ctypes.data)

#: Outputs and temporaries are checked against the memory available before a call allocates them (an
#: overcommitted array is killed later, not refused): on the first call, and on every call above this size.
_CHECK_MEMORY_ABOVE = 1 << 26
#: A launcher keeps one set of its temporaries for the next call when they take at most this many bytes.
#: Allocated afresh, a large temporary costs a page fault per 4 KiB whenever glibc's malloc has given the
#: memory back to the system, which depends on everything else the process allocated: after an LLVM
#: compile in the same process, elementwise_chain 2^20 (three 4 MB temporaries) took 4-14 ms a call
#: against 0.8 (about 1,900 faults a call against none).
KEEP_TEMPS_BYTES = 64 << 20


def _empty(shape: Tuple[int, ...], dt: np.dtype, name: str) -> np.ndarray:
    """An uninitialised array for an output or temporary; a located ShapeError when it cannot be had."""
    try:
        return np.empty(shape, dtype=dt)
    except (MemoryError, ValueError):
        size = math.prod(shape) * dt.itemsize
        raise ShapeError(f"{name}: {dt.name}{list(shape)} needs {size:,} bytes: too large to allocate") from None


@dataclass(frozen=True)
class CallPlan:
    """How to call one specialisation: what :class:`Launcher` needs, in JSON-able form.

    ``params`` are the C arguments in order, ``(kind, source name, dtype, shape)`` with kind ``input``,
    ``output`` or ``temp``; ``inputs``/``outputs`` are the program's names in call/return order;
    ``constants`` the size inputs also read as 0-d tensors; ``parallel`` whether the code has an
    OpenMP region (a call without one needs no thread count).

    >>> plan = CallPlan("k", (("input", "A", "float32", (2,)), ("output", "B", "float32", (2,))), ("A",), ("B",))
    >>> CallPlan.from_json(plan.to_json()) == plan
    True
    """

    entry: str
    params: Tuple[Tuple[str, str, str, Tuple[int, ...]], ...]
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    constants: Tuple[Tuple[str, int], ...] = ()
    parallel: bool = True

    @classmethod
    def of(cls, spec: Specialization) -> "CallPlan":
        """The plan of a built specialisation of a Tile program."""
        sizes = spec.bound.sizes
        params = tuple((p.kind, p.source_name, p.dtype, tuple(int(n) for n in p.shape)) for p in spec.source.params)
        constants = tuple((p.source_name, math.trunc(sizes[p.source_name])) for p in spec.source.params
                          if p.kind == "input" and p.source_name in sizes)
        return cls(spec.source.entry, params, tuple(spec.bound.program.input_names),
                   tuple(spec.bound.program.outputs), constants, _has_parallel_region(spec.source))

    def to_json(self) -> dict:
        return {"entry": self.entry, "params": [[k, n, d, list(s)] for k, n, d, s in self.params],
                "inputs": list(self.inputs), "outputs": list(self.outputs),
                "constants": [list(c) for c in self.constants], "parallel": self.parallel}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CallPlan":
        """The plan back from :meth:`to_json` (raises KeyError/TypeError/ValueError on a malformed one)."""
        params = tuple((str(k), str(n), str(np.dtype(dt).name), tuple(int(x) for x in s)) for k, n, dt, s in d["params"])
        if any(k not in ("input", "output", "temp") for k, _, _, _ in params):
            raise ValueError("unknown parameter kind")
        return cls(str(d["entry"]), params, tuple(map(str, d["inputs"])), tuple(map(str, d["outputs"])),
                   tuple((str(n), int(v)) for n, v in d["constants"]), bool(d["parallel"]))


class Launcher:
    """A :class:`CallPlan` bound to its loaded function (a ``runtime.KernelFunction``): call it on the inputs.

    Per call it checks each input's dtype and shape against the plan, allocates the outputs (or checks
    the ``out=`` arrays) and the temporaries, and calls the entry point with their addresses.

    >>> # Launcher(CallPlan.of(spec), spec.function)([A, B]) -> C
    """

    def __init__(self, plan: CallPlan, function: Any):
        self.plan = plan
        self.function = function
        position = {name: i for i, name in enumerate(plan.inputs)}
        constants = dict(plan.constants)
        self._inputs: List[Tuple[int, int, np.dtype, Tuple[int, ...], str]] = []
        self._fixed: List[Tuple[int, np.ndarray]] = []  # size constants read as 0-d tensors
        self._allocate: List[Tuple[int, Tuple[int, ...], np.dtype, str]] = []  # outputs
        self._temps: List[Tuple[int, Tuple[int, ...], np.dtype, str]] = []
        slot_of_output: Dict[str, int] = {}
        need = temp_bytes = 0
        for slot, (kind, name, dtype, shape) in enumerate(plan.params):
            dt = np.dtype(dtype)
            if kind == "input" and name in constants:
                # A constant also read as a 0-d tensor: int32, as PlaidML types every Integer/Real.
                self._fixed.append((slot, np.array(constants[name], dtype=dt)))
            elif kind == "input":
                self._inputs.append((slot, position[name], dt, shape, name))
            else:
                (self._allocate if kind == "output" else self._temps).append((slot, shape, dt, name))
                need += math.prod(shape) * dt.itemsize
                if kind == "output":
                    slot_of_output[name] = slot
                else:
                    temp_bytes += math.prod(shape) * dt.itemsize
        self._outputs = tuple(slot_of_output[o] for o in plan.outputs)
        self._need = need
        # One set of temporaries kept between calls (KEEP_TEMPS_BYTES).  A call takes it with list.pop
        # and gives it back after: a concurrent call of the same launcher finds none and allocates its own.
        self._keep_temps = 0 < temp_bytes <= KEEP_TEMPS_BYTES
        self._spare: List[List[np.ndarray]] = []
        self._check_memory = True
        self._nargs = len(plan.params)
        self._single = len(self._outputs) == 1

    def __call__(self, arrays: Sequence[np.ndarray], out: Any = None):
        """The outputs of the kernel on ``arrays`` (the program's inputs, in order); with ``out``, written there."""
        for _, at, dt, shape, name in self._inputs:
            a = arrays[at]
            if not isinstance(a, np.ndarray):  # the address read by launch() is only an ndarray's
                raise ShapeError(f"input {name}: expected a numpy array, got {type(a).__name__}")
            if a.dtype != dt or a.shape != shape:
                raise ShapeError(f"input {name}: expected {dt.name}{list(shape)}, got {a.dtype}{list(a.shape)}")
        return self.launch(arrays, out)

    def launch(self, arrays: Sequence[np.ndarray], out: Any = None):
        """:meth:`__call__` for inputs already known to be ndarrays of the plan's dtypes and shapes (the
        Kernel's lean path, whose signature lookup established that)."""
        address = _DATA_ADDRESS
        bufs: List[Any] = [None] * self._nargs
        pointers = [0] * self._nargs
        for slot, at, _, _, _ in self._inputs:
            a = arrays[at]
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            bufs[slot] = a
            pointers[slot] = address(a)
        for slot, a in self._fixed:
            pointers[slot] = address(a)
        given = self._given_outputs(out, arrays) if out is not None else None
        if self._check_memory:
            why = too_large(self._need)
            if why:
                raise ShapeError(f"the outputs and temporaries need {self._need:,} bytes: too large to allocate ({why})")
            self._check_memory = self._need > _CHECK_MEMORY_ABOVE
        for slot, shape, dt, name in self._allocate:
            a = given.get(slot) if given is not None else None
            bufs[slot] = a if a is not None else _empty(shape, dt, name)
            pointers[slot] = address(bufs[slot])
        temps = None
        if self._temps:
            try:
                temps = self._spare.pop()
            except IndexError:
                temps = [_empty(shape, dt, name) for _, shape, dt, name in self._temps]
            for (slot, _, _, _), a in zip(self._temps, temps):
                bufs[slot] = a
                pointers[slot] = address(a)
        # `bufs` keeps every array alive until the call returns.
        self.function.call_addresses(pointers, parallel=self.plan.parallel)
        if self._keep_temps and not self._spare:
            self._spare.append(temps)
        if self._single:
            return bufs[self._outputs[0]]
        return tuple(bufs[s] for s in self._outputs)

    def _given_outputs(self, out: Any, arrays: Sequence[np.ndarray]) -> Dict[int, np.ndarray]:
        """``out`` (an array, or a tuple with one per output) checked against the plan: slot -> array."""
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(self._outputs):
            raise ShapeError(f"out: expected {len(self._outputs)} array(s), one per output "
                             f"({', '.join(self.plan.outputs)}), got {len(outs)}")
        given: Dict[int, np.ndarray] = {}
        for slot, a in zip(self._outputs, outs):
            _, name, dtype, shape = self.plan.params[slot]
            if not isinstance(a, np.ndarray):
                raise ShapeError(f"out for {name}: expected a numpy array, got {type(a).__name__}")
            if a.dtype != np.dtype(dtype) or a.shape != shape:
                raise ShapeError(f"out for {name}: expected {dtype}{list(shape)}, got {a.dtype}{list(a.shape)}")
            if not a.flags.c_contiguous or not a.flags.writeable:
                raise ShapeError(f"out for {name}: must be a writeable C-contiguous array")
            if any(np.may_share_memory(a, x) for x in arrays if isinstance(x, np.ndarray)) or \
                    any(np.may_share_memory(a, g) for g in given.values()):
                raise ShapeError(f"out for {name}: overlaps an input or another output; the kernel would "
                                 f"read what it has overwritten")
            given[slot] = a
        return given
