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

from .checks import HardwareError
from .descriptor import CPUDescriptor, GPUDescriptor, Hardware, MemoryLevel
from .display import derived_fields, format
from .element_types import dtype_bytes
# load_once, parse_cpuinfo and the host defaults are outside __all__ but read as
# hardware.<name> by the compiler, the tuner, compare and the tests.
from .host import DEFAULT_CLOCK_GHZ, DEFAULT_DRAM_BYTES, detect_host, parse_cpuinfo
from .machine_kind import fingerprint, host_fingerprint, kind
from .read import PRESET_DIR, from_dict, load, load_once, presets, source_kind
from .write import to_dict, to_json, to_toml

__all__ = [
    "HardwareError", "MemoryLevel", "CPUDescriptor", "GPUDescriptor", "Hardware",
    "load", "from_dict", "presets", "source_kind", "detect_host", "format", "derived_fields", "to_dict", "to_toml",
    "to_json",
    "dtype_bytes", "PRESET_DIR", "kind", "fingerprint", "host_fingerprint",
]
