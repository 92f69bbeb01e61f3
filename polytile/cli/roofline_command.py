"""``polytile roofline``: a hardware descriptor's roofline, with Tile kernels placed on it by the cost model
and, when measured, by their attained rate -- a table always, a figure with -o, JSON with --json.

A kernel's point is its schedule's prediction (:func:`polytile.plots.kernel_point`: flops and DRAM bytes
from :func:`polytile.cost.predict`).  ``--run`` measures each kernel with :func:`polytile.compare.compare`
(the timing and the oracle check every command uses); ``--measured`` reads results already measured
(``compare -o results.json``, ``tune --json result.json``) and places each measured schedule.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..compare import format_table
from ..atomicfile import write_atomic
from ..errors import PolytileError
from .argtypes import arg_type, figure_path, nonnegative_int, positive_int
from .inputs import DTYPES, UsageError, _header_dim_names, _note, parse_dims, resolve


_ROOFLINE_EPILOG = """\
examples:
  polytile roofline -o host-roofline.png                          # the machine alone
  polytile roofline examples/matmul.tile examples/softmax.tile --dims M=512,N=512,K=512 -o roof.png
  polytile roofline examples/matmul.tile:M=64,N=64,K=64 examples/matmul.tile:M=1024,N=1024,K=1024 --run -o mm.png
  polytile roofline examples/conv2d.tile --hardware x86-avx512 --json roof.json
  polytile roofline --measured mm.json --peak 475 -o measured.png   # mm.json from `polytile compare -o mm.json`

The ceilings come from the hardware descriptor (--hardware; `polytile hw show`
prints it): the peak GFLOP/s (float32; float64 too when a kernel computes in
it), --peak (a rate you measured) as a dotted line, and one bandwidth slope per
memory level (GFLOP/s = GB/s x intensity), log-log.

Each KERNEL is a Tile file, with its sizes after a colon (FILE.tile:M=64,N=64)
or from --dims (names a kernel does not use are ignored for it) or from the
file's `// dims:` line.  It is scheduled as `polytile compile` would for the
descriptor and placed at its arithmetic intensity (flops per byte from DRAM)
and the rate the cost model predicts (hollow marker); --run also compiles,
checks and times it here (filled marker: the rate attained).  --measured adds
every checked schedule of a `compare -o` JSON, or the baseline and best of a
`tune --json` result, at its measured rate.  Only the DRAM slope bounds a
kernel at its intensity; the inner levels' slopes are for reference.

The table (always printed) gives per kernel: flops, DRAM bytes, intensity,
what the model says bounds it, the roof at its intensity, the predicted and
measured GFLOP/s and the fraction of the roof attained.
"""


def add_parser(subs, formatter, common) -> None:
    """Register ``polytile roofline`` on the subcommand parser."""
    p = subs.add_parser("roofline", formatter_class=formatter, epilog=_ROOFLINE_EPILOG,
                        help="the machine's roofline, with kernels placed by the cost model and by measurement",
                        description="Print (and with -o draw) the roofline of a hardware descriptor -- its peak rate "
                                    "and the bandwidth of each memory level -- with Tile kernels placed at their "
                                    "arithmetic intensity and predicted rate (the cost model), and at their measured "
                                    "rate with --run or --measured.  Figures need matplotlib "
                                    "(pip install -e '.[plots]').")
    p.add_argument("kernels", nargs="*", metavar="KERNEL.tile[:DIMS]",
                   help="Tile programs to place, each optionally with its sizes: matmul.tile:M=64,N=64,K=64")
    p.add_argument("--hardware", default="host", metavar="NAME|FILE",
                   help="the descriptor: 'host' (detected; the default), a preset (`polytile hw list`) or a file")
    p.add_argument("--dims", action="append", type=arg_type(parse_dims, "dims"), metavar="M=64,N=64",
                   help="sizes of the kernels that give none after a colon (repeatable)")
    p.add_argument("--dtype", default=None, choices=DTYPES, help="element type of every input (default: float32)")
    p.add_argument("--run", action="store_true", help="compile, check and time each kernel here to place it by its "
                                                      "attained rate too")
    p.add_argument("--repeat", type=positive_int, default=10, metavar="N", help="--run: timed calls (default: 10)")
    p.add_argument("--warmup", type=nonnegative_int, default=2, metavar="N",
                   help="--run: untimed calls first (default: 2)")
    p.add_argument("--measured", action="append", metavar="RESULTS.json",
                   help="results of `polytile compare -o` or `polytile tune --json` to place (repeatable)")
    p.add_argument("--peak", type=arg_type(_positive_float, "peak"), metavar="GFLOPS",
                   help="a peak rate you measured, in GFLOP/s, drawn as a second ceiling")
    p.add_argument("-o", "--output", type=figure_path, metavar="FIG.png|.svg|.pdf", help="draw the roofline here")
    p.add_argument("--json", dest="json_out", metavar="ROOF.json", help="write the table and the ceilings as JSON")
    common(p, sub=True)
    p.set_defaults(handler=cmd_roofline)


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"expected a positive number, got {text!r}")
    return value


def _split(spec: str) -> Tuple[Path, Optional[Dict[str, int]]]:
    """``FILE.tile:M=64,N=64`` -> (path, sizes); a bare path -> (path, None)."""
    path, sep, dims = spec.rpartition(".tile:")
    if not sep:
        return Path(spec), None
    path += ".tile"
    try:
        return Path(path), parse_dims(dims)
    except ValueError as exc:
        raise UsageError(f"{spec}: {exc}") from None


def _label(path: Path, dims: Dict[str, int], shapes) -> str:
    sizes = "x".join(str(v) for v in dims.values()) if dims else ",".join("x".join(map(str, s)) for s in shapes)
    return f"{path.stem} {sizes}".strip()


def _tile_kernels(args, hw) -> List[Any]:
    """The KERNEL arguments as KernelPoints: compile's default schedule for the descriptor, predicted, and
    measured with --run."""
    from .. import compare as compare_mod
    from .. import pipeline, plots

    shared: Dict[str, int] = {}
    for d in args.dims or ():
        shared.update(d)
    points = []
    for spec in args.kernels:
        path, own = _split(spec)
        if path.suffix != ".tile":
            raise UsageError(f"{spec}: roofline places Tile programs (FILE.tile); the cost model has no C frontend")
        program = pipeline.load_program(path) if path.is_file() else None
        if program is not None and own is None and shared:
            # --dims is shared by every kernel: give each only the dimensions its inputs have.
            header = set(_header_dim_names(program)) | set(pipeline.size_inputs(program))
            own = {k: v for k, v in shared.items() if k in header} or None
        ns = argparse.Namespace(file=str(path), dims=[own] if own else None, shape=None, dtype=args.dtype, dtypes=None)
        target = resolve(ns)
        shapes = dict(zip(target.program.input_names, target.shapes))
        sched = pipeline.schedule(target.program, target.size_values, shapes=shapes, dtypes=list(target.dtypes), hardware=hw,
                                  min_parallel_work=None)
        measured = None
        name = _label(path, target.dims, target.shapes)
        if args.run:
            _note(f"{name}: compiling, checking and timing ({args.warmup} warm-up, {args.repeat} timed)")
            result = compare_mod.compare(target.program, target.shapes, target.dtypes,
                                         [compare_mod.Candidate("default", sched, "compile's default")],
                                         repeat=args.repeat, warmup=args.warmup, positive=target.hints.positive,
                                         sizes=target.size_values)
            row = result.rows[0]
            if row.check != "ok":
                raise PolytileError(f"{name}: {row.check}: {row.reason}")
            measured = row.median
        points.append(plots.kernel_point(sched, hw, name=name, measured_s=measured))
    return points


def _measured_kernels(path: Path, hw) -> List[Any]:
    """Every checked schedule of a `compare -o` JSON, or the baseline and best of a `tune --json` result."""
    from .. import pipeline, plots

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolytileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PolytileError(f"{path}: not JSON ({exc})") from None
    if isinstance(doc, dict) and "polytile_tune" in doc:
        inputs = doc.get("inputs") or {}
        shapes = {n: v["shape"] for n, v in inputs.items()}
        dtypes = [v["dtype"] for v in inputs.values()]
        runs = [("baseline", doc["baseline"]["steps"], doc["baseline"]["median_s"]),
                ("tuned", doc["best"]["steps"], doc["best"]["time_s"])]
        program = doc["program"]
    elif isinstance(doc, dict) and isinstance(doc.get("rows"), list) and isinstance(doc.get("provenance"), dict):
        prov = doc["provenance"]
        if "program" not in prov:
            raise PolytileError(f"{path}: results of a C file cannot be placed (the cost model reads Tile programs)")
        program = prov["program"]
        names = pipeline.load_program(program).input_names
        shapes = dict(zip(names, prov["shapes"]))
        dtypes = prov["dtypes"]
        runs = [(r["name"], r["steps"], r["median_s"]) for r in doc["rows"] if r.get("check") == "ok" and r.get("median_s")]
    else:
        raise PolytileError(f"{path}: expected the JSON of `polytile compare -o` or `polytile tune --json`")
    stem = Path(str((doc.get("provenance") or {}).get("file", path))).stem
    points = []
    for name, steps, seconds in runs:
        sched = pipeline.schedule(program, shapes=shapes, dtypes=dtypes, steps=steps)
        points.append(plots.kernel_point(sched, hw, name=f"{stem}: {name}", measured_s=seconds))
    return points


def _table(rows: List[Dict[str, Any]]) -> str:
    def num(x, fmt="{:.3g}"):
        return "-" if x is None else fmt.format(x)

    head = ["kernel", "dtype", "GFLOP", "DRAM MB", "flop/B", "bound", "roof GFLOP/s", "predicted", "measured",
            "of roof"]
    body = [[r["name"], r["dtype"], num(r["flops"] / 1e9), num(r["dram_bytes"] / 1e6), num(r["intensity"]),
             r["bound"] or "-", num(r["roof_gflops"], "{:.1f}"), num(r["predicted_gflops"], "{:.1f}"),
             num(r["measured_gflops"], "{:.1f}"), num(r["fraction_of_roof"] and 100 * r["fraction_of_roof"], "{:.0f}%")]
            for r in rows]
    return format_table(body, head)


def cmd_roofline(args) -> int:
    from .. import plots
    from ..plots.roofline import descriptor, peak_gflops, slopes

    if args.output:
        plots.require()  # before compiling or timing anything
    if args.run and not args.kernels:
        raise UsageError("--run times the KERNEL arguments; name some")
    hw = descriptor(args.hardware)
    if (args.kernels or args.measured) and hw.kind != "cpu":
        raise PolytileError(f"{hw.name} is a {hw.kind}: the cost model places kernels on CPU descriptors only; "
                            f"without kernels its roofline alone is drawn")
    kernels = _tile_kernels(args, hw) if args.kernels else []
    for path in args.measured or ():
        kernels += _measured_kernels(Path(path), hw)
    rows = plots.kernel_rows(hw, kernels)
    peaks = {d: peak_gflops(hw, d) for d in ("float32", "float64")}
    bws = slopes(hw)
    print(f"machine  {hw.name}: peak {peaks['float32']:.4g} GFLOP/s float32, {peaks['float64']:.4g} float64"
          + (f"; measured peak {args.peak:g}" if args.peak else ""))
    ridge = (f"; ridge point (DRAM, float32) {peaks['float32'] / bws[hw.dram.name]:.3g} flop/B"
             if hw.dram.name in bws else "")
    print("memory   " + ", ".join(f"{lv} {gbs:.4g} GB/s" for lv, gbs in bws.items()) + ridge)
    if rows:
        print()
        print(_table(rows))
    if args.json_out:
        doc = {"hardware": hw.name, "peak_gflops": peaks, "measured_peak_gflops": args.peak,
               "bandwidth_gbs": bws, "kernels": rows}
        try:
            write_atomic(Path(args.json_out), (json.dumps(doc, indent=2) + "\n").encode("utf-8"))
        except OSError as exc:
            raise PolytileError(f"cannot write {args.json_out}: {exc.strerror or exc}") from None
        print(f"wrote {args.json_out}")
    if args.output:
        plots.roofline(hw, kernels, peak=args.peak, path=args.output)
        print(f"wrote {args.output} (figure)")
    return 0
