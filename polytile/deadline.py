"""isl work that cannot be interrupted: a wall-clock limit, and Ctrl-C held back around callbacks.

isl runs in C and cannot be interrupted from Python: some of its searches (the scheduler's ILP, the
AST generator on a strided, skewed schedule) run for minutes or hours on small inputs.  The work is
done in a forked child that is killed at the deadline; the caller then takes a cheaper path.
"""
from __future__ import annotations

import os
import select
import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, List, Optional

#: Where ``os.fork`` is missing (Windows) the work runs in this process, without a limit.
CAN_FORK = hasattr(os, "fork")


def with_deadline(work: Callable[[], str], seconds: float) -> Optional[str]:
    """``work()`` (a str) computed in a forked child within ``seconds``; None when it takes longer.

    >>> with_deadline(lambda: "done", 5.0)
    'done'

    The child only runs isl (no OpenMP, no I/O but its pipe) and leaves with ``os._exit``.  Without
    ``fork`` the work runs here, unlimited.
    """
    if not CAN_FORK:
        return work()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read)
            data = work().encode()
            with os.fdopen(write, "wb") as f:
                f.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    chunks: List[bytes] = []
    deadline = time.monotonic() + seconds
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([read], [], [], max(0.0, left))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                return None
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        return work()  # it failed in the child: fail here the same way, with the real error
    return b"".join(chunks).decode()


@contextmanager
def interrupts_after():
    """Hold Ctrl-C back while isl calls into Python, and deliver it after.

    A SIGINT's Python handler runs at the next bytecode, which during an AST build is inside a
    Python callback that isl called: the KeyboardInterrupt then unwinds through C, islpy prints its
    traceback and isl reports a failed call.  Inside this block a SIGINT is only recorded; on leaving,
    the handler that was in place runs with it (raising KeyboardInterrupt, as it would have).
    Outside the main thread signals cannot be handled and nothing changes.

    >>> with interrupts_after():
    ...     pass
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    got: List[tuple] = []
    signal.signal(signal.SIGINT, lambda signum, frame: got.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if got:
            if callable(previous):
                previous(*got[0])
            elif previous == signal.SIG_DFL:
                raise KeyboardInterrupt
