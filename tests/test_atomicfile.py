"""polytile.atomicfile.write_atomic: whole files or nothing, and what open() would do to anything else."""
from __future__ import annotations

import os
import stat
import threading

from polytile.atomicfile import write_atomic


def test_a_regular_file_is_replaced_whole_keeping_its_mode(tmp_path):
    path = tmp_path / "out.c"
    path.write_bytes(b"old")
    os.chmod(path, 0o640)
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new" and stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert os.listdir(tmp_path) == ["out.c"]


def test_links_are_followed_even_dangling_ones(tmp_path):
    (tmp_path / "real.c").write_bytes(b"old")
    (tmp_path / "link.c").symlink_to("real.c")
    write_atomic(tmp_path / "link.c", b"new")
    assert (tmp_path / "link.c").is_symlink() and (tmp_path / "real.c").read_bytes() == b"new"
    (tmp_path / "dangling.c").symlink_to("made.c")
    write_atomic(tmp_path / "dangling.c", b"made")
    assert (tmp_path / "dangling.c").is_symlink() and (tmp_path / "made.c").read_bytes() == b"made"


def test_a_fifo_is_written_to_not_replaced(tmp_path):
    # Renaming over a FIFO (or /dev/null, or /dev/stdout's pipe) replaced it: a reader waited forever.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, b"through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
