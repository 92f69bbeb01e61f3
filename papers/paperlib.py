"""What every papers/ script shares: its command line, provenance, results JSON, figures, README block.

A script runs its experiment (``--quick``: a smoke run of seconds, for the tests), writes
``results.json`` (the data and :func:`provenance`) and its PNG figures into ``--out`` (default: its own
folder), and, when it wrote into its own folder, rewrites the block of its README between
``<!-- results:begin -->`` and ``<!-- results:end -->`` from the JSON (its ``render`` function), so
every number the README quotes is one the script produced.  ``tests/test_papers.py`` runs every script
with ``--quick`` and checks each committed README block against its committed JSON.

    >>> # args = parse("Pluto's time tiling", __file__); ...; finish(args, data, render, figures)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Mapping, Optional

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def parse(description: str, script: str, extra: Optional[Callable[[argparse.ArgumentParser], None]] = None,
          argv=None) -> argparse.Namespace:
    """The common options: ``--quick`` and ``--out`` (plus the script's own, from ``extra``)."""
    here = Path(script).resolve().parent
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke run (tiny sizes, few repeats) in seconds")
    p.add_argument("--out", type=Path, default=None,
                   help="folder for results.json and the figures (default: the paper's folder; --quick: "
                        "a temporary one is not made for you, so give one)")
    from polytile import executor

    executor.add_arguments(p)  # --workers local:N / --scheduler ADDRESS: Tile measurements on Dask workers
    if extra:
        extra(p)
    args = p.parse_args(argv)
    if args.workers and args.scheduler:
        p.error("give --workers or --scheduler, not both")
    # What tune's and compare's executor= take: None (this process), "local:N" or a scheduler address.
    args.executor = args.workers or args.scheduler
    args.here = here
    if args.out is None:
        if args.quick:
            p.error("--quick writes nothing into the paper's folder: give --out DIR")
        args.out = here
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def provenance(**extra) -> Dict[str, Any]:
    """Machine, compilers and versions (polytile.compare's record), the command line, and ``extra``."""
    from polytile.compare import provenance as base

    return base(command=" ".join([Path(sys.executable).name, *sys.argv]), **extra)


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only), or a clear message when it is missing."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("papers/ draws its figures with matplotlib: pip install -e '.[plots]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, out: Path, name: str) -> str:
    """Write ``fig`` as ``out/name`` (PNG at 120 dpi), close it, and return the file name."""
    if not fig.get_tight_layout() and fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(out / name, dpi=120)
    if fig.canvas.manager is not None:  # a pyplot figure (polytile.plots makes plain Figures)
        pyplot().close(fig)
    return name


def write_json(out: Path, data: Mapping[str, Any]) -> Path:
    path = out / "results.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=float) + "\n")
    os.replace(tmp, path)
    return path


def readme_block(readme: Path) -> Optional[str]:
    """The generated block of ``readme`` (between the markers), or None when it has none."""
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), readme.read_text(), re.S)
    return m.group(1) if m else None


def finish(args, data: Dict[str, Any], render: Callable[[Mapping[str, Any]], str], figures: Iterable[str]) -> None:
    """Write the JSON, list the figures, and refresh the README block when writing into the paper's folder."""
    data = dict(data, figures=sorted(figures))
    data["provenance"] = dict(data["provenance"], executor=args.executor or "in-process")
    path = write_json(args.out, data)
    text = render(json.loads(path.read_text()))
    print(text)
    if args.out == args.here:
        readme = args.here / "README.md"
        old = readme.read_text()
        new, n = re.subn(re.escape(BEGIN) + r"\n.*?" + re.escape(END), lambda m: f"{BEGIN}\n{text}{END}", old,
                         flags=re.S)
        if n != 1:
            raise SystemExit(f"{readme}: no {BEGIN} ... {END} block to fill")
        readme.write_text(new)
    print(f"wrote {path} and {', '.join(data['figures'])} in {args.out}", file=sys.stderr)


def table(rows, headers) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def x(v: Optional[float], digits: int = 2) -> str:
    """A ratio as text (``-`` when missing)."""
    return "-" if v is None else f"{v:.{digits}f}x"


def machine_line(p: Mapping[str, Any]) -> str:
    """``"Intel(R) Xeon(R) Processor (2 CPUs), gcc 12.2.0, 2026-11-25"`` from a provenance record."""
    m, c = p.get("machine", {}), p.get("compiler", {})
    version = (c.get("version") or "").split(")")[-1].strip() or c.get("version", "?")
    return (f"{m.get('processor', '?')} ({m.get('cpu_count', '?')} CPUs), {c.get('name', 'cc')} {version}, "
            f"numpy {p.get('numpy', '?')}, {str(p.get('date', '?'))[:10]}")


def say(quiet: bool = False) -> Callable[[str], None]:
    return (lambda t: None) if quiet else (lambda t: print(f"  .. {t}", file=sys.stderr, flush=True))
