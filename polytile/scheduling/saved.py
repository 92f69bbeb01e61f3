"""Saved schedules: the steps of a :class:`~polytile.scheduling.core.Schedule`, from the object, a list of
steps or step dicts, a JSON document, or the path of one (``polytile schedule --save``).

    >>> schedule_steps('[{"op": "base", "kind": "original"}]')[0].op
    'base'
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence, Tuple

from ..deps import Dependences
from ..errors import PolytileError
from ..poly.scop import Scop
from . import Schedule, Step, apply_step, automatic, initial


def schedule_steps(spec) -> Tuple[Step, ...]:
    """Steps from a Schedule, a list of steps/dicts, a JSON document, or a path to one."""
    import json

    if isinstance(spec, Schedule):
        return spec.steps
    if isinstance(spec, (str, os.PathLike)):
        text = str(spec)
        if not text.lstrip().startswith(("{", "[")):
            path = Path(text)
            if not path.exists():
                raise PolytileError(f"no such schedule file: {path}")
            text = path.read_text()
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as e:
            raise PolytileError(f"schedule is not valid JSON: {e}") from None
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
