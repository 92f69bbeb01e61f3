"""Optimised C files kept in the cache: a file optimised before, from the same input with the same options,
is not optimised again.

Documents live in the JSON cache (:mod:`polytile.runtime.json_cache`) under
the namespace ``opt``, beside the compiled kernels (``POLYTILE_CACHE_DIR``,
with the same trust checks; ``polytile cache clear`` removes them).

The key (:func:`key_for`) is the sha256 of everything the output depends on:
the file's bytes and the path it was given as (located notes name it), what
the preprocessor makes of it (its text, macros and definitions, so a changed
header or ``-D`` is a new key), the preprocessor options, every optimiser
option, the saved schedule's steps, the L2 size taken from the hardware
descriptor (the only fact the optimiser reads from it; the whole descriptor of
``host`` holds the current clock), the optimiser's tunables, the polytile
version, a digest of polytile's own source files (a checkout edited since a
result was kept must not get it back) and the versions of islpy, pycparser
and cgen.  The C compiler plays no part beyond the preprocessor, whose output
is in the key.

The document holds the output text and, per region, its replacement text,
notes and schedule steps -- everything ``polytile opt`` prints, ``--json``
included -- so a hit prints exactly what a miss printed.  The schedules
themselves are not kept (a hit's regions have their steps only), nor is
a result whose code generation ran out of wall-clock time: it depends on the
machine's load, and the next run may do better.  A cache that cannot be read
or written (untrusted, read-only, damaged) is passed over: the file is
optimised as without it.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..config import debug_log
from ..errors import CacheError
from ..frontends.c import CScop
from ..frontends.c.source import check_cpp_args, load
from ..runtime.json_cache import json_get, json_path, json_put
from ..scheduling import Step
from ..version import __version__, code_fingerprint
from . import region, strategy, tiling
from .machine import CMachine
from .region import RegionResult

#: Namespace of the documents in the JSON cache.
NAMESPACE = "opt"
#: Format of a document (and part of the key): bump it when the document or the key changes.
FORMAT = 2  # 2: each region's schedule steps (for opt --json)


@dataclass
class OptCacheStats:
    """Process-wide counters: ``hits`` served from the cache, ``misses`` looked up in vain, ``stores`` kept."""

    hits: int = 0
    misses: int = 0
    stores: int = 0

    def reset(self) -> None:
        self.hits = self.misses = self.stores = 0


stats = OptCacheStats()


@functools.lru_cache(maxsize=None)
def _library_versions() -> Dict[str, Optional[str]]:
    from importlib import metadata

    out: Dict[str, Optional[str]] = {}
    for name in ("islpy", "pycparser", "cgen"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def key_for(path, raw: bytes, cpp_args: Sequence[str], *, machine: CMachine, steps: Optional[Sequence[Step]],
            options: Mapping[str, Any]) -> str:
    """The cache key of optimising ``path`` (whose bytes are ``raw``) with ``options`` (see the module doc).

    ``options`` are the optimiser's keywords as JSON values (tile, parallel,
    fusion, params, ...); ``steps`` the saved schedule's, if any.
    """
    src = load(str(path), cpp_args)
    payload = {
        "what": "polytile-opt", "format": FORMAT, "version": __version__, "code": code_fingerprint(),
        "libraries": _library_versions(), "path": str(path),
        "source": hashlib.sha256(raw).hexdigest(),
        "preprocessed": hashlib.sha256(src.parse_text.encode("utf-8", "surrogateescape")).hexdigest(),
        "macros": dict(src.macros), "defines": {k: list(v) for k, v in src.defines.items()},
        "pure_declared": sorted(src.pure), "cpp_args": list(check_cpp_args(cpp_args)),
        "options": dict(options), "machine": machine.as_dict(),
        "steps": None if steps is None else [s.to_json() for s in steps],
        "tunables": {"VECTOR_TILE": tiling.VECTOR_TILE, "MAX_CODEGEN_OPERATIONS": region.MAX_CODEGEN_OPERATIONS,
                     "CODEGEN_SECONDS": region.CODEGEN_SECONDS,
                     "CODEGEN_ATTEMPT_SECONDS": region.CODEGEN_ATTEMPT_SECONDS,
                     "CODEGEN_MIN_SECONDS": region.CODEGEN_MIN_SECONDS,
                     "REGION_DEPS_OPERATIONS": strategy.REGION_DEPS_OPERATIONS,
                     "VERSION_DEPS_OPERATIONS": strategy.VERSION_DEPS_OPERATIONS},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _where(cs: CScop) -> List[Any]:
    """What identifies a region in its file (checked against the document on a hit)."""
    return [cs.function, cs.start, cs.end, list(cs.lines)]


def lookup(key: str, path, regions: Sequence[CScop]) -> Optional[Tuple[bytes, List[RegionResult]]]:
    """The optimised bytes and region results kept under ``key`` for ``regions`` (``path``'s), or None.

    A document that does not fit ``regions`` (another region layout) is a miss;
    so is a cache that cannot be read (the reason goes to the debug log).
    """
    try:
        doc = json_get(NAMESPACE, key)
    except CacheError as e:
        debug_log(1, "opt", f"not reading the optimiser cache: {e}")
        doc = None
    if doc is None:
        stats.misses += 1
        return None
    try:
        if doc.get("format") != FORMAT or len(doc["regions"]) != len(regions):
            raise ValueError("another format or region count")
        out = doc["output"].encode("utf-8")
        results = []
        for cs, kept in zip(regions, doc["regions"]):
            if kept["where"] != _where(cs):
                raise ValueError(f"region {kept['where']} is not {_where(cs)}")
            text, notes, steps = kept["text"], kept["notes"], kept["steps"]
            if not (text is None or isinstance(text, str)) or not all(isinstance(n, str) for n in notes):
                raise TypeError("a region's text or notes are not text")
            if not (steps is None or (isinstance(steps, list) and all(isinstance(st, dict) for st in steps))):
                raise TypeError("a region's steps are not a list of steps")
            results.append(RegionResult(cs, None, text, list(notes), from_cache=True, cached_steps=steps))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        debug_log(1, "opt", f"cached result {json_path(NAMESPACE, key)} unusable ({e}); optimising again")
        stats.misses += 1
        return None
    stats.hits += 1
    # Level 2: with -v (level 1) a hit prints what the miss printed, nothing more.
    debug_log(2, "opt", f"{path}: optimised file from the cache ({json_path(NAMESPACE, key)})")
    return out, results


def store(key: str, path, out: bytes, results: Sequence[RegionResult]) -> None:
    """Keep ``out`` and what ``results`` say under ``key``, unless it depends on time (see the module doc).

    A cache that cannot be written is passed over (the reason goes to the debug log).
    """
    if any(r.timed_out for r in results):
        debug_log(2, "opt", f"{path}: not cached (code generation ran out of time; another run may do better)")
        return
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError:
        return  # the frontend reads UTF-8 only, so the output is too; never kept otherwise
    doc = {"format": FORMAT, "output": text,
           "regions": [{"where": _where(r.cscop), "text": r.text, "notes": list(r.notes), "steps": r.steps_json()}
                       for r in results]}
    try:
        stored = json_put(NAMESPACE, key, doc)
    except (CacheError, OSError) as e:
        debug_log(1, "opt", f"{path}: optimised file not cached: {e}")
        return
    stats.stores += 1
    debug_log(2, "opt", f"{path}: optimised file cached: {stored}")
