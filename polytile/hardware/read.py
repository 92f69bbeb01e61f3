"""Reading descriptors: from parsed data, ``.toml``/``.json`` files, preset names or the host.

:func:`load_once` keeps one descriptor per name or path for the whole process.
"""
from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Dict, Mapping, Union

from .checks import HardwareError, _check_table, _show
from .descriptor import CPUDescriptor, GPUDescriptor, Hardware, MemoryLevel, _check_peaks
from .host import detect_host

#: Where the preset ``*.toml`` files live (their stems are the preset names).
PRESET_DIR = Path(__file__).resolve().parent.parent / "data" / "hardware"

#: The preset that is detected rather than read from a file.
HOST = "host"


def from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Hardware:
    """A descriptor from the parsed contents of a file (see the README for the format).

    ``source`` names the origin in error messages.
    """
    try:
        if not isinstance(data, Mapping):
            raise HardwareError(f"expected a table at the top level, got {_show(data)}")
        kind = data.get("kind")
        if kind is None:
            raise HardwareError('missing required field (expected "cpu" or "gpu")', field="kind")
        if kind == "cpu":
            return _cpu_from_dict(data)
        if kind == "gpu":
            return _gpu_from_dict(data)
        raise HardwareError(f'expected one of "cpu", "gpu", got {_show(kind)}', field="kind")
    except HardwareError as err:
        raise err.with_source(source) from None


def _cpu_from_dict(data: Mapping[str, Any]) -> CPUDescriptor:
    checks = dict(CPUDescriptor._CHECKS)
    checks["memory"] = lambda value, path: value  # levels are checked below, with their paths
    top = _check_table(data, checks, CPUDescriptor.REQUIRED, "", "a cpu")
    raw_levels = top.pop("memory")
    top.pop("kind")
    if not isinstance(raw_levels, (list, tuple)) or not all(isinstance(x, Mapping) for x in raw_levels):
        raise HardwareError(f"expected an array of tables ([[memory]]), got {_show(raw_levels)}", field="memory")
    simd_bytes = top["simd_width_bits"] // 8
    levels = []
    for k, raw in enumerate(raw_levels):
        prefix = f"memory[{k}]"
        raw = dict(raw)
        is_regs = k == 0 and raw.get("name") == "registers"
        if is_regs:
            # The register file's size and "line" follow from the ISA fields;
            # a file may leave them out (and is checked against them if not).
            raw.setdefault("size_bytes", top["vector_registers"] * simd_bytes)
            raw.setdefault("line_bytes", simd_bytes)
        raw.setdefault("line_bytes", 64)
        values = _check_table(raw, MemoryLevel._CHECKS, ("name", "size_bytes", "shared"), prefix, "a memory level")
        levels.append(MemoryLevel(**values))
    return CPUDescriptor(memory=tuple(levels), **top)


def _gpu_from_dict(data: Mapping[str, Any]) -> GPUDescriptor:
    checks = dict(GPUDescriptor._CHECKS)
    checks["peak_tflops"] = _check_peaks
    top = _check_table(data, checks, GPUDescriptor.REQUIRED, "", "a gpu")
    top.pop("kind")
    return GPUDescriptor(**top)


def _read_file(path: Path, shown: str) -> Hardware:
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise HardwareError("expected a .toml or .json file", source=shown)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HardwareError(f"cannot read the file: {exc.strerror or exc}", source=shown) from None
    except UnicodeDecodeError as exc:
        raise HardwareError(f"not UTF-8 text ({exc.reason})", source=shown) from None
    try:
        data = json.loads(text) if suffix == ".json" else tomllib.loads(text)
    except json.JSONDecodeError as exc:
        raise HardwareError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", source=shown) from None
    except tomllib.TOMLDecodeError as exc:
        raise HardwareError(f"invalid TOML: {exc}", source=shown) from None
    return from_dict(data, source=shown)


def presets() -> list[str]:
    """The preset names :func:`load` accepts, ``host`` included."""
    names = {p.stem for p in PRESET_DIR.glob("*.toml")} if PRESET_DIR.is_dir() else set()
    return sorted(names | {HOST})


_LOADED: Dict[str, Hardware] = {}


def load_once(name_or_path: Union[str, os.PathLike, Hardware]) -> Hardware:
    """:func:`load`, remembered per process for a name or path (a descriptor object is returned as is):
    the compiler, the cost model and the tuner ask for the same descriptor many times.

    >>> load_once("x86-avx2") is load_once("x86-avx2")
    True
    """
    if not isinstance(name_or_path, str):
        return load(name_or_path)
    if name_or_path not in _LOADED:
        _LOADED[name_or_path] = load(name_or_path)
    return _LOADED[name_or_path]


def source_kind(name_or_path: Union[str, os.PathLike]) -> str:
    """Where :func:`load` takes a descriptor named so from: ``"host"`` (detected), ``"file"`` or ``"preset"``.

    >>> source_kind("host"), source_kind("x86-avx2"), source_kind("my.toml"), source_kind("dir/m")
    ('host', 'preset', 'file', 'file')
    """
    if isinstance(name_or_path, os.PathLike):
        return "file"
    text = str(name_or_path).strip()
    if text.lower().endswith((".toml", ".json")) or "/" in text or os.sep in text:
        return "file"
    return HOST if text.lower() == HOST else "preset"


def load(name_or_path: Union[str, os.PathLike, Hardware]) -> Hardware:
    """A descriptor from a preset name, ``"host"`` or a ``.toml``/``.json`` file path.

    A string is a path when it ends in ``.toml``/``.json`` or contains a path
    separator; otherwise it names a preset.  A descriptor is returned as is.
    """
    if isinstance(name_or_path, (CPUDescriptor, GPUDescriptor)):
        return name_or_path
    if isinstance(name_or_path, os.PathLike):
        return _read_file(Path(name_or_path), os.fspath(name_or_path))
    if not isinstance(name_or_path, str):
        raise HardwareError(f"expected a preset name or a file path, got {type(name_or_path).__name__}")
    text = name_or_path.strip()
    kind = source_kind(text)
    if kind == "file":
        return _read_file(Path(text).expanduser(), text)
    key = text.lower()
    if kind == HOST:
        return detect_host()
    path = PRESET_DIR / f"{key}.toml"
    if not path.is_file():
        raise HardwareError(f"unknown hardware preset {text!r}; presets: {', '.join(presets())} "
                            f"(or give the path of a .toml or .json file)")
    return _read_file(path, str(path))
