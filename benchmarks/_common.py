"""Shared pieces of the benchmark scripts: arguments, provenance, timing rules, results files.

Every script in this directory prints a table and writes a JSON file into
``benchmarks/results/`` that carries enough provenance to judge the numbers
later: the machine, the C compiler (path and version) and flags, the numpy,
islpy and polytile versions, the date, each schedule's steps and loop tree,
and the raw per-call times.  Timing follows one rule everywhere: at least
:data:`MIN_REPEAT` timed calls after at least one warm-up call, reported as
the median (min and max alongside), and every ratio is against a baseline
measured in the same run, on the same inputs.

The measuring itself is :func:`polytile.compare.compare` (legality check,
oracle check, timing), and ``polytile.compare`` also holds the pieces the
scripts use on their own: ``random_inputs``, ``time_calls`` and ``spread``
(median/min/max), ``format_table``.  This module only adds what scripts share
around them.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

from polytile.atomicfile import write_atomic

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
EXAMPLES = ROOT / "examples"

#: Fewer timed calls than this make a median too noisy to compare schedules by.
MIN_REPEAT = 5


def at_least(kind: Callable[[str], Any], least: Any, what: str) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)`` (int or float), at least ``least`` (``what`` names the unit or why).

    >>> at_least(int, 1, "thread")("2")
    2
    """
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"at least {least} {what}")
        return value
    return parse


_repeat = at_least(int, MIN_REPEAT, "timed repeats (a median of fewer is noise)")


def _warmup(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError("at least 1 warm-up call (the first call pays for page faults)")
    return n


def tune_budget(text: str) -> Optional[str]:
    """``--tune``'s value: None for none/off/0, else the budget as given once it parses (a clean usage
    error, not a traceback, for a bad one).

    >>> tune_budget("none"), tune_budget("2m")
    (None, '2m')
    """
    if str(text).lower() in ("none", "0", "0s", "off"):
        return None
    from polytile.errors import PolytileError
    from polytile.tune import parse_budget

    try:
        parse_budget(text)
    except PolytileError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def parser(description: str, default_out: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--repeat", type=_repeat, default=MIN_REPEAT, help="timed calls per schedule (>= 5)")
    p.add_argument("--warmup", type=_warmup, default=1, help="untimed calls first (>= 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the inputs")
    p.add_argument("--out", type=Path, default=RESULTS / default_out, help="JSON results file")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def progress(quiet: bool):
    """A progress callback for polytile.compare.compare (stderr, so stdout stays the table)."""
    def say(text: str) -> None:
        if not quiet:
            print(f"  .. {text}", file=sys.stderr, flush=True)
    return say


def run_info() -> Dict[str, Any]:
    """Which script ran, with which arguments (so a results file says how to reproduce it)."""
    return {"script": f"benchmarks/{Path(sys.argv[0]).name}", "argv": sys.argv[1:]}


def provenance(**extra) -> Dict[str, Any]:
    """Machine, compiler + version, flags, versions, date (polytile.compare.provenance), plus the script."""
    from polytile.compare import provenance as base

    return base(**run_info(), **extra)


def ms(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def write_json(path: Path, data: Dict[str, Any]) -> Path:
    """Write ``data`` atomically (a crash never leaves half a results file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
    return path


def summary_lines(result) -> List[str]:
    """The schedule (steps) of every candidate of a CompareResult, one line each, for the printout."""
    lines = []
    for r in result.rows:
        steps = " -> ".join(_step_text(s) for s in r.steps) or "-"
        lines.append(f"  {r.name}: {steps}")
    return lines


def _step_text(step: Dict[str, Any]) -> str:
    args = ", ".join(f"{k}={v}" for k, v in step.items() if k != "op")
    return f"{step['op']}({args})"


# Pure interpreter arithmetic: one core's worth of demand, no memory traffic, no threads.  It
# exits by itself when the benchmark dies without killing it (its parent changes).
BUSY_CODE = """import os, sys
parent = os.getppid()
sys.stdout.write('ready\\n'); sys.stdout.flush()
x = 1
while os.getppid() == parent:
    for _ in range(1000000):
        x = (x * 1103515245 + 12345) % 2147483648
"""


@contextlib.contextmanager
def busy_processes(n: int, settle: float = 0.5) -> Iterator[List[subprocess.Popen]]:
    """``n`` processes spinning on arithmetic while the block runs; killed (and reaped) after it."""
    procs: List[subprocess.Popen] = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen([sys.executable, "-c", BUSY_CODE], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, text=True))
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"busy process {p.pid} did not start (exit code {p.poll()})")
        if procs:
            time.sleep(settle)  # let the scheduler spread them before anything is timed
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p.stdout:
                p.stdout.close()
