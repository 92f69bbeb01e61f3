"""A descriptor as readable text (what ``polytile hw show`` prints)."""
from __future__ import annotations

import math
from typing import Optional, Sequence

from .descriptor import CPUDescriptor, Hardware


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


def derived_fields(hw: Hardware) -> list[str]:
    """The fields of ``hw`` computed from its other facts rather than given: a CPU's peaks that its file
    left out (cores x FMA units x 2 x lanes x clock).

    >>> from .read import load
    >>> derived_fields(load("x86-avx2"))
    ['peak_gflops_fp32', 'peak_gflops_fp64']
    """
    if not isinstance(hw, CPUDescriptor):
        return []
    return [name for name, dt in (("peak_gflops_fp32", "fp32"), ("peak_gflops_fp64", "fp64"))
            if math.isclose(getattr(hw, name), hw.computed_peak_gflops(dt), rel_tol=1e-9)]


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
        derived = derived_fields(hw)
        for dt, name in (("fp32", "peak_gflops_fp32"), ("fp64", "peak_gflops_fp64")):
            peaks.append(f"{dt} {_num(getattr(hw, name))}" + (" (derived)" if name in derived else ""))
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
