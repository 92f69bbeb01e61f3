"""``polytile roofline``: a machine's roofline from its hardware descriptor, with kernels placed on it.

The ceilings are the descriptor's (:mod:`polytile.hardware`): the peak arithmetic rate, and one
bandwidth slope per memory level (``GFLOP/s = bandwidth x intensity``), log-log.  A kernel is
placed at its arithmetic intensity -- flops over the bytes DRAM delivers, both from the cost model
(:func:`polytile.cost.predict` of its schedule; docs/cost-model.md) -- at the rate the model
predicts (hollow marker) and, when measured, the rate it attained (filled marker).  Only the DRAM
slope bounds a kernel at that intensity; the slopes of the inner levels are drawn for reference
(a kernel whose working set fits in a cache is bounded by that cache's slope at its own,
higher, intensity for that level).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from ..errors import PlotError
from ..hardware import HardwareError, dtype_bytes, load
from . import _mpl

#: Artist ids: one "kernel" marker per kernel (at the predicted rate), one "measured" marker per
#: kernel that was measured, one "ceiling" line per compute ceiling and one "slope" per memory level.
GID_KERNEL = "kernel"
GID_MEASURED = "measured"
GID_CEILING = "ceiling"
GID_SLOPE = "slope"


@dataclass(frozen=True)
class KernelPoint:
    """A kernel on the roofline: its flops and DRAM bytes per call (the model's), the predicted and the
    measured seconds per call (None when not known), its element type and what the model says bounds it."""

    name: str
    flops: float
    dram_bytes: float
    predicted_s: Optional[float] = None
    measured_s: Optional[float] = None
    dtype: str = "float32"
    bound: str = ""

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: flops per byte from DRAM (inf when the model moves no DRAM bytes)."""
        return self.flops / self.dram_bytes if self.dram_bytes > 0 else math.inf

    @property
    def predicted_gflops(self) -> Optional[float]:
        return self.flops / self.predicted_s / 1e9 if self.predicted_s else None

    @property
    def measured_gflops(self) -> Optional[float]:
        return self.flops / self.measured_s / 1e9 if self.measured_s else None


def descriptor(hw):
    """A hardware descriptor from a descriptor, a preset name, ``"host"`` or a file."""
    return hw if hasattr(hw, "memory") and hasattr(hw, "peak_gflops") else load(hw)


def peak_gflops(hw, dtype: str) -> float:
    """The descriptor's peak for ``dtype``; integer types count at the float peak of their width (as the cost model does)."""
    try:
        return float(hw.peak_gflops(dtype))
    except HardwareError:
        return float(hw.peak_gflops("float64" if dtype_bytes(dtype) >= 8 else "float32"))


def slopes(hw) -> Dict[str, float]:
    """GB/s of every memory level with a known bandwidth (the whole machine's), innermost first."""
    out: Dict[str, float] = {}
    for lv in hw.memory:
        if lv.bandwidth_gbs is not None:
            out[lv.name] = hw.bandwidth(lv) / 1e9
    return out


def roof(hw, intensity: float, dtype: str = "float32") -> float:
    """The attainable GFLOP/s at ``intensity`` flops per DRAM byte: min(peak, DRAM bandwidth x intensity)."""
    dram = hw.bandwidth(hw.dram) / 1e9
    return min(peak_gflops(hw, dtype), dram * intensity)


def kernel_point(schedule, hw, *, name: Optional[str] = None, measured_s: Optional[float] = None) -> KernelPoint:
    """A :class:`KernelPoint` from the cost model's prediction of ``schedule`` on ``hw`` (a CPU descriptor,
    a preset name or ``"host"``); ``measured_s`` is a measured time per call to place it by, if any.

        >>> # p = kernel_point(polytile.schedule("examples/matmul.tile", dims="M=512,N=512,K=512", hardware="host"),
        >>> #                  "host", name="matmul 512")
        >>> # p.intensity -> flops per DRAM byte, p.predicted_gflops -> the model's rate
    """
    from ..cost import predict

    hw = descriptor(hw)
    try:
        pred = predict(schedule, hw)
    except HardwareError as exc:
        raise PlotError(f"cannot place kernels on {hw.name}: {exc}") from None
    meta = dict(getattr(schedule, "meta", ()) or ())
    dtypes = meta.get("dtypes") or ["float32"]
    # The widest input type decides the peak (float64 anywhere makes the arithmetic float64); of equal widths a
    # float one (an int32 size input beside float32 arrays: the arithmetic is float32).
    dtype = max(dtypes, key=lambda d: (dtype_bytes(d), str(d).startswith(("float", "bfloat")), str(d)))
    return KernelPoint(name or schedule.scop.name, float(pred.flops), float(pred.traffic.get(hw.dram.name, 0.0)),
                       float(pred.time_s), measured_s, str(dtype), pred.bound)


def kernel_rows(hw, kernels: Sequence[KernelPoint]) -> List[Dict[str, Any]]:
    """Per kernel what the figure shows, as numbers: intensity, predicted and measured GFLOP/s, the roof at its
    intensity and the fraction of it attained (the table and the JSON of ``polytile roofline``)."""
    hw = descriptor(hw)
    out = []
    for k in kernels:
        ai = k.intensity
        top = roof(hw, ai, k.dtype) if math.isfinite(ai) else peak_gflops(hw, k.dtype)
        got = k.measured_gflops
        out.append({"name": k.name, "dtype": k.dtype, "flops": k.flops, "dram_bytes": k.dram_bytes,
                    "intensity": ai if math.isfinite(ai) else None, "bound": k.bound,
                    "roof_gflops": top, "predicted_s": k.predicted_s, "predicted_gflops": k.predicted_gflops,
                    "measured_s": k.measured_s, "measured_gflops": got,
                    "fraction_of_roof": got / top if got and top else None})
    return out


def roofline(hw="host", kernels: Sequence[KernelPoint] = (), *, peak: Optional[float] = None,
             title: Optional[str] = None, path=None):
    """The roofline of ``hw`` (a descriptor, preset name, ``"host"`` or file) with ``kernels``
    (:class:`KernelPoint`, e.g. from :func:`kernel_point`) placed on it, log-log: the peak
    (float32, and float64 when a kernel computes in it), ``peak`` (a measured GFLOP/s, if given)
    as a dotted ceiling, one bandwidth slope per memory level, and each kernel at its DRAM
    intensity -- hollow at the model's rate, filled at the measured one.

    Returns the matplotlib Figure; with ``path`` (``.png``, ``.svg`` or ``.pdf``) also writes it.

        >>> from polytile import plots
        >>> k = plots.KernelPoint("stream", flops=2e6, dram_bytes=12e6, predicted_s=1e-3)
        >>> fig = plots.roofline("x86-avx512", [k])
        >>> len([c for c in fig.axes[0].collections if c.get_gid() == "kernel"][0].get_offsets())
        1
    """
    hw = descriptor(hw)
    kernels = list(kernels)
    bws = slopes(hw)
    if not bws:
        raise PlotError(f"{hw.name} gives no memory bandwidth: there is no roofline to draw")
    dtypes = ["float32"] + (["float64"] if any(dtype_bytes(k.dtype) >= 8 for k in kernels) else [])
    peaks = {d: peak_gflops(hw, d) for d in dtypes}
    top = max(list(peaks.values()) + ([peak] if peak else []))
    dram = bws[hw.dram.name] if hw.dram.name in bws else min(bws.values())
    ais = [k.intensity for k in kernels if math.isfinite(k.intensity) and k.intensity > 0]
    x_lo = min([top / max(bws.values()) / 8] + [a / 4 for a in ais])
    x_hi = max([top / dram * 8] + [a * 4 for a in ais])
    rates = [r for k in kernels for r in (k.predicted_gflops, k.measured_gflops) if r]
    y_lo = min([dram * x_lo] + [r / 3 for r in rates])
    y_hi = top * 2.5

    fig = _mpl.new_figure(8.0, 5.6)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    styles = {"float32": "-", "float64": "--"}
    for d, value in peaks.items():
        line = ax.axhline(value, color="black", linewidth=1.6, linestyle=styles[d])
        line.set_gid(GID_CEILING)
        ax.annotate(f"peak {d}: {value:.4g} GFLOP/s", (x_hi, value), xytext=(-4, 3), textcoords="offset points",
                    ha="right", va="bottom", fontsize=8)
    if peak:
        line = ax.axhline(peak, color="tab:red", linewidth=1.2, linestyle=":")
        line.set_gid(GID_CEILING)
        # At the left end: near the descriptor's peak, a label at the right would cover that one's.
        ax.annotate(f"measured peak: {peak:.4g} GFLOP/s", (x_lo, peak), xytext=(4, 3), textcoords="offset points",
                    ha="left", va="bottom", fontsize=8, color="tab:red")
    colours = ["tab:cyan", "tab:olive", "tab:orange", "tab:brown", "tab:gray"]
    for n, (level, gbs) in enumerate(bws.items()):
        ridge = peaks["float32"] / gbs  # the slope stops where it meets the compute ceiling
        xs = [x_lo, min(ridge, x_hi)]
        colour = "black" if level == hw.dram.name else colours[n % len(colours)]
        line, = ax.plot(xs, [gbs * x for x in xs], color=colour, linewidth=1.6 if level == hw.dram.name else 1.0,
                        alpha=1.0 if level == hw.dram.name else 0.8)
        line.set_gid(GID_SLOPE)
        ax.annotate(f"{level} {gbs:.4g} GB/s", (xs[0], gbs * xs[0]), xytext=(4, 4), textcoords="offset points",
                    rotation=0, fontsize=8, color=colour, ha="left", va="bottom")

    placed = [k for k in kernels if math.isfinite(k.intensity) and k.predicted_gflops]
    # One colour per kernel, so its predicted (hollow) and measured (filled) markers pair up even where
    # several kernels share an intensity (schedules of one program move the same compulsory DRAM bytes).
    palette = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
    colour = {id(k): palette[n % len(palette)] for n, k in enumerate(placed)}
    if placed:
        ax.scatter([k.intensity for k in placed], [k.predicted_gflops for k in placed], s=60, facecolors="none",
                   edgecolors=[colour[id(k)] for k in placed], linewidths=1.6, zorder=4, gid=GID_KERNEL)
    measured = [k for k in placed if k.measured_gflops]
    if measured:
        ax.scatter([k.intensity for k in measured], [k.measured_gflops for k in measured], s=50,
                   color=[colour[id(k)] for k in measured], zorder=5, gid=GID_MEASURED)
        for k in measured:
            ax.plot([k.intensity] * 2, [k.predicted_gflops, k.measured_gflops], color=colour[id(k)], linewidth=0.8,
                    alpha=0.6)
    for k in placed:
        y = k.measured_gflops or k.predicted_gflops
        ax.annotate(k.name, (k.intensity, y), xytext=(6, -2), textcoords="offset points", fontsize=8,
                    ha="left", va="top", color=colour[id(k)])
    unplaced = [k.name for k in kernels if k not in placed]
    if unplaced:
        ax.text(0.01, 0.01, "not placed (no DRAM traffic or no prediction): " + ", ".join(unplaced),
                transform=ax.transAxes, fontsize=7, color="firebrick", ha="left", va="bottom")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (flops per byte from DRAM)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title or f"roofline of {hw.name}", fontsize=11)
    ax.grid(alpha=0.25, which="both")
    if placed:
        from matplotlib.lines import Line2D

        keys = [Line2D([], [], linestyle="none", marker="o", markerfacecolor="none", markeredgecolor="0.3",
                       label="predicted (cost model)")]
        if measured:
            keys.append(Line2D([], [], linestyle="none", marker="o", color="0.3", label="measured"))
        ax.legend(handles=keys, fontsize=8, loc="lower right")  # the upper left holds the ceilings' labels
    return _mpl.finish(fig, path)
