"""``polytile cache`` (show, verify or clear the cache of compiled kernels) and ``polytile hw`` (hardware
descriptors): the commands about polytile's surroundings rather than a program.
"""
from __future__ import annotations

from ..config import get_config
from ..memory import bytes_text
from . import json_output


# ---------------------------------------------------------------------------
# cache
# ---------------------------------------------------------------------------


_CACHE_EPILOG = """examples:
  polytile cache info        where the cache is, how many libraries, how many bytes
  polytile cache verify      re-hash every library and saved result; remove damaged or foreign ones
                             (they are rebuilt on use)
  polytile cache clear       delete everything (safe when no polytile process is running)

The cache directory must belong to you and not be writable by group or others,
or polytile refuses to use it (exit 3): it runs the libraries it finds there.
"""


def add_cache_parser(subs, formatter, common) -> None:
    """Register ``polytile cache`` on the subcommand parser."""
    p = subs.add_parser("cache", formatter_class=formatter, epilog=_CACHE_EPILOG,
                        help="show, verify or clear the cache of compiled kernels",
                        description="The cache of compiled kernels (POLYTILE_CACHE_DIR, default ~/.cache/polytile): "
                                    "info shows where it is and what it holds; verify re-hashes every library "
                                    "against its manifest and removes the bad ones; clear deletes everything in it.")
    p.add_argument("action", choices=("info", "verify", "clear"), help="what to do")
    common(p, sub=True)
    p.set_defaults(handler=cmd_cache)


#: What `cache info` calls the documents of a namespace.
_DOCUMENTS = {"tune": "saved tuning result(s)", "opt": "saved optimiser result(s)",
              "spec": "compiled specialisation(s) (found by later processes without compiling)"}


def cmd_cache(args) -> int:
    from .. import runtime

    root = get_config().cache_dir
    if args.action == "info":
        i = runtime.info(root)
        print(f"directory  {i['dir']}")
        print(f"libraries  {i['libraries']}")
        # The JSON documents beside the libraries, one namespace each (see polytile.runtime.json_cache).
        counts = {"tune": 0, **runtime.json_counts(root)}
        for ns, n in sorted(counts.items()):
            print(f"{ns:<10} {n} {_DOCUMENTS.get(ns, 'saved document(s)')}")
        print(f"size       {bytes_text(i['bytes'])}")
        limit = get_config().cache_max_bytes
        print(f"limit      {bytes_text(limit) + ' of libraries' if limit else 'none'} (POLYTILE_CACHE_MAX_BYTES; "
              f"least recently used removed past it)")
        return 0
    if args.action == "clear":
        freed = runtime.clear(root)
        print(f"removed everything in {root} ({bytes_text(freed)})")
        return 0
    found = runtime.verify(root, remove=True) + runtime.json_verify(root, remove=True)
    bad = [e for e in found if e.problem is not None]
    for e in bad:
        print(f"removed {e.path}: {e.problem}")
    print(f"verified {root}: {len(found) - len(bad)} ok, {len(bad)} bad" + (" (removed; they are rebuilt on use)"
                                                                          if bad else ""))
    return 0


# ---------------------------------------------------------------------------
# hw
# ---------------------------------------------------------------------------


_HW_EPILOG = """examples:
  polytile hw list                      the presets
  polytile hw show                      this machine, as detected (facts not found are marked as defaults)
  polytile hw show nvidia-h100          a preset
  polytile hw show mymachine.toml       your own descriptor (format: polytile/data/hardware/README.md)
"""


def add_hw_parser(subs, formatter, common) -> None:
    """Register ``polytile hw`` on the subcommand parser."""
    p = subs.add_parser("hw", formatter_class=formatter, epilog=_HW_EPILOG,
                        help="show hardware descriptors (memory levels, SIMD, cores; GPUs)",
                        description="Print a hardware descriptor: the detected host, a preset, or a file.")
    p.add_argument("action", choices=("show", "list"), help="show one descriptor, or list the presets")
    p.add_argument("name", nargs="?", metavar="NAME|FILE", help="preset name or file (default: host)")
    json_output.add_json_option(p, "show: the descriptor in the file format (detected host facts, defaults "
                                   "named in its notes), which fields were derived, vector lanes and each "
                                   "memory level's machine-wide size and bandwidth; list: the presets")
    common(p, sub=True)
    p.set_defaults(handler=cmd_hw)


def _preset_names(hardware) -> list:
    return ["host"] + [p for p in hardware.presets() if p != "host"]


def cmd_hw(args) -> int:
    from .. import hardware

    as_json = getattr(args, "json", False)
    if args.action == "list":
        if as_json:
            json_output.emit(json_output.document("hw.list", presets=[
                {"name": name, "file": None if name == "host" else str(hardware.PRESET_DIR / f"{name}.toml")}
                for name in _preset_names(hardware)]))
            return 0
        for name in _preset_names(hardware):
            print(name)
        return 0
    hw = hardware.load(args.name or "host")
    if as_json:
        json_output.emit(hw_document(hw, args.name or "host"))
        return 0
    print(hardware.format(hw))
    return 0


def hw_document(hw, name: str) -> dict:
    """``hw show --json``: the descriptor (:func:`polytile.hardware.to_dict`, which ``hw show FILE`` reads
    back) and what ``hw show`` prints besides: derived fields, vector lanes, machine-wide level totals.

    >>> from polytile import hardware
    >>> hw_document(hardware.load("x86-avx2"), "x86-avx2")["descriptor"]["cores"]
    8
    """
    from .. import hardware

    return json_output.document(
        "hw.show", name=name, source=hardware.source_kind(name), kind=hw.kind,
        descriptor=hardware.to_dict(hw),
        derived=hardware.derived_fields(hw),
        vector_lanes={dt: hw.vector_lanes(dt) for dt in ("float32", "float64")},
        memory=[{"name": lv.name, "per_core": lv.per_core, "total_bytes": hw.total_bytes(lv),
                 "bandwidth_total_gbs": hw.bandwidth(lv) / 1e9 if lv.bandwidth_gbs is not None else None}
                for lv in hw.memory],
        notes=list(hw.notes))
