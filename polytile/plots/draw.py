"""``polytile draw``: a statement's iteration space under a schedule, as a figure.

The numbers come from :mod:`.space` (isl, no matplotlib); this module only draws them: a dot per
instance coloured by when it runs, each tile's outline (its points' convex hull, widened by a
margin so neighbouring tiles do not touch) numbered in execution order, grey lines through the
instances a parallel loop runs at the same time, and red arrows for the dependences.
"""
from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple

from . import _mpl
from .space import MAX_ARROWS, MAX_POINTS, Space, statement_space

#: Artist ids: one "tile" polygon per tile ("subtile" per register block or second tiling level),
#: one "points" collection holding a dot per instance, "wavefronts" (a line collection, one line per
#: wavefront) and "dependences" (a quiver, one arrow per drawn dependence).
GID_TILE = "tile"
GID_SUBTILE = "subtile"
GID_POINTS = "points"
GID_WAVEFRONTS = "wavefronts"
GID_DEPENDENCES = "dependences"

#: Half the width of the margin around a tile's points, in iterations (less than half a step, so
#: the outlines of neighbouring tiles keep a gap).
_MARGIN = 0.38
#: Tiles are numbered up to this many (more numbers would cover the points).
_NUMBERED = 64
#: Wavefront lines drawn at most (evenly chosen among them): a few show the pattern, all would hide the points.
_WAVEFRONT_LINES = 24
#: How far a wavefront's arc bows out, relative to its length: a straight line from a point to one several
#: steps away would run over the points in between and seem to join them too.
_BOW = 0.18


def _hull(points: Sequence[Tuple[float, float]]) -> List[Tuple[float, float]]:
    """The convex hull (Andrew's monotone chain), counter-clockwise, without repeating the first point.

    >>> _hull([(0, 0), (2, 0), (1, 1), (2, 2), (0, 2)])
    [(0, 0), (2, 0), (2, 2), (0, 2)]
    """
    pts = sorted(set(points))
    if len(pts) <= 2:
        return pts

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: List[Tuple[float, float]] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: List[Tuple[float, float]] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]


def _outline(points: Sequence[Tuple[float, float]], margin: float) -> List[Tuple[float, float]]:
    """The hull of the points widened by ``margin`` on every side (the hull of each point's square):
    a rectangle for a rectangular tile, a parallelogram-like shape for a skewed one, never degenerate."""
    corners = [(x + dx, y + dy) for x, y in points for dx in (-margin, margin) for dy in (-margin, margin)]
    return _hull(corners)


def _arc(a: Tuple[float, float], b: Tuple[float, float], steps: int = 12) -> List[Tuple[float, float]]:
    """A quadratic curve from ``a`` to ``b`` bowing out to one side by ``_BOW`` of its length."""
    mx, my = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
    cx, cy = mx - (b[1] - a[1]) * _BOW * 2, my + (b[0] - a[0]) * _BOW * 2  # the control point, off the chord
    out = []
    for k in range(steps + 1):
        u = k / steps
        out.append(((1 - u) ** 2 * a[0] + 2 * u * (1 - u) * cx + u * u * b[0],
                    (1 - u) ** 2 * a[1] + 2 * u * (1 - u) * cy + u * u * b[1]))
    return out


def _xy(space: Space) -> List[Tuple[float, float]]:
    # A 1-D statement is drawn along a line at y = 0.
    return [(float(p[0]), float(p[1]) if len(p) > 1 else 0.0) for p in space.points]


def draw_space(space: Space, *, title: Optional[str] = None, path=None):
    """The figure of a :class:`~.space.Space` (see :func:`iteration_space`, which computes one)."""
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Polygon
    from matplotlib.ticker import MaxNLocator

    xy = _xy(space)
    xs = [p[0] for p in xy]
    ys = [p[1] for p in xy]
    one_d = len(space.axes) == 1
    # Size the plotting area so one iteration is about as long along both axes (no forced aspect: that
    # would shrink the axes away from their colour bar), with rows for the title and the legend.
    width = max(xs) - min(xs) + 2
    height = 1.0 if one_d else max(ys) - min(ys) + 2
    ax_w = 6.0 if width >= height else max(3.0, 6.0 * width / height)
    ax_h = 0.6 if one_d else min(8.0, max(2.5, ax_w * height / width))
    entries = sum(1 for part in (space.tiles, space.subtiles, space.wavefronts, space.arrows) if part)
    key_h = 0.2 + 0.22 * max(entries, 1)  # the legend's row: one line per kind of mark drawn
    fig = _mpl.new_figure(ax_w + 1.8, ax_h + 1.5 + key_h)
    grid = fig.add_gridspec(2, 1, height_ratios=[ax_h, key_h])
    ax = fig.add_subplot(grid[0])
    key = fig.add_subplot(grid[1])
    key.axis("off")
    n = len(xy)
    legend = []

    for tile in space.subtiles:
        outline = _outline([xy[k] for k in tile], _MARGIN * 0.75)
        ax.add_patch(Polygon(outline, closed=True, fill=False, edgecolor="0.55", linewidth=0.7, linestyle=":",
                             gid=GID_SUBTILE))
    # Tiles that run together (a parallel tile loop) share an outline colour; otherwise all are black.
    together = space.tile_together if len(set(space.tile_together)) < len(space.tiles) else []
    palette = ["tab:red", "tab:blue", "tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
    for number, tile in enumerate(space.tiles):
        outline = _outline([xy[k] for k in tile], _MARGIN)
        colour = palette[together[number] % len(palette)] if together else "black"
        ax.add_patch(Polygon(outline, closed=True, fill=False, edgecolor=colour, linewidth=1.4, gid=GID_TILE))
        if len(space.tiles) <= _NUMBERED:
            top = max(outline, key=lambda p: (p[1], -p[0]))
            ax.annotate(str(number), top, xytext=(2, 2), textcoords="offset points", fontsize=8, color=colour,
                        ha="left", va="bottom")
    if space.tiles:
        legend.append(Patch(fill=False, edgecolor="black",
                            label=f"{len(space.tiles)} tile(s) ({', '.join(space.tile_loops)}), numbered in order"
                                  + ("; same colour: run at the same time" if together else "")))
    if space.subtiles:
        legend.append(Patch(fill=False, edgecolor="0.55", linestyle=":", label=f"{len(space.subtiles)} sub-tile(s)"))

    if space.wavefronts:
        step = -(-len(space.wavefronts) // _WAVEFRONT_LINES)
        shown = space.wavefronts[::step]
        lines = []
        for w in shown:
            line: List[Tuple[float, float]] = [xy[w[0]]]
            for a, b in zip(w, w[1:]):
                line += _arc(xy[a], xy[b])[1:]
            lines.append(line)
        ax.add_collection(LineCollection(lines, colors="0.35", linewidths=0.9, alpha=0.6, zorder=1,
                                         gid=GID_WAVEFRONTS))
        count = f"{len(shown)} of {len(space.wavefronts)}" if len(shown) < len(space.wavefronts) else str(len(shown))
        legend.append(Line2D([], [], color="0.35", linewidth=0.9,
                             label=f"run at the same time (parallel loop {space.parallel_loop}): {count}"))

    size = max(6.0, min(90.0, 9000.0 / n))
    dots = ax.scatter(xs, ys, c=space.order, cmap="viridis", s=size, zorder=3, edgecolors="none", gid=GID_POINTS)
    bar = fig.colorbar(dots, ax=ax, pad=0.02)
    bar.set_label(f"execution order of the {n} points (0 first)")
    if n <= 64:
        for (x, y), rank in zip(xy, space.order):
            ax.annotate(str(rank), (x, y), xytext=(0, -9), textcoords="offset points", fontsize=6, ha="center",
                        color="0.3")

    if space.arrows:
        sx = [xy[a][0] for a, _ in space.arrows]
        sy = [xy[a][1] for a, _ in space.arrows]
        dx = [xy[b][0] - xy[a][0] for a, b in space.arrows]
        dy = [xy[b][1] - xy[a][1] for a, b in space.arrows]
        ax.quiver(sx, sy, dx, dy, angles="xy", scale_units="xy", scale=1, color="crimson", width=0.003,
                  headwidth=4, headlength=5, alpha=0.75, zorder=4, gid=GID_DEPENDENCES)
        drawn = len(space.arrows)
        legend.append(Line2D([], [], color="crimson", marker=">", markersize=5,
                             label=f"dependence (flow), {drawn}" + (f" of {space.arrows_total}" if drawn < space.arrows_total
                                                                    else "")))

    ax.set_xlabel(space.axes[0])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    if one_d:
        ax.set_yticks([])
        ax.set_ylim(-1, 1)
    else:
        ax.set_ylabel(space.axes[1])
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(min(ys) - 1, max(ys) + 1.4)  # room for the tile numbers above the top row
    where = ", ".join(f"{k}={v}" for k, v in space.fixed.items())
    head = title or f"{space.statement}: {_short(space.text, int(11 * (ax_w + 1.8)) - len(space.statement))}"
    sub = f"loops {', '.join(space.loops)}" + (f"; slice {where}" if where else "")
    fig.suptitle(f"{head}\n{sub}", fontsize=10)
    if legend:
        key.legend(handles=legend, fontsize=8, loc="upper center", frameon=False)
    return _mpl.finish(fig, path)


def _short(text: str, most: int = 80) -> str:
    """One line of at most ``most`` characters (a C statement can be long; the title does not wrap)."""
    line = " ".join(text.split())
    return line if len(line) <= most else line[:most - 1] + "…"


def iteration_space(schedule, stmt: Optional[str] = None, *, axes: Optional[Sequence[str]] = None,
                    fixed: Optional[Mapping[str, int]] = None, max_points: int = MAX_POINTS,
                    max_arrows: int = MAX_ARROWS, title: Optional[str] = None, path=None):
    """The iteration space of one statement under ``schedule``: a dot per instance coloured by
    execution order, the tiles outlined and numbered in the order they run, lines through the
    instances the parallel loop runs at the same time, arrows for the flow dependences.

    ``stmt``: ``"S0"`` or a Tile tensor name (its update); default the first contraction update
    (else the first statement with the most loops).  ``axes``: the one or two iterators to draw
    along (default the two outermost); ``fixed``: values of the others (``{"k": 3}``), each left
    out fixed at its smallest value.  At most ``max_points`` points (PlotError beyond: use
    smaller sizes or a slice).  What exactly is drawn: :mod:`polytile.plots.space`.

    Returns the matplotlib Figure; with ``path`` (``.png``, ``.svg`` or ``.pdf``) also writes it.

        >>> import polytile
        >>> from polytile import plots
        >>> s = polytile.schedule("examples/matmul.tile", dims="M=8,N=8,K=8").tile("C", i=4, j=4)
        >>> fig = plots.iteration_space(s)          # S0 over (i, j) at k=0: 64 points in 4 tiles
        >>> len([p for p in fig.axes[0].patches if p.get_gid() == "tile"])
        4
    """
    space = statement_space(schedule, stmt, axes=axes, fixed=fixed, max_points=max_points, max_arrows=max_arrows)
    return draw_space(space, title=title, path=path)
