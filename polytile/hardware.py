"""Hardware descriptors: what a machine's compute and memory hierarchy look like.

The cost model needs a few facts about the target: how many cores (or SMs),
how wide the vectors are, how fast the arithmetic is, and, level by level,
how big, how wide and how fast the memory is.  A descriptor holds them; it is
read from a TOML (or JSON) file whose format is documented in
``polytile/data/hardware/README.md``, from a preset shipped in that directory,
or detected from the running Linux host (:func:`detect_host`).

    >>> hw = load("x86-avx512")
    >>> hw.vector_lanes("float32"), [lv.name for lv in hw.cache_levels()]
    (16, ['L1', 'L2', 'L3'])
    >>> hw.bandwidth("L1") == hw.level("L1").bandwidth_gbs * 1e9 * hw.cores   # per-core level
    True

Units: sizes in bytes, bandwidths in GB/s with GB = 10**9 bytes (as vendors
quote them), clocks in GHz, peaks in GFLOP/s (CPU) or TFLOP/s (GPU).

Every problem in a descriptor is a :class:`HardwareError` naming the file and
the field path, e.g. ``bad.toml: memory[2].size_bytes: expected a positive
integer, got "big"``.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Dict, Iterable, Mapping, Optional, Sequence, Union

from .errors import PolytileError

__all__ = [
    "HardwareError", "MemoryLevel", "CPUDescriptor", "GPUDescriptor", "Hardware",
    "load", "from_dict", "presets", "detect_host", "format", "to_dict", "to_toml", "to_json",
    "dtype_bytes", "PRESET_DIR",
]

#: Where the preset ``*.toml`` files live (their stems are the preset names).
PRESET_DIR = Path(__file__).resolve().parent / "data" / "hardware"

#: The preset that is detected rather than read from a file.
HOST = "host"


class HardwareError(PolytileError):
    """A hardware descriptor (file, preset name or query) is wrong.

    ``source`` is the file (or other origin) and ``field`` the path of the
    offending field inside it (``memory[2].size_bytes``); either may be None.
    """

    def __init__(self, problem: str, *, source: Optional[str] = None, field: Optional[str] = None):
        self.problem = problem
        self.source = source
        self.field = field
        super().__init__(": ".join([p for p in (source, field) if p] + [problem]))

    def with_source(self, source: str) -> "HardwareError":
        """The same error, attributed to ``source`` (the file it came from)."""
        return HardwareError(self.problem, source=source, field=self.field)


# ---------------------------------------------------------------------------
# Element types
# ---------------------------------------------------------------------------

# Size in bytes of each element type a query may name.  Several spellings are
# accepted because callers come from numpy (``float32``), C (``double``) and
# vendor tables (``fp16``).
_DTYPE_BYTES = {
    "float64": 8, "double": 8, "fp64": 8, "f64": 8,
    "float32": 4, "float": 4, "single": 4, "fp32": 4, "f32": 4,
    "float16": 2, "half": 2, "fp16": 2, "f16": 2,
    "bfloat16": 2, "bf16": 2,
    "int64": 8, "uint64": 8, "int32": 4, "uint32": 4, "int": 4,
    "int16": 2, "uint16": 2, "int8": 1, "uint8": 1,
}
# The canonical floating-point name of each spelling (the key of the peak tables).
_FLOAT_KIND = {
    **{s: "fp64" for s in ("float64", "double", "fp64", "f64")},
    **{s: "fp32" for s in ("float32", "float", "single", "fp32", "f32")},
    **{s: "fp16" for s in ("float16", "half", "fp16", "f16")},
    **{s: "bf16" for s in ("bfloat16", "bf16")},
    "tf32": "tf32", "tfloat32": "tf32", "fp8": "fp8", "int8": "int8",
}


def _dtype_name(dtype: Any) -> str:
    # numpy dtype objects have .name, numpy scalar types a __name__; strings as they are.
    if isinstance(dtype, type):
        name = dtype.__name__
    else:
        name = getattr(dtype, "name", None) or str(dtype)
    return str(name).strip().lower()


def dtype_bytes(dtype: Any) -> int:
    """Bytes per element of ``dtype`` (a name such as ``"float32"`` or a numpy dtype).

    >>> dtype_bytes("float32"), dtype_bytes("double"), dtype_bytes("bf16")
    (4, 8, 2)
    """
    name = _dtype_name(dtype)
    if name not in _DTYPE_BYTES:
        raise HardwareError(f"unknown element type {name!r}; known: {', '.join(sorted(_DTYPE_BYTES))}")
    return _DTYPE_BYTES[name]


# ---------------------------------------------------------------------------
# Field checking, shared by file loading and direct construction
# ---------------------------------------------------------------------------

def _show(value: Any) -> str:
    """A value as the file would spell it, for error messages."""
    if value is None:
        return "null"  # only JSON can spell it
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "an array"
    return repr(value)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _pos_int(value: Any, path: str) -> int:
    # bool is an int subclass in Python, but `cores = true` is a mistake.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise HardwareError(f"expected a positive integer, got {_show(value)}", field=path)
    return value


def _pos_num(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise HardwareError(f"expected a positive number, got {_show(value)}", field=path)
    return float(value)


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise HardwareError(f"expected a non-empty string, got {_show(value)}", field=path)
    return value


def _choice(options: Sequence[Any]):
    def check(value: Any, path: str):
        if isinstance(value, bool) or value not in options:
            raise HardwareError(f"expected one of {', '.join(_show(o) for o in options)}, got {_show(value)}",
                                field=path)
        return value
    return check


def _text_list(value: Any, path: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise HardwareError(f"expected an array of strings, got {_show(value)}", field=path)
    for k, item in enumerate(value):
        if not isinstance(item, str):
            raise HardwareError(f"expected a string, got {_show(item)}", field=f"{path}[{k}]")
    return tuple(value)


def _optional(check):
    def run(value: Any, path: str):
        return None if value is None else check(value, path)
    return run


def _check_table(data: Mapping[str, Any], checks: Mapping[str, Any], required: Iterable[str],
                 prefix: str, what: str) -> dict:
    """Check one table of a file: no unknown fields, required ones present, each value valid."""
    for key in data:
        if key not in checks:
            close = difflib.get_close_matches(str(key), list(checks), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise HardwareError(f"unknown field{hint}; known fields of {what}: {', '.join(checks)}",
                                field=_join(prefix, str(key)))
    for key in required:
        if key not in data:
            raise HardwareError("missing required field", field=_join(prefix, key))
    return {key: checks[key](value, _join(prefix, key)) for key, value in data.items()}


# ---------------------------------------------------------------------------
# Descriptors
# ---------------------------------------------------------------------------

SHARED_SCOPES = ("core", "all")
SIMD_WIDTHS = (128, 256, 512)


@dataclass(frozen=True)
class MemoryLevel:
    """One level of a memory hierarchy.

    ``shared`` is ``"core"`` for a level each core (each SM on a GPU) has its
    own copy of, ``"all"`` for one level shared by the whole machine.  Sizes
    and bandwidths follow it: per core for ``"core"``, totals for ``"all"``.
    ``bandwidth_gbs`` is None when unknown (e.g. registers).
    """

    name: str
    size_bytes: int
    line_bytes: int
    shared: str
    bandwidth_gbs: Optional[float] = None
    associativity: Optional[int] = None
    latency_cycles: Optional[float] = None

    _CHECKS: ClassVar[dict] = {
        "name": _text,
        "size_bytes": _pos_int,
        "line_bytes": _pos_int,
        "associativity": _optional(_pos_int),
        "shared": _choice(SHARED_SCOPES),
        "bandwidth_gbs": _optional(_pos_num),
        "latency_cycles": _optional(_pos_num),
    }

    def __post_init__(self) -> None:
        # Direct construction gets the same checks (and int -> float
        # normalisation) as a file, so a descriptor is valid however it was made.
        values = _check_table({f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                              self._CHECKS, (), "", "a memory level")
        for key, value in values.items():
            object.__setattr__(self, key, value)

    @property
    def per_core(self) -> bool:
        return self.shared == "core"


class _Queries:
    """Queries the cost model asks of either kind of descriptor."""

    memory: tuple[MemoryLevel, ...]

    def _parallel_units(self) -> int:  # cores, or SMs
        raise NotImplementedError

    def level(self, name: str) -> MemoryLevel:
        """The memory level called ``name`` (case-insensitive)."""
        for lv in self.memory:
            if lv.name.casefold() == str(name).casefold():
                return lv
        raise HardwareError(f"no memory level {name!r} in {self.name}; levels: "
                            f"{', '.join(lv.name for lv in self.memory)}")

    def cache_levels(self) -> tuple[MemoryLevel, ...]:
        """The levels between registers and DRAM, innermost first."""
        return tuple(self.memory[1:-1])

    @property
    def dram(self) -> MemoryLevel:
        """The outermost level (main memory, or a GPU's global memory)."""
        return self.memory[-1]

    def bandwidth(self, level: Union[str, MemoryLevel]) -> float:
        """Bandwidth of ``level`` for the whole machine, in bytes per second.

        A per-core level's bandwidth is per core, so it is multiplied by the
        number of cores (SMs on a GPU); a shared level's is already a total.
        """
        lv = level if isinstance(level, MemoryLevel) else self.level(level)
        if lv.bandwidth_gbs is None:
            raise HardwareError(f"the bandwidth of {lv.name} is not known for {self.name}")
        per = self._parallel_units() if lv.per_core else 1
        return lv.bandwidth_gbs * 1e9 * per

    def total_bytes(self, level: Union[str, MemoryLevel]) -> int:
        """Capacity of ``level`` summed over the machine (per-core levels times cores)."""
        lv = level if isinstance(level, MemoryLevel) else self.level(level)
        return lv.size_bytes * (self._parallel_units() if lv.per_core else 1)


@dataclass(frozen=True)
class CPUDescriptor(_Queries):
    """A multicore CPU with SIMD units.

    ``memory`` runs from ``registers`` (first) to ``DRAM`` (last); sizes grow
    outward.  Peaks left as None are derived as
    cores x fma_units_per_core x 2 x lanes x clock_ghz.
    """

    kind: ClassVar[str] = "cpu"

    name: str
    cores: int
    threads_per_core: int
    simd_width_bits: int
    fma_units_per_core: int
    vector_registers: int
    clock_ghz: float
    memory: tuple[MemoryLevel, ...]
    peak_gflops_fp32: Optional[float] = None
    peak_gflops_fp64: Optional[float] = None
    notes: tuple[str, ...] = ()

    _CHECKS: ClassVar[dict] = {
        "name": _text,
        "kind": _choice(("cpu",)),
        "cores": _pos_int,
        "threads_per_core": _pos_int,
        "simd_width_bits": _choice(SIMD_WIDTHS),
        "fma_units_per_core": _pos_int,
        "vector_registers": _pos_int,
        "clock_ghz": _pos_num,
        "peak_gflops_fp32": _optional(_pos_num),
        "peak_gflops_fp64": _optional(_pos_num),
        "memory": None,  # checked level by level (an array of tables)
        "notes": _text_list,
    }
    REQUIRED: ClassVar[tuple[str, ...]] = ("name", "kind", "cores", "threads_per_core", "simd_width_bits",
                                           "fma_units_per_core", "vector_registers", "clock_ghz", "memory")

    def __post_init__(self) -> None:
        scalars = {k: getattr(self, k) for k in self._CHECKS if k not in ("kind", "memory")}
        checks = {k: v for k, v in self._CHECKS.items() if k in scalars}
        for key, value in _check_table(scalars, checks, (), "", "a cpu").items():
            object.__setattr__(self, key, value)
        memory = tuple(self.memory)
        for k, lv in enumerate(memory):
            if not isinstance(lv, MemoryLevel):
                raise HardwareError(f"expected a MemoryLevel, got {type(lv).__name__}", field=f"memory[{k}]")
        object.__setattr__(self, "memory", memory)
        if self.peak_gflops_fp32 is None:
            object.__setattr__(self, "peak_gflops_fp32", self.computed_peak_gflops("float32"))
        if self.peak_gflops_fp64 is None:
            object.__setattr__(self, "peak_gflops_fp64", self.computed_peak_gflops("float64"))
        self._check_hierarchy()

    @property
    def simd_bytes(self) -> int:
        return self.simd_width_bits // 8

    def _parallel_units(self) -> int:
        return self.cores

    def _check_hierarchy(self) -> None:
        levels = self.memory
        if len(levels) < 2:
            raise HardwareError("expected at least the levels registers and DRAM", field="memory")
        first, last = levels[0], levels[-1]
        if first.name != "registers":
            raise HardwareError(f'the first level must be "registers", got {_show(first.name)}',
                                field="memory[0].name")
        if last.name != "DRAM":
            raise HardwareError(f'the last level must be "DRAM", got {_show(last.name)}',
                                field=f"memory[{len(levels) - 1}].name")
        regs = self.vector_registers * self.simd_bytes
        if first.size_bytes != regs:
            raise HardwareError(f"registers hold vector_registers x simd_width_bits/8 = "
                                f"{self.vector_registers} x {self.simd_bytes} = {regs} bytes, got {first.size_bytes}",
                                field="memory[0].size_bytes")
        if first.shared != "core":
            raise HardwareError('registers belong to one core: expected "core"', field="memory[0].shared")
        if last.shared != "all":
            raise HardwareError('DRAM is shared by the whole machine: expected "all"',
                                field=f"memory[{len(levels) - 1}].shared")
        seen: dict[str, int] = {}
        for k, lv in enumerate(levels):
            key = lv.name.casefold()
            if key in seen:
                raise HardwareError(f"duplicate level name {_show(lv.name)} (also memory[{seen[key]}])",
                                    field=f"memory[{k}].name")
            seen[key] = k
            if k > 0 and lv.bandwidth_gbs is None:
                # Registers may leave it out; every other level is a possible bottleneck.
                raise HardwareError("missing required field", field=f"memory[{k}].bandwidth_gbs")
            if k == 0:
                continue
            prev = levels[k - 1]
            if lv.size_bytes <= prev.size_bytes:
                raise HardwareError(f"{lv.name} ({lv.size_bytes} bytes) must be larger than {prev.name} "
                                    f"({prev.size_bytes} bytes): sizes grow outward",
                                    field=f"memory[{k}].size_bytes")
            if prev.shared == "all" and lv.shared == "core":
                raise HardwareError(f"{lv.name} is per core but the inner level {prev.name} is shared by all: "
                                    f"sharing can only widen outward", field=f"memory[{k}].shared")

    def vector_lanes(self, dtype: Any) -> int:
        """Elements of ``dtype`` in one SIMD register (16 for float32 at 512 bits)."""
        return max(1, self.simd_width_bits // (8 * dtype_bytes(dtype)))

    def computed_peak_gflops(self, dtype: Any) -> float:
        """cores x fma_units_per_core x 2 (an FMA is two flops) x lanes x clock."""
        return self.cores * self.fma_units_per_core * 2 * self.vector_lanes(dtype) * self.clock_ghz

    def peak_gflops(self, dtype: Any, tensor: bool = False) -> float:
        """Peak arithmetic rate for ``dtype`` (float32 or float64) in GFLOP/s."""
        if tensor:
            raise HardwareError(f"{self.name} is a CPU descriptor: it has no tensor-core peak")
        kind = _FLOAT_KIND.get(_dtype_name(dtype))
        if kind == "fp32":
            return self.peak_gflops_fp32
        if kind == "fp64":
            return self.peak_gflops_fp64
        raise HardwareError(f"no peak rate for {_dtype_name(dtype)!r} on a CPU descriptor; known: float32, float64")


#: Keys of a GPU's ``peak_tflops`` table: plain (CUDA core) rates and dense
#: tensor-core rates (without 2:4 sparsity).  int8 is in TOPS.
GPU_PEAK_KEYS = ("fp64", "fp32", "fp16", "bf16", "fp64_tensor", "tf32_tensor", "fp16_tensor",
                 "bf16_tensor", "fp8_tensor", "int8_tensor")
GPU_PEAK_REQUIRED = ("fp64", "fp32")

#: Shared memory serves one 32-bank x 4-byte access per clock on every SM
#: since Maxwell (CUDA C++ Programming Guide, "Shared Memory" sections of the
#: compute capability chapters); the bandwidth below is derived from it.
SHARED_BYTES_PER_CLOCK = 128


@dataclass(frozen=True)
class GPUDescriptor(_Queries):
    """A CUDA GPU: SM resources, on-chip memories and peak rates.

    :attr:`memory` is built from the fields: ``registers`` and ``shared``
    (per SM, i.e. ``shared="core"`` with a "core" being an SM), ``L2`` and
    ``DRAM`` (the global memory), so the cache queries work as on a CPU.
    """

    kind: ClassVar[str] = "gpu"

    name: str
    arch: str
    sms: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_thread: int
    registers_per_sm: int
    shared_memory_per_block_bytes: int
    shared_memory_per_sm_bytes: int
    l2_bytes: int
    global_memory_bytes: int
    global_bandwidth_gbs: float
    clock_ghz: float
    peak_tflops: Mapping[str, float]
    l2_bandwidth_gbs: Optional[float] = None
    notes: tuple[str, ...] = ()

    _CHECKS: ClassVar[dict] = {
        "name": _text,
        "kind": _choice(("gpu",)),
        "arch": _text,
        "sms": _pos_int,
        "warp_size": _pos_int,
        "max_threads_per_block": _pos_int,
        "max_threads_per_sm": _pos_int,
        "max_blocks_per_sm": _pos_int,
        "registers_per_thread": _pos_int,
        "registers_per_sm": _pos_int,
        "shared_memory_per_block_bytes": _pos_int,
        "shared_memory_per_sm_bytes": _pos_int,
        "l2_bytes": _pos_int,
        "global_memory_bytes": _pos_int,
        "global_bandwidth_gbs": _pos_num,
        "clock_ghz": _pos_num,
        "peak_tflops": None,  # a table, checked key by key
        "l2_bandwidth_gbs": _optional(_pos_num),
        "notes": _text_list,
    }
    REQUIRED: ClassVar[tuple[str, ...]] = tuple(k for k in _CHECKS if k not in ("l2_bandwidth_gbs", "notes"))

    def __post_init__(self) -> None:
        scalars = {k: getattr(self, k) for k in self._CHECKS if k not in ("kind", "peak_tflops")}
        checks = {k: v for k, v in self._CHECKS.items() if k in scalars}
        for key, value in _check_table(scalars, checks, (), "", "a gpu").items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "peak_tflops", _check_peaks(self.peak_tflops, "peak_tflops"))
        self._check_resources()

    def __hash__(self) -> int:
        # peak_tflops is a read-only mapping, which is not hashable itself.
        return hash(tuple((f.name, tuple(sorted(self.peak_tflops.items())) if f.name == "peak_tflops"
                           else getattr(self, f.name)) for f in dataclasses.fields(self)))

    def __reduce__(self):
        # A mappingproxy cannot be pickled; rebuild from a plain dict so
        # descriptors can go to worker processes (and through copy.deepcopy).
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["peak_tflops"] = dict(self.peak_tflops)
        return (_make_gpu, (values,))

    def _parallel_units(self) -> int:
        return self.sms

    def _check_resources(self) -> None:
        if not re.fullmatch(r"sm_\d+[a-z]?", self.arch):
            raise HardwareError(f'expected a CUDA architecture such as "sm_90", got {_show(self.arch)}', field="arch")
        if self.warp_size & (self.warp_size - 1):
            raise HardwareError(f"expected a power of two, got {self.warp_size}", field="warp_size")
        if self.max_threads_per_block % self.warp_size:
            raise HardwareError(f"expected a multiple of warp_size ({self.warp_size}), got {self.max_threads_per_block}",
                                field="max_threads_per_block")
        pairs = [
            ("max_threads_per_block", "max_threads_per_sm"),
            ("registers_per_thread", "registers_per_sm"),
            ("shared_memory_per_block_bytes", "shared_memory_per_sm_bytes"),
        ]
        for small, big in pairs:
            if getattr(self, small) > getattr(self, big):
                raise HardwareError(f"{getattr(self, small)} exceeds {big} ({getattr(self, big)})", field=small)
        if self.l2_bytes >= self.global_memory_bytes:
            raise HardwareError(f"L2 ({self.l2_bytes} bytes) must be smaller than global_memory_bytes "
                                f"({self.global_memory_bytes}): sizes grow outward", field="l2_bytes")

    @property
    def memory(self) -> tuple[MemoryLevel, ...]:  # type: ignore[override]
        # 32-bit registers; the L2 line is 128 bytes (four 32-byte sectors) and
        # shared memory is addressed in 4-byte banks.
        return (
            MemoryLevel("registers", self.registers_per_sm * 4, 4, "core"),
            MemoryLevel("shared", self.shared_memory_per_sm_bytes, 4, "core",
                        bandwidth_gbs=SHARED_BYTES_PER_CLOCK * self.clock_ghz),
            MemoryLevel("L2", self.l2_bytes, 128, "all", bandwidth_gbs=self.l2_bandwidth_gbs),
            MemoryLevel("DRAM", self.global_memory_bytes, 128, "all", bandwidth_gbs=self.global_bandwidth_gbs),
        )

    def vector_lanes(self, dtype: Any) -> int:
        """Threads that execute one instruction together: the warp (for every type)."""
        dtype_bytes(dtype)  # still reject unknown types
        return self.warp_size

    def peak_gflops(self, dtype: Any, tensor: bool = False) -> float:
        """Peak rate for ``dtype`` in GFLOP/s; ``tensor=True`` asks for the tensor-core rate."""
        name = _dtype_name(dtype)
        kind = _FLOAT_KIND.get(name)
        key = f"{kind}_tensor" if tensor else kind
        if kind is None or key not in self.peak_tflops:
            raise HardwareError(f"no {'tensor-core ' if tensor else ''}peak rate for {name!r} on {self.name}; "
                                f"known: {', '.join(self.peak_tflops)}")
        return self.peak_tflops[key] * 1000.0


def _make_gpu(values: dict) -> GPUDescriptor:
    return GPUDescriptor(**values)


def _check_peaks(value: Any, path: str) -> Mapping[str, float]:
    if not isinstance(value, Mapping):
        raise HardwareError(f"expected a table, got {_show(value)}", field=path)
    checked = _check_table(value, {k: _pos_num for k in GPU_PEAK_KEYS}, GPU_PEAK_REQUIRED, path, "peak_tflops")
    # Keep the documented key order whatever order the file used.
    return MappingProxyType({k: checked[k] for k in GPU_PEAK_KEYS if k in checked})


Hardware = Union[CPUDescriptor, GPUDescriptor]


# ---------------------------------------------------------------------------
# Reading descriptors
# ---------------------------------------------------------------------------

def from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Hardware:
    """A descriptor from the parsed contents of a file (see the README for the format).

    ``source`` names the origin in error messages.
    """
    try:
        if not isinstance(data, Mapping):
            raise HardwareError(f"expected a table at the top level, got {_show(data)}")
        kind = data.get("kind")
        if kind is None:
            raise HardwareError('missing required field (expected "cpu" or "gpu")', field="kind")
        if kind == "cpu":
            return _cpu_from_dict(data)
        if kind == "gpu":
            return _gpu_from_dict(data)
        raise HardwareError(f'expected one of "cpu", "gpu", got {_show(kind)}', field="kind")
    except HardwareError as err:
        raise err.with_source(source) from None


def _cpu_from_dict(data: Mapping[str, Any]) -> CPUDescriptor:
    checks = dict(CPUDescriptor._CHECKS)
    checks["memory"] = lambda value, path: value  # levels are checked below, with their paths
    top = _check_table(data, checks, CPUDescriptor.REQUIRED, "", "a cpu")
    raw_levels = top.pop("memory")
    top.pop("kind")
    if not isinstance(raw_levels, (list, tuple)) or not all(isinstance(x, Mapping) for x in raw_levels):
        raise HardwareError(f"expected an array of tables ([[memory]]), got {_show(raw_levels)}", field="memory")
    simd_bytes = top["simd_width_bits"] // 8
    levels = []
    for k, raw in enumerate(raw_levels):
        prefix = f"memory[{k}]"
        raw = dict(raw)
        is_regs = k == 0 and raw.get("name") == "registers"
        if is_regs:
            # The register file's size and "line" follow from the ISA fields;
            # a file may leave them out (and is checked against them if not).
            raw.setdefault("size_bytes", top["vector_registers"] * simd_bytes)
            raw.setdefault("line_bytes", simd_bytes)
        raw.setdefault("line_bytes", 64)
        values = _check_table(raw, MemoryLevel._CHECKS, ("name", "size_bytes", "shared"), prefix, "a memory level")
        levels.append(MemoryLevel(**values))
    return CPUDescriptor(memory=tuple(levels), **top)


def _gpu_from_dict(data: Mapping[str, Any]) -> GPUDescriptor:
    checks = dict(GPUDescriptor._CHECKS)
    checks["peak_tflops"] = _check_peaks
    top = _check_table(data, checks, GPUDescriptor.REQUIRED, "", "a gpu")
    top.pop("kind")
    return GPUDescriptor(**top)


def _read_file(path: Path, shown: str) -> Hardware:
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise HardwareError("expected a .toml or .json file", source=shown)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HardwareError(f"cannot read the file: {exc.strerror or exc}", source=shown) from None
    except UnicodeDecodeError as exc:
        raise HardwareError(f"not UTF-8 text ({exc.reason})", source=shown) from None
    try:
        data = json.loads(text) if suffix == ".json" else tomllib.loads(text)
    except json.JSONDecodeError as exc:
        raise HardwareError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", source=shown) from None
    except tomllib.TOMLDecodeError as exc:
        raise HardwareError(f"invalid TOML: {exc}", source=shown) from None
    return from_dict(data, source=shown)


def presets() -> list[str]:
    """The preset names :func:`load` accepts, ``host`` included."""
    names = {p.stem for p in PRESET_DIR.glob("*.toml")} if PRESET_DIR.is_dir() else set()
    return sorted(names | {HOST})


_LOADED: Dict[str, Hardware] = {}


def load_once(name_or_path: Union[str, os.PathLike, Hardware]) -> Hardware:
    """:func:`load`, remembered per process for a name or path (a descriptor object is returned as is):
    the compiler, the cost model and the tuner ask for the same descriptor many times.

    >>> load_once("x86-avx2") is load_once("x86-avx2")
    True
    """
    if not isinstance(name_or_path, str):
        return load(name_or_path)
    if name_or_path not in _LOADED:
        _LOADED[name_or_path] = load(name_or_path)
    return _LOADED[name_or_path]


def load(name_or_path: Union[str, os.PathLike, Hardware]) -> Hardware:
    """A descriptor from a preset name, ``"host"`` or a ``.toml``/``.json`` file path.

    A string is a path when it ends in ``.toml``/``.json`` or contains a path
    separator; otherwise it names a preset.  A descriptor is returned as is.
    """
    if isinstance(name_or_path, (CPUDescriptor, GPUDescriptor)):
        return name_or_path
    if isinstance(name_or_path, os.PathLike):
        return _read_file(Path(name_or_path), os.fspath(name_or_path))
    if not isinstance(name_or_path, str):
        raise HardwareError(f"expected a preset name or a file path, got {type(name_or_path).__name__}")
    text = name_or_path.strip()
    if text.lower().endswith((".toml", ".json")) or "/" in text or os.sep in text:
        return _read_file(Path(text).expanduser(), text)
    key = text.lower()
    if key == HOST:
        return detect_host()
    path = PRESET_DIR / f"{key}.toml"
    if not path.is_file():
        raise HardwareError(f"unknown hardware preset {text!r}; presets: {', '.join(presets())} "
                            f"(or give the path of a .toml or .json file)")
    return _read_file(path, str(path))


# ---------------------------------------------------------------------------
# Writing descriptors
# ---------------------------------------------------------------------------

def to_dict(hw: Hardware) -> dict:
    """The descriptor as plain data in the file format (None fields left out).

    ``from_dict(to_dict(hw)) == hw``; derived values (peaks, register size)
    are written out, so the dict is self-contained.
    """
    def level(lv: MemoryLevel) -> dict:
        # In the README's order (the checks table), which is how files are written by hand.
        return {k: getattr(lv, k) for k in MemoryLevel._CHECKS if getattr(lv, k) is not None}

    out: dict[str, Any] = {"name": hw.name, "kind": hw.kind}
    for f in dataclasses.fields(hw):
        value = getattr(hw, f.name)
        if f.name == "name" or value is None:
            continue
        if f.name == "memory":
            value = [level(lv) for lv in value]
        elif f.name == "peak_tflops":
            value = dict(value)
        elif f.name == "notes":
            if not value:
                continue
            value = list(value)
        out[f.name] = value
    return out


def to_json(hw: Hardware) -> str:
    """The descriptor as a JSON document that :func:`load` reads back."""
    return json.dumps(to_dict(hw), indent=2) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # shortest round-tripping form; valid TOML for finite floats
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON string escapes are TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a TOML value")


def to_toml(hw: Hardware) -> str:
    """The descriptor as a TOML document that :func:`load` reads back."""
    data = to_dict(hw)
    lines = []
    tables = []
    for key, value in data.items():
        # Tables must come after every plain key of the root table.
        if isinstance(value, Mapping) or (isinstance(value, list) and value and isinstance(value[0], Mapping)):
            tables.append((key, value))
        elif isinstance(value, list) and len(value) > 1:
            # One item per line: notes are sentences.
            lines += [f"{key} = ["] + [f"    {_toml_value(v)}," for v in value] + ["]"]
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in tables:
        rows = value if isinstance(value, list) else [value]
        header = f"[[{key}]]" if isinstance(value, list) else f"[{key}]"
        for row in rows:
            lines += ["", header] + [f"{k} = {_toml_value(v)}" for k, v in row.items()]
    return "\n".join(lines) + "\n"


def _human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            q = n / size
            return f"{q:.0f} {unit}" if n % size == 0 else f"{q:.1f} {unit}"
    return f"{n} B"


def _num(x: Optional[float]) -> str:
    if x is None:
        return "-"
    if x == int(x):
        return str(int(x))
    # Keep one decimal on big figures (1978.9 TFLOP/s) instead of going to exponents.
    return f"{x:.1f}" if abs(x) >= 100 else f"{x:.4g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt_row = lambda r: indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt_row(header), fmt_row(["-" * w for w in widths]), *[fmt_row(r) for r in rows]]


def _level_rows(hw: Hardware, unit: str) -> list[list[str]]:
    rows = []
    for lv in hw.memory:
        if lv.bandwidth_gbs is None:
            bw = "-"
        elif lv.per_core:
            bw = f"{_num(lv.bandwidth_gbs)}/{unit} ({_num(hw.bandwidth(lv) / 1e9)} total)"
        else:
            bw = f"{_num(lv.bandwidth_gbs)} total"
        rows.append([lv.name, _human_bytes(lv.size_bytes), str(lv.line_bytes),
                     "-" if lv.associativity is None else str(lv.associativity),
                     f"per {unit}" if lv.per_core else "all", bw, _num(lv.latency_cycles)])
    return rows


def format(hw: Hardware) -> str:  # noqa: A001 - the documented API name (`polytile hw show`)
    """A readable multi-line description: the machine, its peaks and the memory-level table."""
    out = []
    if isinstance(hw, CPUDescriptor):
        out.append(f"{hw.name}  (cpu)")
        out.append(f"  cores        {hw.cores} x {hw.threads_per_core} thread{'s' if hw.threads_per_core > 1 else ''}")
        out.append(f"  SIMD         {hw.simd_width_bits}-bit: {hw.vector_lanes('float32')} x fp32, "
                   f"{hw.vector_lanes('float64')} x fp64; {hw.vector_registers} vector registers; "
                   f"{hw.fma_units_per_core} FMA unit{'s' if hw.fma_units_per_core > 1 else ''}/core")
        out.append(f"  clock        {hw.clock_ghz:.3g} GHz")
        peaks = []
        for dt, value in (("fp32", hw.peak_gflops_fp32), ("fp64", hw.peak_gflops_fp64)):
            derived = math.isclose(value, hw.computed_peak_gflops(dt), rel_tol=1e-9)
            peaks.append(f"{dt} {_num(value)}" + (" (derived)" if derived else ""))
        out.append(f"  peak GFLOP/s {', '.join(peaks)}")
        unit = "core"
    else:
        out.append(f"{hw.name}  (gpu, {hw.arch})")
        out.append(f"  SMs          {hw.sms}; warp {hw.warp_size}; clock {hw.clock_ghz:.3g} GHz")
        out.append(f"  threads      {hw.max_threads_per_block}/block, {hw.max_threads_per_sm}/SM, "
                   f"{hw.max_blocks_per_sm} blocks/SM")
        out.append(f"  registers    {hw.registers_per_thread}/thread, {hw.registers_per_sm}/SM")
        out.append(f"  shared mem   {_human_bytes(hw.shared_memory_per_block_bytes)}/block, "
                   f"{_human_bytes(hw.shared_memory_per_sm_bytes)}/SM")
        out.append(f"  peak TFLOP/s {', '.join(f'{k} {_num(v)}' for k, v in hw.peak_tflops.items())}")
        unit = "SM"
    out.append("  memory (bandwidth in GB/s, GB = 1e9 bytes; latency in cycles):")
    out += _table(["level", "size", "line", "ways", "shared", "bandwidth", "latency"], _level_rows(hw, unit), "    ")
    if hw.notes:
        out.append("  notes:")
        out += [f"    - {note}" for note in hw.notes]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Host detection (Linux sysfs and procfs)
# ---------------------------------------------------------------------------

# Stated defaults for facts the host does not reveal (each use is noted).
DEFAULT_CLOCK_GHZ = 2.0
DEFAULT_DRAM_BYTES = 8 << 30
DEFAULT_LINE_BYTES = 64
# Fallback hierarchy when sysfs has no cache information: a common
# desktop/server shape (32 KiB L1d and 1 MiB L2 per core, 2 MiB of shared L3 per core).
DEFAULT_CACHES = ((1, 32 << 10, 8, "core"), (2, 1 << 20, 16, "core"), (3, 2 << 20, 16, "all"))
# Bandwidths cannot be read from sysfs.  Defaults, in bytes per cycle per core:
# two vector loads per cycle from L1, 32 from L2, 16 from shared levels; DRAM
# at 8 GB/s per core, between 16 and 200 GB/s in total.
L2_BYTES_PER_CYCLE = 32
SHARED_BYTES_PER_CYCLE_PER_CORE = 16
DRAM_GBS_PER_CORE, DRAM_GBS_MIN, DRAM_GBS_MAX = 8.0, 16.0, 200.0
# More shared cache than this per CPU sharing it is not a real part's (the
# largest stacked-cache parts have ~12 MiB per core); hypervisors report such sizes.
PLAUSIBLE_CACHE_PER_CPU = 32 << 20


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _parse_size(text: str) -> Optional[int]:
    """sysfs cache sizes: ``48K``, ``2048K``, ``32M`` (binary units) or bytes."""
    m = re.fullmatch(r"(\d+)\s*([KMG]?)i?B?", text.strip(), re.IGNORECASE)
    if not m:
        return None
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


def _count_cpu_list(text: str) -> Optional[int]:
    """Number of CPUs in a sysfs list such as ``0-3,8-11``."""
    total = 0
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            lo, _, hi = part.partition("-")
            total += int(hi or lo) - int(lo) + 1
    except ValueError:
        return None
    return total or None


def parse_cpuinfo(text: str) -> tuple[dict[str, str], int]:
    """The first processor's ``key: value`` fields (keys lower-cased) and the number of processors.

    >>> parse_cpuinfo("processor : 0\nmodel name : X\n\nprocessor : 1\nmodel name : X\n")
    ({'processor': '0', 'model name': 'X'}, 2)
    """
    first: dict[str, str] = {}
    count = 0
    for block in re.split(r"\n\s*\n", text.strip()):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip().lower()] = value.strip()
        if "processor" in fields:
            count += 1
        if not first and fields:
            first = fields
    return first, count


def _detect_caches(sysfs: Path, threads_per_core: int, notes: list[str]) -> list[tuple[int, int, int, Optional[int], str, int]]:
    """(level, size, line, ways, shared, sharing CPUs) of cpu0's data/unified caches."""
    cache_dir = sysfs / "cpu0" / "cache"
    found = {}
    indexes = sorted(cache_dir.glob("index*"), key=lambda p: int(re.sub(r"\D", "", p.name) or 0)) \
        if cache_dir.is_dir() else []
    for d in indexes:
        ctype = (_read(d / "type") or "").lower()
        if ctype == "instruction":
            continue
        level_text, size_text = _read(d / "level"), _read(d / "size")
        if level_text is None or not level_text.isdigit() or size_text is None or _parse_size(size_text) is None:
            notes.append(f"{d}: no readable level/size; cache skipped")
            continue
        level = int(level_text)
        if level in found:
            continue  # one entry per level (the first data or unified cache)
        line_text = _read(d / "coherency_line_size")
        if line_text and line_text.isdigit() and int(line_text) > 0:
            line = int(line_text)
        else:
            line = DEFAULT_LINE_BYTES
            notes.append(f"L{level} line size unknown: default {line} bytes")
        ways_text = _read(d / "ways_of_associativity")
        ways = int(ways_text) if ways_text and ways_text.isdigit() and int(ways_text) > 0 else None
        sharing_text = _read(d / "shared_cpu_list")
        sharing = _count_cpu_list(sharing_text) if sharing_text else None
        if sharing is None:
            # Without the sharing list, follow the usual shape: L1/L2 private, L3+ shared.
            sharing = threads_per_core if level <= 2 else None
            notes.append(f"L{level} sharing unknown: assumed {'per core' if level <= 2 else 'shared by all'}")
        shared = "core" if sharing is not None and sharing <= threads_per_core else "all"
        found[level] = (level, _parse_size(size_text), line, ways, shared, sharing or 0)
    return [found[k] for k in sorted(found)]


def detect_host(sysfs: Union[str, os.PathLike] = "/sys/devices/system/cpu",
                procfs: Union[str, os.PathLike] = "/proc",
                cpu_count: Optional[int] = None) -> CPUDescriptor:
    """Describe the running Linux machine from sysfs and procfs.

    ``sysfs`` is the ``/sys/devices/system/cpu`` directory and ``procfs`` the
    ``/proc`` directory (tests point them at fake trees); ``cpu_count`` the
    usable logical CPUs (default: the process's affinity mask).  Every fact
    that cannot be read gets a stated default, recorded in ``notes``.
    """
    sysfs, procfs = Path(sysfs), Path(procfs)
    notes: list[str] = []

    cpuinfo_text = _read(procfs / "cpuinfo")
    info, processors = parse_cpuinfo(cpuinfo_text) if cpuinfo_text else ({}, 0)
    if not info:
        notes.append(f"{procfs / 'cpuinfo'} unreadable: model, ISA and clock defaulted")
    flags = set((info.get("flags") or info.get("features") or "").split())

    # Logical CPUs this process may run on (what OpenMP will use).
    if cpu_count is None:
        try:
            cpu_count = len(os.sched_getaffinity(0))
            total = os.cpu_count()
            if total and total > cpu_count:
                notes.append(f"process affinity allows {cpu_count} of {total} CPUs; described {cpu_count}")
        except (AttributeError, OSError):
            cpu_count = os.cpu_count() or processors or None
        if not cpu_count:
            cpu_count = 1
            notes.append("CPU count unknown: default 1")
    cpu_count = _pos_int(cpu_count, "cpu_count")

    siblings = _read(sysfs / "cpu0" / "topology" / "thread_siblings_list")
    threads_per_core = _count_cpu_list(siblings) if siblings else None
    if threads_per_core is None:
        try:
            threads_per_core = max(1, int(info["siblings"]) // int(info["cpu cores"]))
        except (KeyError, ValueError, ZeroDivisionError):
            threads_per_core = 1
            notes.append("threads per core unknown: default 1")
    threads_per_core = min(threads_per_core, cpu_count)
    cores = max(1, cpu_count // threads_per_core)

    # Vector ISA from the flags (x86 "flags", Arm "Features").
    if "avx512f" in flags:
        simd, vregs = 512, 32
    elif "avx2" in flags or "avx" in flags:
        simd, vregs = 256, 16
    elif "asimd" in flags:  # Armv8 NEON: 128-bit, 32 registers
        simd, vregs = 128, 32
    elif flags:
        simd, vregs = 128, 16  # SSE
    else:
        simd, vregs = 256, 16
        notes.append("no CPU flags: assumed 256-bit SIMD (AVX2) with 16 vector registers")
    fma_units = 2 if ({"fma", "avx512f", "asimd"} & flags) else 1
    notes.append(f"fma_units_per_core not visible in cpuinfo: default {fma_units}"
                 + (" (FMA-capable ISA; some parts have only 1)" if fma_units == 2 else ""))

    clock = None
    max_khz = _read(sysfs / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    if max_khz and max_khz.isdigit() and int(max_khz) > 0:
        clock = int(max_khz) / 1e6
    if clock is None:
        try:
            mhz = float(info.get("cpu mhz", ""))
            if mhz > 0:
                clock = mhz / 1000
                notes.append("clock from cpuinfo 'cpu MHz' (the current frequency, not the maximum)")
        except ValueError:
            pass
    if clock is None:
        m = re.search(r"@\s*([\d.]+)\s*GHz", info.get("model name", ""))
        if m:
            clock = float(m.group(1))
            notes.append("clock from the model name (the base frequency)")
    if clock is None:
        clock = DEFAULT_CLOCK_GHZ
        notes.append(f"clock unknown: default {clock} GHz")

    if "hypervisor" in flags:
        notes.append("running under a hypervisor: the cache sizes are what it reports, not necessarily the real part's")

    dram_bytes = None
    for line in (_read(procfs / "meminfo") or "").splitlines():
        m = re.match(r"MemTotal:\s*(\d+)\s*kB", line)
        if m:
            dram_bytes = int(m.group(1)) * 1024
    if not dram_bytes:
        dram_bytes = DEFAULT_DRAM_BYTES
        notes.append(f"memory size unknown: default {_human_bytes(dram_bytes)}")

    caches = _detect_caches(sysfs, threads_per_core, notes)
    if not caches:
        notes.append("no cache information in sysfs: assumed 32 KiB L1d and 1 MiB L2 per core, "
                     "2 MiB of shared L3 per core")
        caches = [(lvl, size * (cores if shared == "all" else 1), DEFAULT_LINE_BYTES, ways, shared,
                   cpu_count if shared == "all" else threads_per_core)
                  for lvl, size, ways, shared in DEFAULT_CACHES]

    simd_bytes = simd // 8
    levels = [MemoryLevel("registers", vregs * simd_bytes, simd_bytes, "core")]
    for lvl, size, line, ways, shared, sharing in caches:
        name = f"L{lvl}"
        prev = levels[-1]
        if shared == "all" and sharing and size / sharing > PLAUSIBLE_CACHE_PER_CPU:
            notes.append(f"{name} of {_human_bytes(size)} for {sharing} CPU{'s' if sharing > 1 else ''} is larger "
                         f"than any real part's; kept as sysfs reports it")
        if size <= prev.size_bytes or size >= dram_bytes or (prev.shared == "all" and shared == "core"):
            notes.append(f"{name} ({_human_bytes(size)}, {shared}) does not fit between {prev.name} and DRAM; left out")
            continue
        if lvl == 1:
            gbs = 2 * simd_bytes * clock
        elif shared == "core":
            gbs = L2_BYTES_PER_CYCLE * clock
        else:
            gbs = SHARED_BYTES_PER_CYCLE_PER_CORE * clock * cores
        levels.append(MemoryLevel(name, size, line, shared, bandwidth_gbs=round(gbs, 3), associativity=ways))
    dram_gbs = min(max(DRAM_GBS_PER_CORE * cores, DRAM_GBS_MIN), DRAM_GBS_MAX)
    levels.append(MemoryLevel("DRAM", dram_bytes, DEFAULT_LINE_BYTES, "all", bandwidth_gbs=dram_gbs))
    notes.append(f"bandwidths are defaults (not detectable): L1 two vector loads/cycle/core, private L2 "
                 f"{L2_BYTES_PER_CYCLE} B/cycle/core, shared caches {SHARED_BYTES_PER_CYCLE_PER_CORE} B/cycle/core, "
                 f"DRAM {DRAM_GBS_PER_CORE:g} GB/s per core within {DRAM_GBS_MIN:g}..{DRAM_GBS_MAX:g} GB/s")

    model = info.get("model name") or info.get("model") or ""
    return CPUDescriptor(
        name=f"host: {model}" if model else "host",
        cores=cores,
        threads_per_core=threads_per_core,
        simd_width_bits=simd,
        fma_units_per_core=fma_units,
        vector_registers=vregs,
        clock_ghz=round(clock, 6),
        memory=tuple(levels),
        notes=tuple(notes),
    )
