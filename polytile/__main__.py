"""``python -m polytile``: the same command line as the ``polytile`` console script.

Ctrl-C exits 130 without a traceback at any moment, even while the command
line's modules are still being imported or the process is exiting.
"""
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


if __name__ == "__main__":
    code = _run()
    # A second Ctrl-C while Python flushes and exits must not print a traceback either.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)
