"""Writing a file atomically: a fresh name beside it, then ``os.replace`` (stdlib only).

A reader sees the old file or the whole new one, never half of one, and a failed write leaves nothing
behind.  Used by the kernel cache (``runtime/cache.py``, files readable by others: 0644) and by
``Schedule.save`` (a user's file: created as ``open`` would, 0666 less the umask).

    >>> # write_atomic(Path("s.json"), b"{...}")            -> s.json, mode 0666 & ~umask
    >>> # write_atomic(Path("lib.json"), b"{...}", 0o644)   -> lib.json, mode 0644
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Optional


def write_atomic(path: Path, data: bytes, mode: Optional[int] = None) -> None:
    """Write ``data`` to ``path`` atomically, with permission bits ``mode`` (None: as ``open`` creates a
    file, 0666 less the umask).  OSError as the system raises it; the temporary file is removed first."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
