"""``python -m polytile``: the same command line as the ``polytile`` console script.

Ctrl-C exits 130 without a traceback at any moment, even while the command
line's modules are still being imported or the process is exiting.
"""
import os
import signal
import sys


def _run() -> int:
    try:
        from .cli import main

        return main()
    except KeyboardInterrupt:
        try:
            print("polytile: interrupted", file=sys.stderr, flush=True)
        except (OSError, ValueError, KeyboardInterrupt):
            pass
        return 130


def entry() -> None:
    """The ``polytile`` console script and ``python -m polytile``: run, then exit with the code."""
    code = _run()
    # A second Ctrl-C while Python flushes and exits must not print a traceback either.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if code == 130:
        # Interrupted: leave now. Exit-time handlers of half-imported extension modules can re-raise
        # the interrupt, and CPython then ends the process by SIGINT instead of with 130.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":
    entry()
