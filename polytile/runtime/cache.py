"""The on-disk cache of compiled kernels.

Layout (``key`` is a 64-hex-digit sha256, see :func:`cache_key`)::

    <cache_dir>/<key[:2]>/<key>/<name>.c       source as compiled (kept, also on failure)
    <cache_dir>/<key[:2]>/<key>/lib<name>.so   the shared library
    (CUDA kernels: <name>.cu instead of <name>.c)

``<name>`` is the sanitized ``name_hint``.  It is not part of the key: the
same source built under two names shares a directory and holds two libraries.
The two-character fan-out keeps directories small on big caches.

Concurrency: files are only ever created under a temporary name in the same
directory and then ``os.replace``-d onto their final name, which is atomic on
POSIX.  Two processes compiling the same kernel both compile and the second
rename wins; either way each sees a complete library, never a half-written
one.  A process killed mid-compile can leave a ``.lib<name>.*.tmp`` file
behind; it is harmless and safe to delete.  Deleting the whole cache
directory is always safe.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import polytile
from polytile.config import debug_log, get_config
from polytile.errors import PolytileError
from polytile.runtime.compiler import compiler_version, resolve_compiler, run_compiler

# nvcc needs -Xcompiler to pass -fPIC through to the host compiler.
DEFAULT_CUDA_FLAGS: tuple[str, ...] = ("-O3", "--shared", "-Xcompiler", "-fPIC")
_SUFFIX = {"c": ".c", "cuda": ".cu"}
_MAX_NAME = 64


@dataclass
class Stats:
    """Process-wide counters of what :func:`build` did (for tests and debugging).

    >>> s = Stats(); s.compiles, s.cache_hits
    (0, 0)
    """

    compiles: int = 0
    cache_hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def reset(self) -> None:
        """Zero both counters."""
        with self._lock:
            self.compiles = 0
            self.cache_hits = 0


stats = Stats()


def sanitize_name(name_hint: str) -> str:
    """``name_hint`` reduced to ``[A-Za-z0-9_]`` (and at most 64 characters).

    >>> sanitize_name("x; rm -rf /")
    'x__rm__rf__'
    """
    name = re.sub(r"[^A-Za-z0-9_]", "_", name_hint or "")[:_MAX_NAME]
    return name or "kernel"


def cache_key(source: str, lang: str, flags: Sequence[str], compiler_path: str, compiler_ver: str) -> str:
    """sha256 hex digest identifying one compiled library.

    Fields are JSON-encoded as a list so no two different field tuples can
    produce the same hashed text (plain concatenation could).

    >>> len(cache_key("int f(void){return 0;}", "c", ["-O3"], "/usr/bin/cc", "cc 12"))
    64
    """
    payload = json.dumps(
        [source, lang, list(flags), compiler_path, compiler_ver, polytile.__version__],
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a cache may be shared
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def build(
    source: str,
    *,
    lang: str = "c",
    flags: Optional[Sequence[str]] = None,
    cc: Optional[str] = None,
    cache_dir: Optional[os.PathLike | str] = None,
    name_hint: str = "kernel",
) -> Path:
    """Compile ``source`` to a shared library (or find it in the cache); return its path.

    Defaults come from :func:`polytile.config.get_config`: ``flags`` from
    ``cflags`` (CUDA: :data:`DEFAULT_CUDA_FLAGS`), ``cc`` from ``cc`` (CUDA:
    ``nvcc``), ``cache_dir`` from ``cache_dir``.

    >>> so = build("int one(void) { return 1; }", name_hint="one")   # doctest: +SKIP
    >>> so.name                                                       # doctest: +SKIP
    'libone.so'
    """
    if lang not in _SUFFIX:
        raise PolytileError(f"unknown kernel language {lang!r}; expected one of {sorted(_SUFFIX)}")
    cfg = get_config()
    if lang == "cuda":
        if cc is None:
            cc = cfg.nvcc
            if cc is None:
                raise PolytileError("no CUDA compiler found; install the CUDA toolkit or set POLYTILE_NVCC to nvcc's path")
        flags = DEFAULT_CUDA_FLAGS if flags is None else flags
    else:
        cc = cfg.cc if cc is None else cc
        flags = cfg.cflags if flags is None else flags
    flags = [str(f) for f in flags]
    root = Path(cfg.cache_dir if cache_dir is None else cache_dir).expanduser()
    name = sanitize_name(name_hint)

    compiler_path = resolve_compiler(cc, lang)
    key = cache_key(source, lang, flags, compiler_path, compiler_version(compiler_path, lang))
    kdir = root / key[:2] / key
    lib_path = kdir / f"lib{name}.so"
    src_path = kdir / f"{name}{_SUFFIX[lang]}"

    if lib_path.is_file():
        stats.count("cache_hits")
        debug_log(1, "runtime", f"cache hit {lib_path}")
        return lib_path

    try:
        kdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PolytileError(
            f"cannot create kernel cache directory {kdir} ({exc.strerror}); "
            f"set POLYTILE_CACHE_DIR to a writable directory"
        ) from None
    # Keep the source next to the library: a failing compile points the user
    # at it, and a working one can be inspected later.  Skip the rewrite when
    # an identical copy is already there (another process got here first).
    try:
        existing = src_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        existing = None
    if existing != source:
        _atomic_write_text(src_path, source)

    stats.count("compiles")
    debug_log(1, "runtime", f"compiling {name} with {compiler_path} -> {lib_path}")
    fd, tmp = tempfile.mkstemp(dir=kdir, prefix=f".lib{name}.", suffix=".so.tmp")
    os.close(fd)
    debug_log(2, "runtime", lambda: "command: " + " ".join([compiler_path, *flags, "-o", tmp, str(src_path), "-lm"]))
    try:
        run_compiler(compiler_path, flags, str(src_path), tmp, name=name, lang=lang)
        os.chmod(tmp, 0o755)
        os.replace(tmp, lib_path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return lib_path
