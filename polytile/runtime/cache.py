"""The on-disk cache of compiled kernels, and why polytile trusts what it loads from it.

Layout (``key`` is a 64-hex-digit sha256, see :func:`cache_key`)::

    <cache_dir>/<key[:2]>/<key>/<name>.c                source as compiled (.cu for CUDA)
    <cache_dir>/<key[:2]>/<key>/lib<name>.so            the shared library
    <cache_dir>/<key[:2]>/<key>/lib<name>.manifest.json its manifest (sha256 and size of the library, ...)
    <cache_dir>/<key[:2]>/.<key>.lock                   the builders' lock of that key

A library is loaded only if the cache directory is the user's own (else
:class:`~polytile.errors.CacheError`), no path inside it is a symbolic link or
foreign, and its sha256 and size match its manifest; a failing entry is
discarded and rebuilt.  Builders of one key take a ``flock``; files appear by
atomic ``os.replace``, the manifest last.  JSON documents live beside the
kernels (:mod:`polytile.runtime.json_cache`).  Design (layout, trust model,
concurrency): docs/architecture.md, "The cache".
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

from polytile.atomicfile import write_atomic
from polytile.config import DEFAULT_CFLAGS, debug_log, get_config
from polytile.errors import CacheError, CacheWarning, CompilerError, ConfigError, PolytileError, ToolchainError
from polytile.version import __version__
from polytile.runtime.compiler import compiler_version, resolve_compiler, run_compiler

try:  # POSIX only; without it concurrent builders still never load a half-written file
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

# nvcc needs -Xcompiler to pass -fPIC through to the host compiler.
DEFAULT_CUDA_FLAGS: tuple[str, ...] = ("-O3", "--shared", "-Xcompiler", "-fPIC")
_SUFFIX = {"c": ".c", "cuda": ".cu"}
_MAX_NAME = 64
#: Format of the manifest written next to each library.
MANIFEST_FORMAT = 1
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")


def _euid() -> int:
    """The effective user id (a function so tests can pretend to be someone else)."""
    return os.geteuid()


@dataclass
class Stats:
    """Process-wide counters of what :func:`build` did (for tests and debugging).

    ``spec_hits`` counts signatures found in the specialization cache (:mod:`polytile.kernel`): those
    load a library without calling :func:`build` at all.

    >>> s = Stats(); s.compiles, s.cache_hits, s.discarded, s.spec_hits
    (0, 0, 0, 0)
    """

    compiles: int = 0
    cache_hits: int = 0
    discarded: int = 0
    spec_hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def reset(self) -> None:
        """Zero the counters."""
        with self._lock:
            self.compiles = 0
            self.cache_hits = 0
            self.discarded = 0
            self.spec_hits = 0


stats = Stats()


def sanitize_name(name_hint: str) -> str:
    """``name_hint`` reduced to ``[A-Za-z0-9_]`` (and at most 64 characters).

    >>> sanitize_name("x; rm -rf /")
    'x__rm__rf__'
    """
    name = re.sub(r"[^A-Za-z0-9_]", "_", name_hint or "")[:_MAX_NAME]
    return name or "kernel"


_NAME_RE = re.compile(rf"[A-Za-z0-9_]{{1,{_MAX_NAME}}}")


def entry_library(root: os.PathLike | str, key: str, name: str) -> Path:
    """Where the library of entry ``key`` named ``name`` lives: ``<root>/<key[:2]>/<key>/lib<name>.so``.

    Raises ValueError for a key or name that is not one this cache makes (so a path built from
    outside data can only name an entry).

    >>> entry_library("/c", "ab" * 32, "mm").as_posix()[:12]
    '/c/ab/ababab'
    """
    if not (_KEY_RE.match(key) and _NAME_RE.fullmatch(name)):
        raise ValueError(f"not a kernel cache entry: key {key!r}, name {name!r}")
    return Path(root) / key[:2] / key / f"lib{name}.so"


def entry_of(lib_path: os.PathLike | str) -> Optional[Tuple[str, str]]:
    """``(key, name)`` of a library at its place in the cache layout (:func:`entry_library`), else None.

    >>> entry_of(entry_library("/c", "ab" * 32, "mm")) == ("ab" * 32, "mm")
    True
    """
    p = Path(lib_path)
    key, fname = p.parent.name, p.name
    if not (fname.startswith("lib") and fname.endswith(".so") and p.parent.parent.name == key[:2]):
        return None
    try:
        entry_library(p.parent.parent.parent, key, fname[3:-3])
    except ValueError:
        return None
    return key, fname[3:-3]


def cache_key(source: str, lang: str, flags: Sequence[str], compiler_path: str, compiler_ver: str) -> str:
    """sha256 hex digest identifying one compiled library.

    Fields are JSON-encoded as a list so no two different field tuples can
    produce the same hashed text (plain concatenation could).

    >>> len(cache_key("int f(void){return 0;}", "c", ["-O3"], "/usr/bin/cc", "cc 12"))
    64
    """
    payload = json.dumps(
        [source, lang, list(flags), compiler_path, compiler_ver, __version__],
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def manifest_path(lib_path: os.PathLike | str) -> Path:
    """The manifest of the library ``lib_path`` (``libk.so`` -> ``libk.manifest.json``).

    >>> manifest_path("/c/ab/abc/libk.so").name
    'libk.manifest.json'
    """
    p = Path(lib_path)
    stem = p.name[:-3] if p.name.endswith(".so") else p.name
    return p.with_name(stem + ".manifest.json")


# ---------------------------------------------------------------------------
# Trust checks
# ---------------------------------------------------------------------------


def _mode_text(st: os.stat_result) -> str:
    return oct(stat.S_IMODE(st.st_mode))[2:].rjust(4, "0")


def _owner_text(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def check_root(root: os.PathLike | str, *, create: bool = True) -> Path:
    """The cache directory ``root`` after checking that it can be trusted (rule 1 of the module doc).

    Creates it (mode 0700) when missing and ``create``.  Raises CacheError when
    it cannot be created, is not a directory, belongs to another user, or is
    writable by group or others.

    >>> check_root("/tmp/my-private-cache")        # doctest: +SKIP
    PosixPath('/tmp/my-private-cache')
    """
    root = Path(root).expanduser()
    fix_dir = "set POLYTILE_CACHE_DIR to a directory of your own"
    if create and not root.exists():
        try:
            root.mkdir(parents=True, mode=0o700)
        except FileExistsError:
            pass  # another process was faster, or a dangling symlink: checked below
        except OSError as exc:
            raise CacheError(f"cannot create the kernel cache directory {root} ({exc.strerror or exc}); "
                             f"{fix_dir}") from None
    try:
        st = os.stat(root)  # follows a symlink: the directory reached is what must be trusted
    except FileNotFoundError:
        raise CacheError(f"the kernel cache directory {root} does not exist (a dangling link?); {fix_dir}") from None
    except OSError as exc:
        raise CacheError(f"cannot use the kernel cache directory {root} ({exc.strerror or exc}); {fix_dir}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"the kernel cache path {root} is not a directory; {fix_dir}")
    if st.st_uid != _euid():
        raise CacheError(
            f"the kernel cache directory {root} belongs to {_owner_text(st.st_uid)}, not to you "
            f"({_owner_text(_euid())}); polytile runs the libraries it finds there, so it only uses a directory "
            f"you own: {fix_dir}"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"the kernel cache directory {root} is writable by {'others' if st.st_mode & stat.S_IWOTH else 'its group'}"
            f" (mode {_mode_text(st)}): another user could plant a library there that polytile would run; "
            f"fix it with `chmod go-w {root}`, or {fix_dir}"
        )
    if not os.access(root, os.W_OK | os.X_OK):
        raise CacheError(f"the kernel cache directory {root} is not writable (mode {_mode_text(st)}); {fix_dir}")
    return root


def _check_dir(path: Path) -> Optional[str]:
    """None when ``path`` is a real directory of ours, writable by nobody else; else what is wrong."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != _euid():
        return f"{path} belongs to {_owner_text(st.st_uid)}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others (mode {_mode_text(st)})"
    return None


def _check_file(path: Path, what: str) -> Tuple[Optional[str], Optional[os.stat_result]]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing", None
    if stat.S_ISLNK(st.st_mode):
        return f"the {what} is a symbolic link", st
    if not stat.S_ISREG(st.st_mode):
        return f"the {what} is not a regular file", st
    if st.st_uid != _euid():
        return f"the {what} belongs to {_owner_text(st.st_uid)}", st
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"the {what} is writable by group or others (mode {_mode_text(st)})", st
    return None, st


def hash_fd(fd: int) -> Tuple[str, int]:
    """(sha256 hex digest, size) of the whole file open at ``fd`` (read from its start)."""
    h = hashlib.sha256()
    size = 0
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        h.update(chunk)
        size += len(chunk)
    return h.hexdigest(), size


def open_nofollow(path: os.PathLike | str) -> int:
    """A read-only fd of the regular file ``path``, never through a symbolic link (OSError otherwise)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_manifest(lib_path: os.PathLike | str) -> Tuple[Optional[dict], Optional[str]]:
    """(manifest, None) for the library at ``lib_path``, or (None, what is wrong with it)."""
    mpath = manifest_path(lib_path)
    problem, _ = _check_file(mpath, "manifest")
    if problem == "missing":
        return None, "it has no manifest (an older polytile's entry, or a build that did not finish)"
    if problem:
        return None, problem
    try:
        fd = open_nofollow(mpath)
        try:
            raw = b""
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                raw += chunk
                if len(raw) > 1 << 20:
                    return None, "the manifest is too large"
        finally:
            os.close(fd)
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"the manifest cannot be read ({exc})"
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        return None, "the manifest has an unknown format"
    if not isinstance(data.get("sha256"), str) or not isinstance(data.get("size"), int):
        return None, "the manifest has no sha256 and size"
    return data, None


def verify_fd(fd: int, lib_path: os.PathLike | str, *, key: Optional[str] = None,
              name: Optional[str] = None) -> Optional[str]:
    """None when the library open at ``fd`` matches the manifest next to ``lib_path``; else what is wrong."""
    manifest, problem = read_manifest(lib_path)
    if manifest is None:
        return problem
    if key is not None and manifest.get("key") != key:
        return "its manifest names another key (a library copied from another entry?)"
    if name is not None and manifest.get("name") != name:
        return "its manifest names another kernel"
    digest, size = hash_fd(fd)
    if size != manifest["size"]:
        return f"the library has {size} bytes, its manifest says {manifest['size']} (truncated or replaced)"
    if digest != manifest["sha256"]:
        return "the library's sha256 does not match its manifest (damaged or replaced)"
    return None


def check_entry(kdir: Path, name: str, key: Optional[str] = None) -> Optional[str]:
    """None when ``kdir/lib<name>.so`` passes rules 2 and 3 of the module doc; "missing"; or the problem.

    ``key`` defaults to the key directory's name.
    """
    key = kdir.name if key is None else key
    for d in (kdir.parent, kdir):
        problem = _check_dir(d)
        if problem is not None:
            return problem
    lib = kdir / f"lib{name}.so"
    problem, st = _check_file(lib, "library")
    if problem is not None:
        if problem == "missing" and os.path.lexists(manifest_path(lib)):
            return "the manifest has no library"
        return problem
    try:
        fd = open_nofollow(lib)
    except OSError as exc:
        return f"the library cannot be opened ({exc.strerror or exc})"
    try:
        return verify_fd(fd, lib, key=key, name=name)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    """Delete ``path`` whatever it is, never following a symbolic link; missing is fine."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # does not follow symlinks inside
    else:
        os.unlink(path)


def _discard(kdir: Path, name: str, reason: str) -> None:
    """Remove a bad entry (just its library and manifest, or the whole key directory if that is bad)."""
    lib = kdir / f"lib{name}.so"
    warnings.warn(f"polytile: discarding kernel cache entry {lib}: {reason}; rebuilding it", CacheWarning,
                  stacklevel=3)
    debug_log(1, "runtime", f"discarding {lib}: {reason}")
    stats.count("discarded")
    try:
        for d in (kdir.parent, kdir):
            if _check_dir(d) not in (None, "missing"):
                _remove(d)
                return
        _remove(manifest_path(lib))  # the manifest first: without it the entry is never trusted
        _remove(lib)
    except OSError as exc:
        raise CacheError(f"cannot remove the bad kernel cache entry {lib} ({exc.strerror or exc}); "
                         f"remove it by hand or run `polytile cache clear`") from None


def _make_dir(path: Path) -> None:
    """Create the directory ``path`` (mode 0755 whatever the umask) unless it already exists."""
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        return
    os.chmod(path, 0o755)  # mkdir's mode is cut by the umask; 0775 would fail the trust check


@contextmanager
def _key_lock(fan: Path, key: str) -> Iterator[None]:
    """Hold the exclusive build lock of ``key`` (released by the kernel if the process dies)."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    lock_path = fan / f".{key}.lock"
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(lock_path, flags, 0o644)
    except OSError as exc:
        raise CacheError(f"cannot open the lock file {lock_path} ({exc.strerror or exc}); "
                         f"set POLYTILE_CACHE_DIR to a writable directory of your own") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    write_atomic(path, data, mode)  # readable by others is harmless


def _atomic_write_text(path: Path, text: str) -> None:
    _atomic_write_bytes(path, text.encode("utf-8"))


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _remove_stale_temporaries(kdir: Path) -> None:
    """Delete the ``.*.tmp`` files of killed builds (call with the key's lock held: no build is running)."""
    try:
        names = os.listdir(kdir)
    except OSError:
        return
    for n in names:
        if n.startswith(".") and n.endswith(".tmp"):
            try:
                _remove(kdir / n)
                debug_log(1, "runtime", f"removed {kdir / n}, left by an interrupted build")
            except OSError:
                pass


def _diagnose_flags(compiler_path: str, flags: Sequence[str], kdir: Path, err: CompilerError) -> None:
    """After a failed build with flags from POLYTILE_CFLAGS: if they cannot even build an empty library,
    the flags are the problem (a ConfigError), not the kernel."""
    probe = kdir / ".flags-probe.c"
    fd, out = tempfile.mkstemp(dir=kdir, prefix=".flags-probe.", suffix=".so.tmp")
    os.close(fd)
    try:
        probe.write_text("int polytile_flags_probe(void) { return 0; }\n", encoding="utf-8")
        try:
            run_compiler(compiler_path, flags, str(probe), out, name="flags-probe")
        except CompilerError as probe_err:
            first = next((ln.strip() for ln in probe_err.output.splitlines() if ln.strip()), "")
            raise ConfigError(
                f"POLYTILE_CFLAGS={' '.join(flags)!s} does not build even an empty shared library with "
                f"{compiler_path}" + (f": {first}" if first else "")
                + "; fix the flags (they replace the defaults, so keep -shared -fPIC) or unset POLYTILE_CFLAGS"
            ) from None
    finally:
        _unlink_quietly(str(probe))
        _unlink_quietly(out)


def build(
    source: str,
    *,
    lang: str = "c",
    flags: Optional[Sequence[str]] = None,
    cc: Optional[str] = None,
    cache_dir: Optional[os.PathLike | str] = None,
    name_hint: str = "kernel",
) -> Path:
    """Compile ``source`` to a shared library (or find it, verified, in the cache); return its path.

    Defaults come from :func:`polytile.config.get_config`: ``flags`` from
    ``cflags`` (CUDA: :data:`DEFAULT_CUDA_FLAGS`), ``cc`` from ``cc`` (CUDA:
    ``nvcc``), ``cache_dir`` from ``cache_dir``.  Raises CacheError when the
    cache directory is not trusted (see the module doc), ToolchainError when
    the compiler is missing, CompilerError when it rejects the source.

    >>> so = build("int one(void) { return 1; }", name_hint="one")   # doctest: +SKIP
    >>> so.name                                                       # doctest: +SKIP
    'libone.so'
    """
    if lang not in _SUFFIX:
        raise PolytileError(f"unknown kernel language {lang!r}; expected one of {sorted(_SUFFIX)}")
    cfg = get_config()
    flags_from_config = False
    if lang == "cuda":
        if cc is None:
            cc = cfg.nvcc
            if cc is None:
                raise ToolchainError("no CUDA compiler found; install the CUDA toolkit or set POLYTILE_NVCC to "
                                     "nvcc's path")
        flags = DEFAULT_CUDA_FLAGS if flags is None else flags
    else:
        cc = cfg.cc if cc is None else cc
        if flags is None:
            flags = cfg.cflags
        # Flags the user configured (POLYTILE_CFLAGS): a build failing with them is checked for bad flags.
        flags_from_config = tuple(str(f) for f in flags) == cfg.cflags and cfg.cflags != DEFAULT_CFLAGS
    flags = [str(f) for f in flags]
    root = check_root(cfg.cache_dir if cache_dir is None else cache_dir)
    name = sanitize_name(name_hint)

    compiler_path = resolve_compiler(cc, lang)
    key = cache_key(source, lang, flags, compiler_path, compiler_version(compiler_path, lang))
    lib_path = entry_library(root, key, name)
    kdir = lib_path.parent
    fan = kdir.parent
    src_path = kdir / f"{name}{_SUFFIX[lang]}"

    problem = check_entry(kdir, name, key)
    if problem is None:
        stats.count("cache_hits")
        debug_log(1, "runtime", f"cache hit {lib_path}")
        return lib_path

    try:
        if _check_dir(fan) not in (None, "missing"):
            _discard(kdir, name, _check_dir(fan) or "")
        _make_dir(fan)
    except OSError as exc:
        raise CacheError(
            f"cannot create kernel cache directory {fan} ({exc.strerror or exc}); "
            f"set POLYTILE_CACHE_DIR to a writable directory of your own"
        ) from None
    with _key_lock(fan, key):
        # Another process may have built it while we waited for the lock.
        problem = check_entry(kdir, name, key)
        if problem is None:
            stats.count("cache_hits")
            debug_log(1, "runtime", f"cache hit {lib_path} (built by another process)")
            return lib_path
        if problem != "missing":
            _discard(kdir, name, problem)
        try:
            _make_dir(kdir)
        except OSError as exc:
            raise CacheError(
                f"cannot create kernel cache directory {kdir} ({exc.strerror or exc}); "
                f"set POLYTILE_CACHE_DIR to a writable directory of your own"
            ) from None
        _remove_stale_temporaries(kdir)
        _compile_entry(source, lang, flags, compiler_path, key, kdir, name, src_path, lib_path, flags_from_config)
    _after_build(root, key, lib_path, cfg.cache_max_bytes)
    return lib_path


# Bytes this process built since it last walked the cache to bound its size (None: not walked yet).
_built_since_walk: Optional[int] = None


def _after_build(root: Path, key: str, lib_path: Path, max_bytes: int) -> None:
    """Bound the cache after a build: a walk of the whole cache costs O(entries), so a process walks it
    on its first build and then again once it has built an eighth of the bound (a test suite building
    thousands of kernels walked it thousands of times)."""
    global _built_since_walk
    if not max_bytes:
        return
    try:
        size = os.lstat(lib_path).st_size
    except OSError:
        size = 0
    with _walk_lock:
        due = _built_since_walk is None or _built_since_walk + size >= max_bytes // 8
        _built_since_walk = 0 if due else _built_since_walk + size
    if due:
        evict(max_bytes, root, keep=(key,))


_walk_lock = threading.Lock()


def _compile_entry(source: str, lang: str, flags: List[str], compiler_path: str, key: str, kdir: Path, name: str,
                   src_path: Path, lib_path: Path, flags_from_config: bool) -> None:
    # Keep the source next to the library: a failing compile points the user
    # at it, and a working one can be inspected later.
    _atomic_write_text(src_path, source)
    stats.count("compiles")
    debug_log(1, "runtime", f"compiling {name} with {compiler_path} -> {lib_path}")
    fd, tmp = tempfile.mkstemp(dir=kdir, prefix=f".lib{name}.", suffix=".so.tmp")
    os.close(fd)
    debug_log(2, "runtime", lambda: "command: " + " ".join([compiler_path, *flags, "-o", tmp, str(src_path), "-lm"]))
    try:
        try:
            run_compiler(compiler_path, flags, str(src_path), tmp, name=name, lang=lang)
        except CompilerError as err:
            if flags_from_config:
                _diagnose_flags(compiler_path, flags, kdir, err)
            raise
        os.chmod(tmp, 0o755)
        fd = open_nofollow(tmp)
        try:
            digest, size = hash_fd(fd)
        finally:
            os.close(fd)
        manifest = {
            "format": MANIFEST_FORMAT, "key": key, "name": name, "library": lib_path.name,
            "sha256": digest, "size": size, "lang": lang, "compiler": compiler_path, "flags": list(flags),
            "polytile": __version__,
        }
        # The library first, the manifest last: an entry is complete exactly when
        # its manifest is there and matches.
        os.replace(tmp, lib_path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _atomic_write_text(manifest_path(lib_path), json.dumps(manifest, indent=1) + "\n")


# ---------------------------------------------------------------------------
# Whole-cache operations (`polytile cache info|clear|verify`)
# ---------------------------------------------------------------------------


@dataclass
class Entry:
    """One library in the cache and what :func:`verify` found."""

    path: Path
    size: int
    problem: Optional[str] = None  # None: verified


def _walk(root: Path) -> Iterator[Tuple[Path, str]]:
    """(key directory, kernel name) of every library (or manifest) under ``root``; unexpected things as name ''."""
    for fan in sorted(root.iterdir()):
        if fan.name == "tune" or not re.fullmatch(r"[0-9a-f]{2}", fan.name):
            continue
        if _check_dir(fan) is not None:
            yield fan, ""
            continue
        for kdir in sorted(fan.iterdir()):
            if kdir.name.startswith(".") and kdir.name.endswith(".lock"):
                continue
            if not _KEY_RE.match(kdir.name) or _check_dir(kdir) is not None:
                yield kdir, ""
                continue
            names = set()
            for f in kdir.iterdir():
                m = re.fullmatch(r"lib([A-Za-z0-9_]+)(?:\.so|\.manifest\.json)", f.name)
                if m:
                    names.add(m.group(1))
            for n in sorted(names):
                yield kdir, n


def _tree_size(path: Path) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for n in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return total


def entries(cache_dir: Optional[os.PathLike | str] = None, *, check: bool = True) -> List[Entry]:
    """Every library in the cache (``check``: each verified as a lookup would, with its problem)."""
    root = check_root(get_config().cache_dir if cache_dir is None else cache_dir)
    out = []
    for kdir, name in _walk(root):
        if not name:
            out.append(Entry(kdir, 0, _check_dir(kdir) or f"{kdir} is not a kernel cache entry"))
            continue
        lib = kdir / f"lib{name}.so"
        try:
            size = os.lstat(lib).st_size
        except OSError:
            size = 0
        out.append(Entry(lib, size, check_entry(kdir, name) if check else None))
    return out


def info(cache_dir: Optional[os.PathLike | str] = None) -> dict:
    """Where the cache is and what it holds: ``{"dir", "libraries", "bytes", "tune_results"}``."""
    root = check_root(get_config().cache_dir if cache_dir is None else cache_dir)
    libs = entries(root, check=False)
    tune_dir = root / "tune"
    tune_results = len(list(tune_dir.glob("*.json"))) if tune_dir.is_dir() and not tune_dir.is_symlink() else 0
    return {"dir": str(root), "libraries": sum(1 for e in libs if e.path.name.endswith(".so")),
            "bytes": _tree_size(root), "tune_results": tune_results}


def mark_used(lib_path: os.PathLike | str) -> None:
    """Record that a library was loaded (its manifest's mtime): :func:`evict` removes the least recent."""
    try:
        os.utime(manifest_path(lib_path), follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass  # a read-only cache is still usable; it is just not evicted by use


def evict(max_bytes: int, cache_dir: Optional[os.PathLike | str] = None, *, keep: Sequence[str] = ()) -> int:
    """Remove the least recently used kernel entries until the kernels take at most ``max_bytes``; bytes freed.

    An entry's last use is its manifest's mtime (set when it is built or loaded, :func:`mark_used`);
    entries whose key is in ``keep`` (the one just built) stay.  Each removal holds the entry's build
    lock, so a concurrent builder of that key waits and then rebuilds it.  JSON documents (saved tuning
    and optimiser results, specialisations) are small and stay; a specialisation whose library was
    evicted is compiled again on use.

    Bound 0 empties the kernel part of the cache:

    >>> evict(0)            # doctest: +SKIP
    """
    root = check_root(get_config().cache_dir if cache_dir is None else cache_dir)
    dirs = {}
    try:
        for kdir, name in _walk(root):
            if not name or kdir.name in keep:
                continue
            used = _last_use(kdir, name)
            if used is not None:  # no manifest: being built (or broken; `cache verify` removes those)
                dirs[kdir] = max(used, dirs.get(kdir, 0.0))
    except OSError:  # another process removed something under the walk: bound it next time
        return 0
    sizes = {kdir: _tree_size(kdir) for kdir in dirs}
    total = sum(sizes.values()) + sum(_tree_size(root / k[:2] / k) for k in keep)
    freed = 0
    for kdir in sorted(dirs, key=dirs.get):
        if total <= max_bytes:
            break
        with _key_lock(kdir.parent, kdir.name):
            names = [f.name[3:-3] for f in _listing(kdir) if f.name.startswith("lib") and f.name.endswith(".so")]
            uses = [u for u in (_last_use(kdir, n) for n in names) if u is not None]
            if not uses or max(uses) > dirs[kdir]:
                continue  # rebuilt, removed or used since the walk
            try:
                _remove(kdir)
            except OSError:
                continue
        debug_log(1, "runtime", f"evicted {kdir} (least recently used; cache over {max_bytes} bytes)")
        total -= sizes[kdir]
        freed += sizes[kdir]
    return freed


def _last_use(kdir: Path, name: str) -> Optional[float]:
    try:
        return os.lstat(manifest_path(kdir / f"lib{name}.so")).st_mtime
    except OSError:
        return None


def _listing(kdir: Path) -> List[Path]:
    try:
        return list(kdir.iterdir())
    except OSError:
        return []


def clear(cache_dir: Optional[os.PathLike | str] = None) -> int:
    """Delete everything in the cache directory (not the directory itself); the number of bytes freed."""
    root = check_root(get_config().cache_dir if cache_dir is None else cache_dir)
    freed = _tree_size(root)
    for child in list(root.iterdir()):
        try:
            _remove(child)
        except OSError as exc:
            raise CacheError(f"cannot remove {child} ({exc.strerror or exc})") from None
    return freed


def verify(cache_dir: Optional[os.PathLike | str] = None, *, remove: bool = True) -> List[Entry]:
    """Re-hash every library against its manifest; remove the bad ones (``remove``); return all entries.

    An entry being built right now (its key locked) is checked after the build.
    """
    root = check_root(get_config().cache_dir if cache_dir is None else cache_dir)
    found = entries(root, check=True)
    for e in found:
        if e.problem is None or not remove:
            continue
        if not e.path.name.endswith(".so"):  # a foreign or unsafe directory
            try:
                _remove(e.path)
            except OSError as exc:
                e.problem += f" (cannot remove it: {exc.strerror or exc})"
            continue
        kdir, name = e.path.parent, e.path.name[3:-3]
        with _key_lock(kdir.parent, kdir.name):
            e.problem = check_entry(kdir, name)  # a build may have finished meanwhile
            if e.problem is not None:
                try:
                    _remove(manifest_path(e.path))
                    _remove(e.path)
                except OSError as exc:
                    e.problem += f" (cannot remove it: {exc.strerror or exc})"
                _remove_stale_temporaries(kdir)
    return found
