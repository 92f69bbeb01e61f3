"""``polytile compile`` and ``polytile run``: a Tile program's generated C for given sizes, and that kernel
built, run on random inputs, timed and (``--check``) compared with the reference interpreter.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from .. import compare as compare_mod
from .. import targets as targets_mod
# `run --check` and `compare` judge outputs with the same rules and count flops
# the same way; they live in polytile.compare (light to import: numpy only).
from ..compare import COUNT_SCAN_LIMIT, RTOL, Check, check_output, format_table
from ..atomicfile import write_atomic
from ..errors import PolytileError
from . import json_output
from .inputs import (
    FUSION, Target, _saved, _shape_options, _shape_text, _signature, _specialize, check_memory, make_inputs,
    resolve,
)
from .model_commands import schedule_json
from .options import _timing_options


# ---------------------------------------------------------------------------
# compile
# ---------------------------------------------------------------------------


_COMPILE_EPILOG = """\
examples:
  polytile compile examples/matmul.tile --dims M=64,N=48,K=32
  polytile compile examples/conv2d.tile -o conv2d.c --build
  polytile compile examples/gemm.tile --dims "M=32, K=24, N=40" --dtype float64
  polytile compile examples/matmul_bias_relu.tile --fusion max
  polytile compile examples/matmul.tile --schedule sched.json     # from `polytile schedule ... -o sched.json`

Without -o the C goes to stdout and the entry point's signature (and, with
--build, the library path) to stderr.  With --schedule and no --dims (and no
`// dims:` line in the file) the sizes the schedule was saved for are used.
"""


def _schedule_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("schedule")
    g.add_argument("--schedule", metavar="SCHED.json",
                   help="compile with this schedule (from `polytile schedule -o`, or a JSON list of steps "
                        "applied to the default schedule)")
    g.add_argument("--fusion", choices=FUSION,
                   help="base schedule from isl's scheduler with this fusion choice instead of program order")
    g.add_argument("--hardware", default=None, metavar="NAME|FILE",
                   help="hardware descriptor of the target: a preset (see `polytile hw list`), 'host' "
                        "(detected; the default) or a .toml/.json file.  openmp: it guides the automatic "
                        "tiling ('none' turns autotiling off); cuda: the GPU of the mapping (default: "
                        "nvidia-h100)")


def add_compile_parser(subs, formatter, common) -> None:
    """Register ``polytile compile`` on the subcommand parser."""
    p = subs.add_parser("compile", formatter_class=formatter, epilog=_COMPILE_EPILOG,
                        help="print (or write) the generated C for given sizes",
                        description="Generate the scheduled OpenMP C of a Tile program specialised to "
                                    "concrete sizes and dtypes.")
    p.add_argument("file", metavar="FILE.tile", help="the Tile program")
    p.add_argument("-o", "--output", metavar="OUT.c", help="write the C here instead of stdout")
    p.add_argument("--target", default=None,
                   help="code generation target: openmp (C; the default where a C compiler is found), llvm "
                        "(LLVM IR compiled in-process; the default without one), cuda (nvcc), or cuda-emulate "
                        "(the CUDA mapping run on the CPU)")
    p.add_argument("--build", action="store_true",
                   help="also compile the C into a shared library (cached) and print its path")
    _shape_options(p)
    _schedule_options(p)
    common(p, sub=True)
    p.set_defaults(handler=cmd_compile)


def cmd_compile(args) -> int:
    saved = _saved(args)
    target = resolve(args, saved=saved)
    spec = _specialize(target, args, build=args.build, saved=saved)
    src = spec.source
    params = ", ".join(f"{p.name}: {p.kind} {p.dtype}[{_shape_text(p.shape)}]" for p in src.params)
    if args.output:
        out = Path(args.output)
        try:
            write_atomic(out, src.text.encode("utf-8"))
        except OSError as exc:
            raise PolytileError(f"cannot write {out}: {exc.strerror or exc}") from None
        # The C went to a file, so stdout is free for the report.
        report = sys.stdout
        lang = {"llvm": "LLVM IR", "cuda": "CUDA"}.get(getattr(src, "lang", "c"), "C")
        print(f"wrote {out} ({len(src.text.splitlines())} lines of {lang})", file=report)
    else:
        sys.stdout.write(src.text if src.text.endswith("\n") else src.text + "\n")
        # Keep stdout pure C (so `> kernel.c` works); the rest goes to stderr.
        report = sys.stderr
    print(f"entry: {src.entry}({params})", file=report)
    if args.build:
        print(f"library: {spec.library_path or '(in memory: JIT-compiled by LLVM)'}", file=report)
    return 0


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------


_RUN_EPILOG = """\
examples:
  polytile run examples/matmul.tile --dims M=256,N=256,K=256 --repeat 20
  polytile run examples/conv2d.tile --check
  polytile run examples/elementwise_chain.tile --dims N=32 --shape X=6x1 --inputs normal --check
  polytile run examples/matmul_bias_relu.tile --fusion smart --check
  polytile run examples/matmul.tile --dims M=512,N=512,K=512 --schedule sched.json --check

--check compares every output with the reference interpreter: integer
outputs must match exactly; float outputs must satisfy
max_abs_err <= rtol * max(1, max|ref|) with rtol 1e-4 (float32) or 1e-5
(float64).  A failed check exits with status 1.  Times are per kernel call,
including the allocation of its outputs.
"""


def add_run_parser(subs, formatter, common) -> None:
    """Register ``polytile run`` on the subcommand parser."""
    p = subs.add_parser("run", formatter_class=formatter, epilog=_RUN_EPILOG,
                        help="compile, run on random inputs, time, and optionally check",
                        description="Compile a Tile program for the given sizes, run it on random inputs "
                                    "(warm-up, then timed repeats) and print each output's shape and dtype, "
                                    "the time per call and GFLOP/s.  With --check, compare the outputs "
                                    "with the reference interpreter.")
    p.add_argument("file", metavar="FILE.tile", help="the Tile program")
    p.add_argument("--target", default=None,
                   help="code generation target: openmp (C; the default where a C compiler is found), llvm "
                        "(LLVM IR compiled in-process; the default without one), cuda (nvcc), or cuda-emulate "
                        "(the CUDA mapping run on the CPU)")
    p.add_argument("--check", action="store_true", help="compare with the reference interpreter; exit 1 on FAIL")
    _timing_options(p)
    p.add_argument("--inputs", choices=("int", "normal"), default="int",
                   help="int: integers in [-4, 4] (exact, the default); normal: standard normal.  "
                        "A file with `// inputs: positive` gets values in [1, 4] either way")
    _shape_options(p)
    _schedule_options(p)
    json_output.add_json_option(p, "dims, inputs, schedule, timing (seconds), GFLOP/s, the outputs' shapes "
                                   "and dtypes, --check's verdict per output, kernel cache hit or miss, "
                                   "provenance")
    common(p, sub=True)
    p.set_defaults(handler=cmd_run)


def count_flops(spec) -> Optional[int]:
    """2 x the iteration points of every contraction update (a combine and a fold each)."""
    return compare_mod.count_flops(spec, COUNT_SCAN_LIMIT)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _require_cuda_device(spec=None) -> None:
    """A NoDeviceError (exit 3) unless a CUDA device can run kernels here; with ``spec`` (a built CUDA
    specialisation) ask the CUDA runtime itself through the library's ``<entry>_has_device``."""
    from ..errors import NoDeviceError

    hint = ("`--target cuda` runs kernels on an NVIDIA GPU; use --target cuda-emulate to run the same CUDA "
            "mapping on the CPU")
    if spec is None:
        from ..targets.cuda import no_device_reason

        reason = no_device_reason()
        if reason is not None:
            raise NoDeviceError(f"no CUDA device is available (nvidia-smi not found): {hint}")
        return
    from .. import runtime

    try:
        runtime.load(spec.library_path).function(f"{spec.source.entry}_has_device", 0)()
    except PolytileError as exc:
        code = re.search(r"error code (\d+)", str(exc))
        meaning = {"35": "the CUDA driver is missing or older than the CUDA runtime",
                   "100": "no CUDA-capable device is detected"}.get(code.group(1) if code else "", str(exc))
        raise NoDeviceError(f"no CUDA device is available ({meaning}): {hint}") from None


@dataclass
class RunResult:
    """What ``polytile run`` measured, for its two renderings (the text report and ``--json``)."""

    target: Target
    spec: object                      # the Specialization that ran
    outs: Tuple[np.ndarray, ...]
    times: List[float]                # seconds per timed call
    flops: Optional[int]              # None: not counted (see count_flops)
    checks: Optional[List[Check]]     # None without --check
    kernel_cache: str                 # "hit": no C compiler ran for this kernel; "miss": it was built now
    values: str                       # what the random inputs are, in words

    @property
    def ok(self) -> bool:
        return self.checks is None or all(c.ok for c in self.checks)


def cmd_run(args) -> int:
    result = _measure(args)
    if getattr(args, "json", False):
        json_output.emit(_run_document(args, result))
    else:
        _print_run(args, result)
    return 0 if result.ok else 1


def _measure(args) -> RunResult:
    """Build, run, time and (--check) check the kernel of ``args``."""
    from .. import pipeline, runtime

    saved = _saved(args)
    target = resolve(args, saved=saved)
    names = target.program.input_names
    # Sizes first: a run that cannot fit fails now, naming the sizes, not in an allocation later.
    check_memory(list(zip(names, target.shapes, target.dtypes)), "the inputs")
    if getattr(args, "target", "openmp") == "cuda":
        _require_cuda_device()
    compiles = runtime.stats.compiles
    spec = _specialize(target, args, build=True, saved=saved)
    kernel_cache = "miss" if runtime.stats.compiles > compiles else "hit"
    params = [(p.name, p.shape, p.dtype) for p in spec.source.params]
    if args.check:  # the reference interpreter makes its own outputs
        params += [(f"reference {p.name}", p.shape, p.dtype) for p in spec.source.params if p.kind == "output"]
    check_memory(params, "the inputs, outputs and temporaries" + (" (and the reference's outputs)"
                                                                    if args.check else ""))
    if getattr(args, "target", "openmp") == "cuda":
        _require_cuda_device(spec)
    arrays = make_inputs(target, args.inputs, args.seed)
    results: List[Tuple[np.ndarray, ...]] = []

    def call():
        out = pipeline.run_specialization(spec, arrays)
        results[:] = [out if isinstance(out, tuple) else (out,)]

    times = compare_mod.time_calls(call, args.repeat, args.warmup)
    outs = results[0]
    checks = None
    if args.check:
        from .. import interpreter

        ref = interpreter.run(target.program, *arrays)
        refs = ref if isinstance(ref, tuple) else (ref,)
        checks = [check_output(n, g, w) for n, g, w in zip(spec.bound.program.outputs, outs, refs)]
    values = {"int": "integers in [1, 4]" if target.hints.positive else "integers in [-4, 4]",
              "normal": "uniform in [1, 4]" if target.hints.positive else "standard normal"}[args.inputs]
    kinds = {np.dtype(d).kind for d in target.dtypes}
    if not target.hints.positive and kinds & {"u", "b"}:  # compare.random_inputs' rule for these types
        values += "; " + ", ".join(w for k, w in (("u", "unsigned ones non-negative"), ("b", "bools either"))
                                   if k in kinds)
    return RunResult(target, spec, outs, times, count_flops(spec), checks, kernel_cache, values)


def _tolerance_rule(outs) -> str:
    """The rule --check held the outputs to, in words."""
    kinds = {np.dtype(o.dtype).name for o in outs}
    rules = [f"{dt} max_abs_err <= {RTOL[dt]:g} * max(1, max|ref|)" for dt in sorted(kinds & set(RTOL))]
    if kinds - set(RTOL):
        rules.append("integer/bool outputs exact")
    return "; ".join(rules)


def _print_run(args, r: RunResult) -> None:
    spec, target = r.spec, r.target
    med, best, _ = compare_mod.spread(r.times)
    dims = ", ".join(f"{k}={v}" for k, v in spec.bound.dims.items()) or "none"
    print(f"kernel   {spec.source.entry} from {target.path}")
    print(f"dims     {dims}")
    print(f"inputs   {_signature(target) or '(none)'}  ({r.values}, seed {args.seed})")
    print(f"time     median {_ms(med)}, min {_ms(best)} per call over {args.repeat} run(s) "
          f"after {args.warmup} warm-up")
    flops = r.flops
    if flops is None:
        print("flops    not counted (a contraction domain is too irregular and large to count quickly)")
    elif flops:
        print(f"flops    {flops} (2 per contraction point): {flops / med / 1e9:.2f} GFLOP/s at the median, "
              f"{flops / best / 1e9:.2f} at the min")

    names = spec.bound.program.outputs
    rows = [["output", "shape", "dtype"]]
    if r.checks is not None:
        rows[0] += ["max_abs_err", "tolerance", "check"]
    for k, (name, out) in enumerate(zip(names, r.outs)):
        row = [name, _shape_text(out.shape), str(out.dtype)]
        if r.checks is not None:
            c = r.checks[k]
            row += [f"{c.err:.3g}", c.tol_text, "PASS" if c.ok else "FAIL"]
        rows.append(row)
    print()
    print(format_table(rows))
    if r.checks is None:
        return
    for c in r.checks:
        if c.detail:
            print(f"  {c.name}: {c.detail}")
    print("tolerance: " + _tolerance_rule(r.outs))
    print(f"check against the reference interpreter: {'PASS' if r.ok else 'FAIL'}")


def _run_document(args, r: RunResult) -> dict:
    """``run --json``: the document (docs/json-output.md, "polytile run --json")."""
    spec, target = r.spec, r.target
    timing = compare_mod.spread(r.times)
    gflops = None
    if r.flops and timing.median and timing.min:
        gflops = {"median": r.flops / timing.median / 1e9, "min": r.flops / timing.min / 1e9}
    check = None
    if r.checks is not None:
        check = {"ok": r.ok, "rule": _tolerance_rule(r.outs),
                 "outputs": [{"name": c.name, "ok": c.ok, "max_abs_err": c.err, "tolerance": c.tol,
                              "exact": c.tol_text == "exact", "detail": c.detail or None} for c in r.checks]}
    return json_output.document(
        "run",
        file=str(target.path),
        kernel=spec.source.entry,
        target=getattr(args, "target", None) or targets_mod.default_name(),
        dims=dict(spec.bound.dims),
        dims_source=_DIMS_SOURCE.get(target.dims_source),
        inputs=[{"name": n, "shape": list(s), "dtype": dt}
                for n, s, dt in zip(target.program.input_names, target.shapes, target.dtypes)],
        input_values={"kind": args.inputs, "description": r.values, "seed": args.seed},
        schedule={"file": getattr(args, "schedule", None), **schedule_json(spec.schedule)},
        timing={"median_s": timing.median, "min_s": timing.min, "max_s": timing.max, "repeat": args.repeat,
                "warmup": args.warmup, "times_s": list(r.times)},
        flops=r.flops,
        gflops=gflops,
        outputs=[{"name": n, "shape": list(o.shape), "dtype": str(o.dtype)}
                 for n, o in zip(spec.bound.program.outputs, r.outs)],
        check=check,
        kernel_cache=r.kernel_cache,
        library=str(spec.library_path) if spec.library_path else None,
        provenance=compare_mod.provenance(),
    )


#: Target.dims_source as the documents spell it.
_DIMS_SOURCE = {"--dims": "option", "the file": "file", "the schedule": "schedule"}
