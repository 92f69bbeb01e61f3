"""matplotlib on first use, and writing a figure to the format its file name asks for.

matplotlib is an optional extra (``pip install -e '.[plots]'``): only this package imports it, and
only when a figure is drawn, so ``import polytile``, compiling and every command without a figure
run without it.  Without it :func:`require` raises :class:`~polytile.errors.MatplotlibMissingError`
(a :class:`~polytile.errors.PolytileEnvironmentError` and an ``ImportError``; CLI exit 3) saying how
to install it.

Figures are built as ``matplotlib.figure.Figure`` objects, not through ``pyplot``: no backend has
to be chosen and no display is needed (``savefig`` renders PNG with Agg and writes SVG and PDF with
their own writers, by the file's suffix), no window opens, and nothing stays in pyplot's global list
of figures, so a process drawing many of them does not keep them all alive.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from ..errors import MatplotlibMissingError, PlotError, PolytileError

#: The file formats a figure may be written as, by suffix.
FORMATS = (".png", ".svg", ".pdf")
#: How to get matplotlib, in every message that says it is missing.
INSTALL_HINT = "pip install -e '.[plots]' in a polytile checkout, or pip install 'matplotlib>=3.5'"
#: Resolution of PNG files (the vector formats do not need one).
DPI = 120


def require() -> Any:
    """The ``matplotlib`` module, or a MatplotlibMissingError that says how to install it.

    Commands call it before any slow work (``compare --plot`` before measuring), so a missing
    extra costs nothing but the message.
    """
    try:
        import matplotlib
        import matplotlib.figure  # noqa: F401  (what every figure is made of)
    except ImportError as exc:
        raise MatplotlibMissingError(f"drawing figures needs matplotlib, which is not installed ({exc}); "
                                     f"install it with: {INSTALL_HINT}") from None
    return matplotlib


def read_document(source, what: str):
    """``source`` itself, or, when it is a path, the JSON document in that file (a PlotError naming ``what``
    when it cannot be read): the results a figure is drawn from come as objects or as saved files.

    >>> read_document({"rows": []}, "compare results")
    {'rows': []}
    """
    if not isinstance(source, (str, Path)):
        return source
    try:
        return json.loads(Path(source).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PlotError(f"cannot read {what} from {source}: {exc}") from None


def check_path(path) -> Path:
    """``path`` as a Path if its suffix names a figure format, else a PlotError listing them.

    >>> check_path("mm.svg").suffix
    '.svg'
    """
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise PlotError(f"cannot tell the figure format of {p}: name it {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    return p


def new_figure(width: float, height: float):
    """An empty Figure of ``width`` x ``height`` inches, laid out so labels and colour bars never overlap."""
    require()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def finish(fig, path: Optional[Any]):
    """Write ``fig`` to ``path`` (when given) in the format of its suffix; the figure either way."""
    if path is None:
        return fig
    p = check_path(path)
    try:
        fig.savefig(p, dpi=DPI, format=p.suffix.lower()[1:])
    except OSError as exc:
        raise PolytileError(f"cannot write {p}: {exc.strerror or exc}") from None
    return fig
