"""Saved schedules: the steps of a :class:`~polytile.scheduling.core.Schedule`, from the object, a list of
steps or step dicts, a JSON document, or the path of one (``polytile schedule --save``); the one reader
of schedule files (:func:`read_schedule_file`, whose errors name the file).

    >>> schedule_steps('[{"op": "base", "kind": "original"}]')[0].op
    'base'
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence, Tuple

from ..deps import Dependences
from ..errors import MissingFileError, PolytileError
from ..poly.scop import Scop
from . import Schedule, Step, apply_step, automatic, initial


def read_schedule_file(path) -> Any:
    """The JSON document of a schedule file (a saved schedule or a list of steps), with errors naming the file."""
    p = Path(path)
    if not p.exists():
        raise MissingFileError(f"no such schedule file: {p}")
    if not p.is_file():
        raise PolytileError(f"not a file: {p}")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolytileError(f"cannot read schedule {p}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolytileError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def schedule_steps(spec) -> Tuple[Step, ...]:
    """Steps from a Schedule, a list of steps/dicts, a JSON document, or a path to one."""
    if isinstance(spec, Schedule):
        return spec.steps
    if isinstance(spec, (str, os.PathLike)):
        text = str(spec)
        if text.lstrip().startswith(("{", "[")):
            try:
                spec = json.loads(text)
            except json.JSONDecodeError as e:
                raise PolytileError(f"schedule is not valid JSON: {e}") from None
        else:
            spec = read_schedule_file(text)
    if isinstance(spec, dict):
        if "steps" not in spec:
            raise PolytileError("schedule JSON has no 'steps' list")
        spec = spec["steps"]
    if not isinstance(spec, (list, tuple)):
        raise PolytileError(f"cannot read a schedule from {type(spec).__name__}")
    return tuple(s if isinstance(s, Step) else Step.from_json(s) for s in spec)


def replay(scop: Scop, dependences: Dependences, steps: Sequence[Step]) -> Schedule:
    """Rebuild a schedule on ``scop`` from its steps (the first may name the base schedule)."""
    steps = list(steps)
    base = steps.pop(0) if steps and steps[0].op == "base" else Step.make("base", kind="original")
    kw = base.kwargs()
    if kw.get("kind", "original") == "isl":
        s = automatic(scop, dependences, kw.get("fusion", "smart"))
    elif kw.get("kind", "original") == "original":
        s = initial(scop, dependences)
    else:
        raise PolytileError(f"unknown base schedule {kw.get('kind')!r} (use 'original' or 'isl')")
    for st in steps:
        s = apply_step(s, st)
    return s
