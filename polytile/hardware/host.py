"""Describing the running Linux machine from sysfs and procfs (the ``host`` preset).

Facts the host does not reveal (bandwidths, often FMA units) get stated
defaults, each recorded in the descriptor's ``notes``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional, Union

from .checks import _pos_int
from .cpu_models import cpuid_numbers, fma_units, l2_bytes_per_cycle
from .descriptor import CPUDescriptor, MemoryLevel
from .display import _human_bytes


# Stated defaults for facts the host does not reveal (each use is noted).
DEFAULT_CLOCK_GHZ = 2.0
DEFAULT_DRAM_BYTES = 8 << 30
DEFAULT_LINE_BYTES = 64
# Fallback hierarchy when sysfs has no cache information: a common
# desktop/server shape (32 KiB L1d and 1 MiB L2 per core, 2 MiB of shared L3 per core).
DEFAULT_CACHES = ((1, 32 << 10, 8, "core"), (2, 1 << 20, 16, "core"), (3, 2 << 20, 16, "all"))
# Bandwidths cannot be read from sysfs.  Defaults, in bytes per cycle per core:
# two vector loads per cycle from L1, 32 from L2, 16 from shared levels; DRAM
# at 16 GB/s per core, between 16 and 200 GB/s in total.  One core of the Zen 5 VM
# reads memory at 24 GB/s, two at 37 (numpy and polytile sums of 1 GB); at 8 GB/s
# per core the model saw every product that streams an operand from memory as
# bound by it, and could not tell its cache-level costs apart (64x1024 @ 1024^2
# re-read its 512-column panels from L3: 0.52 ms, 0.34 with them in L2).
L2_BYTES_PER_CYCLE = 32
SHARED_BYTES_PER_CYCLE_PER_CORE = 16
DRAM_GBS_PER_CORE, DRAM_GBS_MIN, DRAM_GBS_MAX = 16.0, 16.0, 200.0
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
    r"""The first processor's ``key: value`` fields (keys lower-cased) and the number of processors.

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
    ids = cpuid_numbers(info)
    known = fma_units(*ids, flags) if ids is not None else None
    l2_known = l2_bytes_per_cycle(*ids) if ids is not None else None
    l2_bpc = l2_known[0] if l2_known is not None else L2_BYTES_PER_CYCLE
    if l2_known is not None:
        notes.append(f"private L2 bandwidth from the CPU model: {l2_known[1]}")
    if known is not None:
        fma_units_count = known[0]
        notes.append(f"fma_units_per_core = {known[0]} from the CPU model: {known[1]}")
    else:
        fma_units_count = 2 if ({"fma", "avx512f", "asimd"} & flags) else 1
        notes.append(f"fma_units_per_core not visible in cpuinfo: default {fma_units_count}"
                     + (" (FMA-capable ISA; some parts have only 1)" if fma_units_count == 2 else ""))

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
            gbs = l2_bpc * clock
        else:
            gbs = SHARED_BYTES_PER_CYCLE_PER_CORE * clock * cores
        levels.append(MemoryLevel(name, size, line, shared, bandwidth_gbs=round(gbs, 3), associativity=ways))
    dram_gbs = min(max(DRAM_GBS_PER_CORE * cores, DRAM_GBS_MIN), DRAM_GBS_MAX)
    levels.append(MemoryLevel("DRAM", dram_bytes, DEFAULT_LINE_BYTES, "all", bandwidth_gbs=dram_gbs))
    notes.append(f"bandwidths are defaults (not detectable): L1 two vector loads/cycle/core, private L2 "
                 f"{l2_bpc} B/cycle/core, shared caches {SHARED_BYTES_PER_CYCLE_PER_CORE} B/cycle/core, "
                 f"DRAM {DRAM_GBS_PER_CORE:g} GB/s per core within {DRAM_GBS_MIN:g}..{DRAM_GBS_MAX:g} GB/s")

    model = info.get("model name") or info.get("model") or ""
    return CPUDescriptor(
        name=f"host: {model}" if model else "host",
        cores=cores,
        threads_per_core=threads_per_core,
        simd_width_bits=simd,
        fma_units_per_core=fma_units_count,
        vector_registers=vregs,
        clock_ghz=round(clock, 6),
        memory=tuple(levels),
        notes=tuple(notes),
    )
