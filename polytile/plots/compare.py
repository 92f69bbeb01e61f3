"""``compare --plot``: one bar per candidate (median time) with min-max whiskers and speedup labels.

Reads what :func:`polytile.compare.compare` (and ``compare_c``) return, or the JSON they save
(``polytile compare -o results.json``), so a measurement can be drawn again later without
measuring again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from ..errors import PlotError
from . import _mpl

#: Artist ids the tests (and anyone post-processing a figure or its SVG) find the parts by.
GID_BAR = "bar"
GID_WHISKER = "whisker"


@dataclass(frozen=True)
class _Row:
    name: str
    median: Optional[float]
    low: Optional[float]
    high: Optional[float]
    speedup: Optional[float]
    check: str


def _rows(result) -> Tuple[List[_Row], Mapping[str, Any]]:
    """The rows and provenance of a CompareResult, its JSON document, or the path of that JSON file."""
    result = _mpl.read_document(result, "compare results")
    if hasattr(result, "rows") and hasattr(result, "provenance"):
        return [_Row(r.name, r.median, r.min, r.max, r.speedup, r.check) for r in result.rows], result.provenance
    if isinstance(result, Mapping) and isinstance(result.get("rows"), list):
        rows = [_Row(str(d.get("name")), d.get("median_s"), d.get("min_s"), d.get("max_s"), d.get("speedup"),
                     str(d.get("check", "-"))) for d in result["rows"]]
        return rows, result.get("provenance") or {}
    raise PlotError("compare_bars needs a CompareResult (polytile.compare.compare) or the JSON "
                    "`polytile compare -o results.json` writes")


def _unit(seconds: float) -> Tuple[str, float]:
    """The unit that shows ``seconds`` with a few digits before the point, and its scale."""
    if seconds >= 1.0:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def _title(prov: Mapping[str, Any]) -> str:
    what = prov.get("file") or "candidates"
    if prov.get("function"):
        what = f"{what}: {prov['function']}()"
    dims = prov.get("dims") or {}
    sizes = ", ".join(f"{k}={v}" for k, v in dims.items())
    return f"{what}" + (f" ({sizes})" if sizes else "")


def compare_bars(result, *, title: Optional[str] = None, path=None):
    """A bar chart of a comparison: per candidate its median time, whiskers from the fastest to the
    slowest timed call, and its speedup over the baseline (the first candidate that ran) above it.
    Candidates that did not run (illegal, error) get a label instead of a bar; a candidate whose
    output did not match the reference is hatched and labelled MISMATCH.

    ``result`` is what :func:`polytile.compare.compare` returns, its JSON (``polytile compare -o
    r.json``) as a dict, or that file's path.  Returns the matplotlib Figure; with ``path``
    (``.png``, ``.svg`` or ``.pdf``) also writes it there.

        >>> from polytile import compare, plots
        >>> r = compare.compare("examples/matmul.tile", "M=64,N=64,K=64", "float32",
        ...                     [compare.default(), compare.tiled(16)], repeat=3)     # doctest: +SKIP
        >>> fig = plots.compare_bars(r, path="mm.png")                              # doctest: +SKIP
    """
    rows, prov = _rows(result)
    if not rows:
        raise PlotError("the comparison has no candidates to draw")
    fig = _mpl.new_figure(max(5.0, 1.1 * len(rows) + 2.0), 4.5)
    ax = fig.add_subplot()
    timed = [r for r in rows if r.median is not None]
    unit, scale = _unit(max((r.high or r.median for r in timed), default=1e-3))
    top = max(((r.high or r.median) * scale for r in timed), default=1.0)
    # The rows' speedups are relative to the first candidate that ran (compare names it "baseline").
    base = prov.get("baseline") or (timed[0].name if timed else None)
    for x, r in enumerate(rows):
        if r.median is None:
            ax.text(x, 0.02 * top, r.check if r.check not in ("-", "") else "not run", ha="center", va="bottom",
                    rotation=90, color="firebrick", fontsize=9)
            continue
        baseline = r.name == base
        bad = r.check == "MISMATCH"
        bar = ax.bar(x, r.median * scale, width=0.6, color="0.6" if baseline else "tab:blue",
                     hatch="//" if bad else None, edgecolor="firebrick" if bad else "black", linewidth=0.8)
        for patch in bar.patches:
            patch.set_gid(GID_BAR)
        if r.low is not None and r.high is not None:
            err = ax.errorbar([x], [r.median * scale], yerr=[[(r.median - r.low) * scale], [(r.high - r.median) * scale]],
                              fmt="none", ecolor="black", elinewidth=1.0, capsize=4)
            for whisker in err.lines[2]:  # the vertical line collection(s) of the error bar
                whisker.set_gid(GID_WHISKER)
        label = "baseline" if baseline else (f"{r.speedup:.2f}x" if r.speedup is not None else "")
        if bad:
            label = (label + "\n" if label else "") + "MISMATCH"
        ax.annotate(label, (x, (r.high or r.median) * scale), xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=9, color="firebrick" if bad else "black")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r.name for r in rows], rotation=30 if len(rows) > 4 else 0,
                       ha="right" if len(rows) > 4 else "center")
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylim(0, top * 1.18)  # room for the labels above the tallest whisker
    ax.set_ylabel(f"time per call ({unit}): median, whiskers min-max")
    ax.set_title(title or _title(prov), fontsize=11)
    n = prov.get("repeat")
    ax.text(0.99, 0.98, (f"{n} timed calls each; " if n else "") + (f"speedup over {base}" if base else ""),
            transform=ax.transAxes, ha="right", va="top", fontsize=8, color="0.35")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return _mpl.finish(fig, path)
