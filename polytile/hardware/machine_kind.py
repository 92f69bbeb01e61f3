"""What kind of machine a descriptor describes, as a short fingerprint: timings are comparable only within a kind.

Two workers of a tuning run may be two processes on one machine, or two
machines of the same model, or two different machines.  Their timings can be
ranked together only in the first two cases.  :func:`kind` keeps the facts of
a CPU descriptor that decide how fast a kernel runs -- the model name, the
core and thread counts, the vector ISA, the cache hierarchy -- and drops what
wobbles or is a stated default (the clock, which detection may read as the
*current* frequency; peaks and bandwidths derived from it; the DRAM size; the
notes).  :func:`fingerprint` hashes that.

    >>> from polytile.hardware import load
    >>> fingerprint(load("x86-avx512")) == fingerprint(load("x86-avx512"))
    True
    >>> len(fingerprint(load("x86-avx512")))
    16
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import Any, Dict

from .descriptor import Hardware


def kind(hw: Hardware) -> Dict[str, Any]:
    """The stable facts of ``hw`` that decide kernel speed (see the module doc), as JSON-able data."""
    levels = [{"name": lv.name, "size_bytes": lv.size_bytes, "line_bytes": lv.line_bytes, "shared": lv.shared,
               "associativity": lv.associativity}
              for lv in hw.memory if lv.name != "DRAM"]
    out: Dict[str, Any] = {"name": hw.name, "kind": hw.kind, "memory": levels}
    for field in ("cores", "threads_per_core", "simd_width_bits", "fma_units_per_core", "vector_registers",
                  "sms", "warp_size"):
        if hasattr(hw, field):
            out[field] = getattr(hw, field)
    return out


def fingerprint(hw: Hardware) -> str:
    """16 hex digits of the sha256 of :func:`kind`: equal for machines whose timings may be ranked together."""
    text = json.dumps(kind(hw), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def host_fingerprint() -> str:
    """The fingerprint of the machine this process runs on (detected once per process).

    Counted over every CPU of the machine (``os.cpu_count()``), not the
    process's affinity mask, so a worker confined to some cores is still
    the same kind of machine as an unconfined client on it.

    >>> host_fingerprint() == host_fingerprint()
    True
    """
    from .host import detect_host

    return fingerprint(detect_host(cpu_count=os.cpu_count()))
