"""How much memory a new allocation can have, checked before allocating.

Linux overcommits: ``np.empty`` of 17 GB on a 24 GiB machine succeeds and the process is killed
later, when the pages are touched.  Sizes are therefore compared with ``MemAvailable`` first.

>>> bytes_text(3 << 30)
'3.0 GiB'
"""
from __future__ import annotations

import os
from typing import Optional


def available_memory() -> Optional[int]:
    """Bytes of memory available to a new allocation (Linux MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def bytes_text(n: int) -> str:
    """``n`` bytes for people: ``'1.5 GiB'``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def too_large(nbytes: int) -> Optional[str]:
    """Why ``nbytes`` cannot be allocated now (``'more than the 3.1 GiB of memory available'``), or None."""
    available = available_memory()
    if available is not None and nbytes > available:
        return f"more than the {bytes_text(available)} of memory available"
    return None
