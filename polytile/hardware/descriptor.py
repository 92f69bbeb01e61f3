"""The descriptor types: a memory level, a CPU and a GPU (frozen, validated dataclasses).

:data:`Hardware` is either descriptor; both answer the same queries
(:class:`_Queries`) about levels, bandwidths and peak rates.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, Optional, Union

from .checks import (HardwareError, _check_table, _choice, _optional, _pos_int, _pos_num, _show, _text,
                     _text_list)
from .element_types import _FLOAT_KIND, _dtype_name, dtype_bytes


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
