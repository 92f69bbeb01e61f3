"""Writing a file atomically: a fresh name beside it, then ``os.replace`` (stdlib only).

A reader sees the old file or the whole new one, never half of one, and a failed write leaves nothing
behind.  Used by the kernel cache (``runtime/cache.py``, files readable by others: 0644), and for the
files a user names (``Schedule.save``, ``polytile opt -o``/``--in-place``, ``compile -o``, benchmark
results): written as ``open`` would leave them (an existing file keeps its permissions, a new one gets
0666 less the umask), but never half-written.

    >>> # write_atomic(Path("s.json"), b"{...}")            -> s.json, mode 0666 & ~umask
    >>> # write_atomic(Path("lib.json"), b"{...}", 0o644)   -> lib.json, mode 0644
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Optional


def write_atomic(path: Path, data: bytes, mode: Optional[int] = None) -> None:
    """Write ``data`` to ``path`` atomically, with permission bits ``mode`` (None: as ``open(path, "w")``
    would leave them: an existing file keeps its own, a new one gets 0666 less the umask; a symlink is
    followed, so its target is what changes; a read-only file is refused; a device or a FIFO is written
    to, not replaced).  OSError as the system raises it; the temporary file is removed first."""
    path = Path(path)
    keep = None
    if mode is None:
        try:
            st = os.stat(path)  # through symlinks (/dev/stdout -> a pipe)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        if (st is None or stat.S_ISREG(st.st_mode)) and os.path.islink(path):
            path = Path(os.path.realpath(path))  # the link's target is written, in its own directory
        if st is not None and not stat.S_ISREG(st.st_mode):
            # A device, a FIFO, /dev/stdout: written to, as open() would; renaming over it would replace it.
            with open(path, "wb") as f:
                f.write(data)
            return
        if st is not None and not os.access(path, os.W_OK):
            # open() would refuse a read-only file; a rename over it would not.
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        keep = None if st is None else st.st_mode & 0o7777
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None or keep is not None:
            os.chmod(tmp, mode if mode is not None else keep)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
