"""Runtime: compile generated C to a shared library, cache it on disk, load it.

Calling convention (the code generator emits exactly this)::

    int <entry>(void *a0, void *a1, ..., void *aN);

one ``void *`` per array, in the order inputs, then outputs, then
temporaries; each points at the first element of a C-contiguous buffer whose
element type and shape the kernel knows statically (scalars are passed as
0-d arrays).  The function returns 0 on success; any other value is an error
code that :class:`KernelFunction` turns into a :class:`PolytileError`.

Typical use::

    >>> from polytile import runtime                                      # doctest: +SKIP
    >>> so = runtime.build(c_source, name_hint="matmul")                  # doctest: +SKIP
    >>> runtime.load(so).function("matmul", 3)(A, B, C)                   # doctest: +SKIP

The cache layout, its trust model (what is checked before a library is
loaded) and its concurrency guarantees are described in
docs/architecture.md ("The cache"); ``runtime.stats`` counts compiles, cache hits
and discarded (damaged or foreign) entries in this process.  Other results
worth keeping (tuning results, ...) are JSON documents in the same directory,
stored by namespace and key with the same checks: :func:`json_get`,
:func:`json_put`, :func:`json_path` (:mod:`polytile.runtime.json_cache`).
"""
from polytile.runtime.cache import (
    DEFAULT_CUDA_FLAGS, Stats, build, cache_key, check_entry, check_root, clear, entry_library, entry_of, evict,
    info, manifest_path, sanitize_name, stats, verify,
)
from polytile.runtime.compiler import compiler_version, resolve_compiler
from polytile.runtime.json_cache import json_counts, json_get, json_path, json_put, json_verify
from polytile.runtime.loader import KernelFunction, Library, load

__all__ = [
    "DEFAULT_CUDA_FLAGS",
    "KernelFunction",
    "Library",
    "Stats",
    "build",
    "cache_key",
    "check_entry",
    "check_root",
    "clear",
    "entry_library",
    "entry_of",
    "evict",
    "compiler_version",
    "info",
    "json_counts",
    "json_get",
    "json_path",
    "json_put",
    "json_verify",
    "load",
    "manifest_path",
    "resolve_compiler",
    "sanitize_name",
    "stats",
    "verify",
]
