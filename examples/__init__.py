"""The example Tile programs, shipped inside the package as ``polytile.examples``.

They are data, not code: ``polytile examples`` lists them and copies them out
(``polytile examples --copy DIR``), and :func:`path` finds one from Python.

>>> from polytile.examples import catalogue, path
>>> "matmul" in dict(catalogue())
True
>>> path("matmul").name
'matmul.tile'
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import List, Tuple

SUFFIX = ".tile"


def _folder() -> Path:
    # A real folder both in a checkout (editable install) and in an installed wheel.
    return Path(str(resources.files(__name__)))


def names() -> List[str]:
    """The examples' names (file names without ``.tile``), sorted."""
    return sorted(p.name[: -len(SUFFIX)] for p in _folder().glob("*" + SUFFIX))


def path(name: str) -> Path:
    """The file of example ``name`` (``"matmul"`` or ``"matmul.tile"``); KeyError if there is none."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    if stem not in names():
        raise KeyError(stem)
    return _folder() / (stem + SUFFIX)


def summary(name: str) -> str:
    """What the example computes: its first comment sentence, without the ``// name:`` prefix."""
    parts: List[str] = []
    for line in path(name).read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text.startswith("//"):
            break
        text = text[2:].strip()
        if not parts:
            head, sep, rest = text.partition(":")
            text = rest.strip() if sep and head.strip() == name else text
        elif not text or text.split(":")[0] in ("Run", "dims", "shape", "inputs"):
            break
        parts.append(text)
        if text.endswith((".", ":")) or len(parts) == 3:
            break
    return " ".join(parts).rstrip(":")


def catalogue() -> List[Tuple[str, str]]:
    """``(name, summary)`` for every example, sorted by name."""
    return [(n, summary(n)) for n in names()]
