"""Writing descriptors: as plain data, JSON or TOML in the file format :func:`~.read.load` reads back."""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

from .descriptor import Hardware, MemoryLevel


def to_dict(hw: Hardware) -> dict:
    """The descriptor as plain data in the file format (None fields left out).

    ``from_dict(to_dict(hw)) == hw``; derived values (peaks, register size)
    are written out, so the dict is self-contained.
    """
    def level(lv: MemoryLevel) -> dict:
        # In the README's order (the checks table), which is how files are written by hand.
        return {k: getattr(lv, k) for k in MemoryLevel._CHECKS if getattr(lv, k) is not None}

    out: dict[str, Any] = {"name": hw.name, "kind": hw.kind}
    for f in dataclasses.fields(hw):
        value = getattr(hw, f.name)
        if f.name == "name" or value is None:
            continue
        if f.name == "memory":
            value = [level(lv) for lv in value]
        elif f.name == "peak_tflops":
            value = dict(value)
        elif f.name == "notes":
            if not value:
                continue
            value = list(value)
        out[f.name] = value
    return out


def to_json(hw: Hardware) -> str:
    """The descriptor as a JSON document that :func:`load` reads back."""
    return json.dumps(to_dict(hw), indent=2) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # shortest round-tripping form; valid TOML for finite floats
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON string escapes are TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a TOML value")


def to_toml(hw: Hardware) -> str:
    """The descriptor as a TOML document that :func:`load` reads back."""
    data = to_dict(hw)
    lines = []
    tables = []
    for key, value in data.items():
        # Tables must come after every plain key of the root table.
        if isinstance(value, Mapping) or (isinstance(value, list) and value and isinstance(value[0], Mapping)):
            tables.append((key, value))
        elif isinstance(value, list) and len(value) > 1:
            # One item per line: notes are sentences.
            lines += [f"{key} = ["] + [f"    {_toml_value(v)}," for v in value] + ["]"]
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in tables:
        rows = value if isinstance(value, list) else [value]
        header = f"[[{key}]]" if isinstance(value, list) else f"[{key}]"
        for row in rows:
            lines += ["", header] + [f"{k} = {_toml_value(v)}" for k, v in row.items()]
    return "\n".join(lines) + "\n"
