"""The error every descriptor problem raises, and the field checks that raise it.

Each check takes a value and its field path (``memory[2].size_bytes``) and
returns the value (normalised: ints become floats where a number is meant) or
raises :class:`HardwareError` naming the path.  Files are checked with them
when read, and the descriptor dataclasses run the same checks on direct
construction.
"""
from __future__ import annotations

import difflib
import json
import math
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..errors import PolytileError


class HardwareError(PolytileError, ValueError):
    """A hardware descriptor (file, preset name or query) is wrong.

    ``source`` is the file (or other origin) and ``field`` the path of the
    offending field inside it (``memory[2].size_bytes``); either may be None.
    """

    def __init__(self, problem: str, *, source: Optional[str] = None, field: Optional[str] = None):
        self.problem = problem
        self.source = source
        self.field = field
        super().__init__(": ".join([p for p in (source, field) if p] + [problem]))

    def with_source(self, source: str) -> "HardwareError":
        """The same error, attributed to ``source`` (the file it came from)."""
        return HardwareError(self.problem, source=source, field=self.field)


def _show(value: Any) -> str:
    """A value as the file would spell it, for error messages."""
    if value is None:
        return "null"  # only JSON can spell it
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "an array"
    return repr(value)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _pos_int(value: Any, path: str) -> int:
    # bool is an int subclass in Python, but `cores = true` is a mistake.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise HardwareError(f"expected a positive integer, got {_show(value)}", field=path)
    return value


def _pos_num(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise HardwareError(f"expected a positive number, got {_show(value)}", field=path)
    return float(value)


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise HardwareError(f"expected a non-empty string, got {_show(value)}", field=path)
    return value


def _choice(options: Sequence[Any]):
    def check(value: Any, path: str):
        if isinstance(value, bool) or value not in options:
            raise HardwareError(f"expected one of {', '.join(_show(o) for o in options)}, got {_show(value)}",
                                field=path)
        return value
    return check


def _text_list(value: Any, path: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise HardwareError(f"expected an array of strings, got {_show(value)}", field=path)
    for k, item in enumerate(value):
        if not isinstance(item, str):
            raise HardwareError(f"expected a string, got {_show(item)}", field=f"{path}[{k}]")
    return tuple(value)


def _optional(check):
    def run(value: Any, path: str):
        return None if value is None else check(value, path)
    return run


def _check_table(data: Mapping[str, Any], checks: Mapping[str, Any], required: Iterable[str],
                 prefix: str, what: str) -> dict:
    """Check one table of a file: no unknown fields, required ones present, each value valid."""
    for key in data:
        if key not in checks:
            close = difflib.get_close_matches(str(key), list(checks), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise HardwareError(f"unknown field{hint}; known fields of {what}: {', '.join(checks)}",
                                field=_join(prefix, str(key)))
    for key in required:
        if key not in data:
            raise HardwareError("missing required field", field=_join(prefix, key))
    return {key: checks[key](value, _join(prefix, key)) for key, value in data.items()}
