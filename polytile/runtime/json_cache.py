"""JSON documents in the cache directory, stored by namespace and key (tuning results, optimiser results).

Layout, beside the kernels of :mod:`polytile.runtime.cache`::

    <cache_dir>/<namespace>/<key>.json              one document, in its envelope (below)
    <cache_dir>/<namespace>/.<key>.json.<rand>.tmp  a write in progress (or one that was killed)

A namespace is a lower-case name such as ``tune`` or ``opt`` (never two hex
digits: those are the kernel cache's fan-out directories); a key is 1 to 128
letters, digits, ``_`` or ``-``, usually a sha256 hex digest of everything
that determines the document.  Other files in a namespace directory (``tune``
saves an interrupted run's best schedule as ``<key>.interrupted.json``) are
not documents: never read, counted or verified here.

A document is a JSON object, written as::

    {"polytile_json_cache": 1, "namespace": ..., "key": ..., "sha256": ..., "doc": {...}}

where ``sha256`` is the digest of the document's canonical text
(``json.dumps(doc, sort_keys=True, separators=(",", ":"))``).

Trust and checks, as for kernels (the documents steer what is compiled and
run): the cache directory must pass :func:`~polytile.runtime.cache.check_root`
(else CacheError); the namespace directory must be a real directory of the
user's, writable by nobody else (created 0755; a bad one is ignored on read
and replaced on write); the document a regular file of the user's, opened
without following symbolic links.  A document that cannot be read, is not
JSON, names another namespace or key (copied from another entry), or whose
hash does not match (truncated or damaged) reads as a miss: it is removed and
the reason goes to the debug log.  Writes go to a temporary file in the same
directory, then ``os.replace`` onto the final name (atomic on POSIX): a reader
sees the whole old document, the whole new one, or none; of two concurrent
writers of one key the last wins.  ``polytile cache clear`` removes documents
with everything else; :func:`json_verify` checks every one.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from polytile.config import debug_log, get_config
from polytile.errors import CacheError
from polytile.runtime.cache import (
    Entry, _atomic_write_bytes, _check_dir, _check_file, _make_dir, _remove, check_root, open_nofollow,
)

#: Format of the envelope around every document.
JSON_FORMAT = 1
_NAMESPACE_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_FAN_OUT_RE = re.compile(r"[0-9a-f]{2}")
_DOC_KEY_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: A temporary file older than this is a killed writer's (json_verify removes it); no write takes that long.
_STALE_TMP_S = 3600.0


def _is_namespace(name: str) -> bool:
    return bool(_NAMESPACE_RE.fullmatch(name)) and not _FAN_OUT_RE.fullmatch(name)


def json_path(namespace: str, key: str, cache_dir: Optional[os.PathLike | str] = None) -> Path:
    """Where the document ``key`` of ``namespace`` is (or would be) stored; nothing is checked or created.

    ``cache_dir`` defaults to the configured one.  Raises ValueError for a
    namespace or key that is not a plain name (see the module doc).

    >>> json_path("tune", "ab12", "/c").as_posix()
    '/c/tune/ab12.json'
    """
    if not isinstance(namespace, str) or not _is_namespace(namespace):
        raise ValueError(f"bad cache namespace {namespace!r}: a lower-case name of at most 32 characters "
                         f"(not two hex digits)")
    if not isinstance(key, str) or not _DOC_KEY_RE.fullmatch(key):
        raise ValueError(f"bad cache key {key!r}: 1 to 128 letters, digits, '_' or '-'")
    root = Path(get_config().cache_dir if cache_dir is None else cache_dir).expanduser()
    return root / namespace / f"{key}.json"


def _digest(doc: Mapping[str, Any]) -> str:
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(path: Path, namespace: str, key: str) -> Tuple[Optional[dict], Optional[str], Optional[os.stat_result]]:
    """(document, None, stat) for the document file ``path``; or (None, "missing" or what is wrong, stat)."""
    problem, st = _check_file(path, "document")
    if problem is not None:
        return None, problem, st
    try:
        fd = open_nofollow(path)
    except FileNotFoundError:
        return None, "missing", None
    except OSError as exc:
        return None, f"it cannot be opened ({exc.strerror or exc})", st
    try:
        st = os.fstat(fd)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror or exc})", st
    finally:
        os.close(fd)
    try:
        data = json.loads(b"".join(chunks).decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both are
        return None, f"it is not JSON (truncated or damaged: {exc})", st
    if not isinstance(data, dict) or data.get("polytile_json_cache") != JSON_FORMAT:
        return None, f"it is not a cache document of format {JSON_FORMAT}", st
    if data.get("namespace") != namespace or data.get("key") != key:
        return None, "it names another namespace or key (copied from another entry?)", st
    doc = data.get("doc")
    if not isinstance(doc, dict) or data.get("sha256") != _digest(doc):
        return None, "its sha256 does not match its contents (damaged)", st
    return doc, None, st


def _remove_if_unchanged(path: Path, st: Optional[os.stat_result]) -> None:
    """Remove the bad file ``path`` unless a writer has replaced it since it was read (stat ``st``)."""
    try:
        now = os.lstat(path)
        if st is not None and (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return
        _remove(path)
    except OSError as exc:
        debug_log(1, "runtime", f"cannot remove {path} ({exc.strerror or exc})")


def json_get(namespace: str, key: str, cache_dir: Optional[os.PathLike | str] = None) -> Optional[dict]:
    """The document ``key`` of ``namespace``, or None when there is none or it fails the checks of the module doc.

    A bad document is removed (and why goes to the debug log).  Raises
    CacheError when the cache directory is not trusted.
    """
    path = json_path(namespace, key, cache_dir)
    check_root(path.parent.parent)
    problem = _check_dir(path.parent)
    if problem is not None:
        if problem != "missing":
            debug_log(1, "runtime", f"ignoring the cache namespace {path.parent}: {problem}")
        return None
    doc, problem, st = _read(path, namespace, key)
    if problem is None:
        return doc
    if problem != "missing":
        debug_log(1, "runtime", f"discarding the cached document {path}: {problem}")
        _remove_if_unchanged(path, st)
    return None


def json_put(namespace: str, key: str, doc: Mapping[str, Any], cache_dir: Optional[os.PathLike | str] = None) -> Path:
    """Store ``doc`` (a JSON-serialisable mapping) as the document ``key`` of ``namespace``, atomically; its path.

    Raises TypeError when ``doc`` is not JSON-serialisable (before anything is
    written), CacheError when the cache directory is not trusted or not writable.
    """
    path = json_path(namespace, key, cache_dir)
    if not isinstance(doc, Mapping):
        raise TypeError(f"a cache document is a mapping, not {type(doc).__name__}")
    doc = dict(doc)
    envelope = {"polytile_json_cache": JSON_FORMAT, "namespace": namespace, "key": key, "sha256": _digest(doc),
                "doc": doc}
    data = (json.dumps(envelope, indent=1) + "\n").encode("utf-8")
    check_root(path.parent.parent)
    ns_dir = path.parent
    try:
        problem = _check_dir(ns_dir)
        if problem not in (None, "missing"):
            debug_log(1, "runtime", f"replacing the cache namespace {ns_dir}: {problem}")
            _remove(ns_dir)
        _make_dir(ns_dir)
        _atomic_write_bytes(path, data)
    except OSError as exc:
        raise CacheError(f"cannot write the cached document {path} ({exc.strerror or exc}); "
                         f"set POLYTILE_CACHE_DIR to a writable directory of your own") from None
    debug_log(2, "runtime", f"stored {path}")
    return path


def json_verify(cache_dir: Optional[os.PathLike | str] = None, *, remove: bool = True) -> List[Entry]:
    """Check every document of every namespace as :func:`json_get` would; remove the bad ones (``remove``).

    Returns one :class:`~polytile.runtime.cache.Entry` per document (``problem``
    None when it is good), and one per unsafe namespace directory (a symbolic
    link, another user's, writable by others: reported, not removed, since it
    may not be polytile's; :func:`json_put` replaces it).  Also removes
    temporary files of writers killed long ago.
    """
    root = check_root(get_config().cache_dir if cache_dir is None else cache_dir)
    found: List[Entry] = []
    for ns_dir in sorted(root.iterdir()):
        if not _is_namespace(ns_dir.name) or not (ns_dir.is_dir() or ns_dir.is_symlink()):
            continue
        problem = _check_dir(ns_dir)
        if problem is not None:
            found.append(Entry(ns_dir, 0, problem))
            continue
        for f in sorted(ns_dir.iterdir()):
            if f.name.startswith(".") and f.name.endswith(".tmp"):
                if remove and _older_than(f, _STALE_TMP_S):
                    _remove_if_unchanged(f, None)
                continue
            key = f.name[:-5] if f.name.endswith(".json") else ""
            if not _DOC_KEY_RE.fullmatch(key):
                continue  # not a document
            doc, problem, st = _read(f, ns_dir.name, key)
            found.append(Entry(f, st.st_size if st is not None else 0, problem))
            if problem is not None and remove:
                _remove_if_unchanged(f, st)
    return found


def json_counts(cache_dir: Optional[os.PathLike | str] = None) -> Dict[str, int]:
    """Namespace -> number of documents stored in it (unchecked; for ``polytile cache info``)."""
    root = check_root(get_config().cache_dir if cache_dir is None else cache_dir)
    counts: Dict[str, int] = {}
    for ns_dir in sorted(root.iterdir()):
        if _is_namespace(ns_dir.name) and _check_dir(ns_dir) is None:
            counts[ns_dir.name] = sum(1 for f in ns_dir.iterdir()
                                      if f.name.endswith(".json") and _DOC_KEY_RE.fullmatch(f.name[:-5]))
    return counts


def _older_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - os.lstat(path).st_mtime > seconds
    except OSError:
        return False
