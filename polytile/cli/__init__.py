"""The ``polytile`` command line: compile, run (and check), inspect, schedule and compare Tile programs.

    polytile compile examples/matmul.tile --dims M=64,N=48,K=32        # generated OpenMP C
    polytile run examples/conv2d.tile --check                         # sizes from the file's `// dims:` line
    polytile show examples/softmax.tile --dims M=4,N=5                 # IR, Scop, dependences, schedule tree
    polytile deps examples/matmul.tile                                # the dependences, one relation at a time
    polytile schedule examples/matmul.tile --apply steps.json -o s.json   # transform, check, save a schedule
    polytile run examples/matmul.tile --schedule s.json --check       # ... and use it
    polytile compare examples/matmul.tile --tile 32,64 --fusion smart # legality, correctness, speed side by side
    polytile compare tests/c_kernels/gemm.c --dims ni=512,nj=512,nk=512   # C: the file vs polytile opt, bitwise
    polytile cache verify                                             # re-hash cached kernels, drop bad ones
  polytile examples --copy my-examples                              # the shipped examples, to edit and run

Every subcommand goes through :mod:`polytile.pipeline` (``load_program``,
``shapes_from_dims``, ``parse_dims``, ``schedule``, ``compile`` ->
``Kernel.specialize_shapes``, ``run_specialization``) or :mod:`polytile.compare`;
C files go through :mod:`polytile.copt` and :mod:`polytile.crun` (builds and
calls for ``compare``).  This module only turns command-line text into those
calls and their results into text.  The pipeline is imported lazily so that
``polytile --help`` does not pay for islpy.

Exit codes: 0 success, 1 a user error (any :class:`~polytile.errors.PolytileError`,
a failed ``--check``, a missing input file), 2 bad command-line arguments, 3 the
environment (:class:`~polytile.errors.PolytileEnvironmentError`: no compiler, no
GPU, an untrusted or unwritable kernel cache, a bad ``POLYTILE_*`` setting), 70
an internal error (a bug: one line, the traceback only with ``-v`` or
``POLYTILE_DEBUG``), 130 interrupted (Ctrl-C, at any moment, no traceback).
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..version import __version__
from .. import compare as compare_mod
# `run --check` and `compare` judge outputs with the same rules and count flops
# the same way; they live in polytile.compare (light to import: numpy only).
from .argtypes import arg_type, nonnegative_int, positive_int
from ..compare import COUNT_SCAN_LIMIT, RTOL, Check, check_output, format_table
from ..config import get_config, override
from ..memory import bytes_text
from ..errors import PolytileEnvironmentError, PolytileError
from . import examples as examples_cmd
from .inputs import (  # noqa: F401  (the shared half of the commands; re-exported for tests and tune)
    DTYPES, FUSION, PROG, FileHints, ScheduleFile, Target, UsageError, _dtypes, _hardware_option,
    _header_dim_names, _items, _note, _recipe, _saved, _shape_options, _shape_text, _signature, _specialize, compile_options,
    check_memory, load_schedule_file, make_inputs, parse_dims, parse_dtypes, parse_shapes,
    read_hints, resolve,
)

def cmd_compile(args) -> int:
    saved = _saved(args)
    target = resolve(args, saved=saved)
    spec = _specialize(target, args, build=args.build, saved=saved)
    src = spec.source
    params = ", ".join(f"{p.name}: {p.kind} {p.dtype}[{_shape_text(p.shape)}]" for p in src.params)
    if args.output:
        out = Path(args.output)
        try:
            out.write_text(src.text, encoding="utf-8")
        except OSError as exc:
            raise PolytileError(f"cannot write {out}: {exc.strerror or exc}") from None
        # The C went to a file, so stdout is free for the report.
        report = sys.stdout
        print(f"wrote {out} ({len(src.text.splitlines())} lines of C)", file=report)
    else:
        sys.stdout.write(src.text if src.text.endswith("\n") else src.text + "\n")
        # Keep stdout pure C (so `> kernel.c` works); the rest goes to stderr.
        report = sys.stderr
    print(f"entry: {src.entry}({params})", file=report)
    if args.build:
        print(f"library: {spec.library_path}", file=report)
    return 0


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------


def count_points(dom) -> Optional[int]:
    """Points of an isl Set, or None past :data:`COUNT_SCAN_LIMIT` (see :func:`polytile.compare.count_points`)."""
    # The limit is read here, at call time, so it stays adjustable on this module.
    return compare_mod.count_points(dom, COUNT_SCAN_LIMIT)


def count_flops(spec) -> Optional[int]:
    """2 x the iteration points of every contraction update (a combine and a fold each)."""
    return compare_mod.count_flops(spec, COUNT_SCAN_LIMIT)


def _table(rows: List[List[str]]) -> str:
    return format_table(rows)


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


def cmd_run(args) -> int:
    from .. import pipeline

    saved = _saved(args)
    target = resolve(args, saved=saved)
    names = target.program.input_names
    # Sizes first: a run that cannot fit fails now, naming the sizes, not in an allocation later.
    check_memory(list(zip(names, target.shapes, target.dtypes)), "the inputs")
    if getattr(args, "target", "openmp") == "cuda":
        _require_cuda_device()
    spec = _specialize(target, args, build=True, saved=saved)
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
    med, best = statistics.median(times), min(times)

    dims = ", ".join(f"{k}={v}" for k, v in spec.bound.dims.items()) or "none"
    values = {"int": "integers in [1, 4]" if target.hints.positive else "integers in [-4, 4]",
              "normal": "uniform in [1, 4]" if target.hints.positive else "standard normal"}[args.inputs]
    print(f"kernel   {spec.source.entry} from {target.path}")
    print(f"dims     {dims}")
    print(f"inputs   {_signature(target) or '(none)'}  ({values}, seed {args.seed})")
    print(f"time     median {_ms(med)}, min {_ms(best)} per call over {args.repeat} run(s) "
          f"after {args.warmup} warm-up")
    flops = count_flops(spec)
    if flops is None:
        print("flops    not counted (a contraction domain is too irregular and large to count quickly)")
    elif flops:
        print(f"flops    {flops} (2 per contraction point): {flops / med / 1e9:.2f} GFLOP/s at the median, "
              f"{flops / best / 1e9:.2f} at the min")

    names = spec.bound.program.outputs
    rows = [["output", "shape", "dtype"]]
    checks: List[Check] = []
    if args.check:
        from .. import interpreter

        rows[0] += ["max_abs_err", "tolerance", "check"]
        ref = interpreter.run(target.program, *arrays)
        refs = ref if isinstance(ref, tuple) else (ref,)
        checks = [check_output(n, g, w) for n, g, w in zip(names, outs, refs)]
    for k, (name, out) in enumerate(zip(names, outs)):
        row = [name, _shape_text(out.shape), str(out.dtype)]
        if checks:
            c = checks[k]
            row += [f"{c.err:.3g}", c.tol_text, "PASS" if c.ok else "FAIL"]
        rows.append(row)
    print()
    print(_table(rows))
    if not args.check:
        return 0
    for c in checks:
        if c.detail:
            print(f"  {c.name}: {c.detail}")
    kinds = {np.dtype(o.dtype).name for o in outs}
    rules = [f"{dt} max_abs_err <= {RTOL[dt]:g} * max(1, max|ref|)" for dt in sorted(kinds & set(RTOL))]
    if kinds - set(RTOL):
        rules.append("integer/bool outputs exact")
    print("tolerance: " + "; ".join(rules))
    ok = all(c.ok for c in checks)
    print(f"check against the reference interpreter: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


# ---------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------


def _schedule_yaml(schedule) -> str:
    """The schedule tree as block-style isl YAML (one node per line), falling back to isl's flow style."""
    import islpy as isl

    if not isinstance(schedule, isl.Schedule):
        schedule = schedule.tree()  # a polytile.schedule.Schedule: its equivalent isl tree
    try:
        printer = isl.Printer.to_str(schedule.get_ctx()).set_yaml_style(isl.yaml_style.BLOCK)
        return printer.print_schedule(schedule).get_str().rstrip()
    except (AttributeError, isl.Error):
        return str(schedule)


def _is_c(args) -> bool:
    return str(args.file).endswith(".c")


def _c_command(handler: Callable[..., int]) -> Callable[..., int]:
    """A C command: the frontend's messages name command-line flags (--assume-no-alias, --pure NAME,
    --param N=... for opt, --dims N=... for the others), not the Python keywords of the same options."""
    flags = {} if handler.__name__ == "cmd_opt" else {"params": "--dims {name}=<int>"}

    def run(*a, **k) -> int:
        from ..frontends.c.source import cli_spelling

        with cli_spelling(**flags):
            return handler(*a, **k)

    run.__name__, run.__doc__ = handler.__name__, handler.__doc__
    return run


#: Options of the C preprocessor and of the purity list, as argparse stores them (see _cpp_options).
_C_PREPROCESSOR = ("include_dirs", "defines", "undefines", "std", "pure")


def _cpp_args(args) -> List[str]:
    """-I/-D/-U/--std of a C command, in gcc's spelling, for the frontend and for every build."""
    out: List[str] = []
    for d in getattr(args, "include_dirs", None) or ():
        out += ["-I", d]
    for d in getattr(args, "defines", None) or ():
        out += ["-D", d]
    for u in getattr(args, "undefines", None) or ():
        out += ["-U", u]
    if getattr(args, "std", None):
        out.append(f"-std={args.std}")
    return out


def _pure(args) -> Tuple[str, ...]:
    return tuple(getattr(args, "pure", None) or ())


def _c_params(args) -> Dict[str, int]:
    """``--dims`` of a C file: values fixing its parameters (function arguments and macros)."""
    params: Dict[str, int] = {}
    for d in getattr(args, "dims", None) or ():
        params.update(d)
    return params


def _c_regions(args):
    """The regions of a C file (``--function NAME``: that function's body), non-affine ones marked skipped."""
    from ..frontends.c import extract

    params = _c_params(args)
    return extract(args.file, function=getattr(args, "function", None), params=params or None,
                   skip_nonaffine=True, assume_no_alias=getattr(args, "assume_no_alias", False),
                   reassociate=getattr(args, "reassociate", False), pure=_pure(args), cpp_args=_cpp_args(args))


def _c_where(path, cs) -> str:
    """``file:first-last (function)``: how every C command names a region."""
    return f"{path}:{cs.lines[0]}-{cs.lines[1]} ({cs.function})"


def _c_region_header(args, cs) -> str:
    params = ", ".join(cs.params)
    fixed = ", ".join(f"{k}={v}" for k, v in sorted(cs.fixed.items()))
    return (f"// {_c_where(args.file, cs)}" + (f"; parameters {params}" if params else "")
            + (f"; fixed {fixed}" if fixed else ""))


def _c_dependence_lines(cs, *, indent: str, meanings: bool) -> List[str]:
    """The dependence relations of a region (DEP_RELATIONS order), as ``deps`` and ``show`` print them."""
    from .. import deps as deps_mod

    dep = deps_mod.compute(cs.scop)
    order = [st.name for st in cs.scop.statements]
    return _dependence_lines(dep, order, indent=indent, meanings=meanings)


def _dependence_lines(dep, order: Sequence[str], *, indent: str, meanings: bool) -> List[str]:
    out: List[str] = []
    for title, attr, meaning in DEP_RELATIONS:
        if meanings:
            out += ["", f"{indent}{title}: {meaning}"]
        else:
            out.append(f"{indent}{title}:")
        out += [f"{indent}  {line}" for line in _relation_lines(getattr(dep, attr), order) or ["(none)"]]
    return out


def _per_region(path, items: Sequence, show: Callable[[Any], None]) -> bool:
    """``show`` each region's item, a blank line between them; False (and a note) when there is none."""
    if not items:
        print(f"// {path}: no #pragma scop region")
        return False
    for k, item in enumerate(items):
        if k:
            print()
        show(item)
    return True


@_c_command
def _show_c(args) -> int:
    """`polytile show FILE.c`: each region's parameters, arrays, domains, accesses and dependences."""
    from ..frontends.c import show

    def region(cs) -> None:
        print(show(cs))
        if not (cs.skipped or cs.scop is None):
            print("  dependences:")
            print("\n".join(_c_dependence_lines(cs, indent="    ", meanings=False)))

    _per_region(args.file, _c_regions(args), region)
    return 0


def cmd_show(args) -> int:
    if str(args.file).endswith(".c"):
        return _show_c(args)
    target = resolve(args, need_sizes=False)
    print(f"// {target.path}")
    print(str(target.program).rstrip())
    if target.shapes is None:
        names = _header_dim_names(target.program)
        if names:
            _note(f"pass --dims {','.join(f'{d}=<size>' for d in names)} to also see the Scop, "
                  f"dependences and schedule tree")
        return 0
    spec = _specialize(target, args, build=False)
    dims = ", ".join(f"{k}={v}" for k, v in spec.bound.dims.items()) or "none"
    print()
    print(f"== specialised to {dims}; inputs {_signature(target) or '(none)'}")
    print()
    print("== scop (domains, accesses)")
    print(spec.scop.describe())
    print()
    print("== dependences")
    print(spec.deps.describe())
    print()
    if hasattr(spec.schedule, "describe"):
        # polytile's own Schedule reads as a loop nest with its marks; isl's tree follows.
        print("== schedule")
        print(spec.schedule.describe())
        print()
    print("== schedule tree (isl)")
    print(_schedule_yaml(spec.schedule))
    tgt = getattr(args, "target", "openmp")
    if tgt in ("cuda", "cuda-emulate"):
        from ..targets import cuda as cuda_target

        hw = getattr(args, "hardware", None) or "nvidia-h100"
        print()
        print(f"== GPU mapping ({hw}: grid, block, loops per thread)")
        kernel = cuda_target.compile_cuda(target.program, target.shapes, target.dtypes, hardware=hw, emulate=True)
        print(kernel.describe())
    return 0


# ---------------------------------------------------------------------------
# deps
# ---------------------------------------------------------------------------

#: The relations of polytile.deps.Dependences, in the order `deps` prints them.
DEP_RELATIONS = (
    ("flow (RAW, memory-based)", "flow", "a write, then a later read of the same cell"),
    ("flow (RAW, value-based)", "flow_value", "a read and the last write before it (the value it sees)"),
    ("anti (WAR)", "anti", "a read, then a later write of the same cell"),
    ("output (WAW)", "output", "a write, then a later write of the same cell"),
    ("reduction", "reduction", "an aggregation onto its own cell: may be reordered, not run in parallel as is"),
)


def _relation_lines(rel, order: Sequence[str]) -> List[str]:
    """One line per (source, sink) statement pair of an isl union map, in statement order."""
    maps: List[Any] = []
    rel.coalesce().foreach_map(maps.append)
    rank = {n: k for k, n in enumerate(order)}

    def key(m):
        import islpy as isl

        return (rank.get(m.get_tuple_name(isl.dim_type.in_), len(rank)),
                rank.get(m.get_tuple_name(isl.dim_type.out), len(rank)), str(m))

    return [str(m) for m in sorted(maps, key=key)]


def _specialised_header(target: Target, spec) -> str:
    dims = ", ".join(f"{k}={v}" for k, v in spec.bound.dims.items()) or "none"
    return f"// {target.path} specialised to {dims}; inputs {_signature(target) or '(none)'}"


def cmd_deps(args) -> int:
    if _is_c(args):
        return _deps_c(args)
    _reject_c_options(args, "deps", ("function", "assume_no_alias", "reassociate") + _C_PREPROCESSOR)
    target = resolve(args)
    spec = _specialize(target, args, build=False)
    print(_specialised_header(target, spec))
    print()
    print("statements:")
    for s in spec.scop.statements:
        print(f"  {s.name}: {s.text or s.kind}")
    order = [s.name for s in spec.scop.statements]
    print("\n".join(_dependence_lines(spec.deps, order, indent="", meanings=True)))
    return 0


@_c_command
def _deps_c(args) -> int:
    """`polytile deps FILE.c`: per region, its statements with their C text and each dependence relation."""
    _reject_tile_options(args, "deps", ("shape", "dtype", "dtypes"))

    def region(cs) -> None:
        print(_c_region_header(args, cs))
        if cs.skipped or cs.scop is None:
            print("skipped: " + cs.reason.replace("\n", "\n  "))
            return
        print()
        print("statements:")
        for st in cs.scop.statements:
            where = f" (line {st.loc.line})" if st.loc is not None else ""
            print(f"  {st.name}{where}: {st.c_text}")
        print("\n".join(_c_dependence_lines(cs, indent="", meanings=True)))

    _per_region(args.file, _c_regions(args), region)
    return 0


# ---------------------------------------------------------------------------
# schedule
# ---------------------------------------------------------------------------


def _contraction_lines(schedule) -> List[str]:
    from ..scheduling import contracted_bytes, traffic_saved

    arrays = contracted_bytes(schedule)
    if not arrays:
        return []
    lines = [f"  {name}: {nbytes} bytes never stored (kept in a scalar inside the fused loops)"
             for name, nbytes in sorted(arrays.items())]
    lines.append(f"  memory traffic saved: at least {traffic_saved(schedule)} bytes "
                 f"(each contracted array written once and read once)")
    return lines


def _reject_c_options(args, command: str, names: Sequence[str]) -> None:
    """Options a Tile program does not take (it has no functions, macros, pointers or opt variants)."""
    for name in names:
        if getattr(args, name, None) not in (None, False, []):
            flag = _C_FLAG_SPELLING.get(name, f"--{name.replace('_', '-')}")
            raise UsageError(f"{flag} applies to C files only ({PROG} {command} FILE.c)")


#: Flags whose argparse name is not their spelling.
_C_FLAG_SPELLING = {"include_dirs": "-I", "defines": "-D", "undefines": "-U"}

#: Why a Tile option has no meaning for a C file.
_TILE_ONLY = {"shape": "a C file's extents come from its declarations",
              "dtype": "a C file's types come from its declarations",
              "dtypes": "a C file's types come from its declarations",
              "tile": "compare the opt variants --no-tile, or a saved schedule with --schedules",
              "inputs": "a C file's inputs are uniform floats in [0.5, 1.5) and integers in [1, 50)"}


def _reject_tile_options(args, command: str, names: Sequence[str]) -> None:
    for name in names:
        if getattr(args, name, None) not in (None, False, []):
            raise UsageError(f"--{name} applies to Tile programs only ({_TILE_ONLY[name]})")


@_c_command
def _schedule_c(args) -> int:
    """`polytile schedule FILE.c`: per region, the schedule `polytile opt` uses (loop tree, isl tree, notes)."""
    from .. import crun

    _reject_tile_options(args, "schedule", ("shape", "dtype", "dtypes"))
    _, results = crun.optimise(
        args.file, function=args.function, tile=not args.no_tile, parallel=not args.no_parallel,
        fusion=args.fusion or "smart", hardware=args.hardware or "host", params=_c_params(args) or None,
        schedule=args.apply, skip_nonaffine=True, assume_no_alias=args.assume_no_alias,
        reassociate=args.reassociate, pure=_pure(args), cpp_args=_cpp_args(args))
    saved = [r for r in results if r.schedule is not None]
    names = _c_schedule_names(Path(args.output), len(saved)) if args.output else []
    files = iter(names)

    def region(r) -> None:
        print(_c_region_header(args, r.cscop))
        if r.schedule is None:
            print("left as it is: " + ("; ".join(r.notes) or "not modelled").replace("\n", "\n  "))
            return
        print()
        print("== schedule (loop tree)")
        if r.cscop.params:
            # Schedule.describe samples one point of the loop bounds; with symbolic sizes that is one
            # value of the parameters, not the bounds of the loops.
            print(f"(loop ranges for one sample of {', '.join(r.cscop.params)}; --dims fixes them)")
        print(r.schedule.describe())
        print()
        print("== schedule tree (isl)")
        print(_schedule_yaml(r.schedule))
        if r.notes:
            print()
            print("== notes")
            print("\n".join(f"  {n}" for n in r.notes))
        split = {st.name for st in r.schedule.scop.statements} != {st.name for st in r.cscop.scop.statements}
        if names:
            out_path = next(files)
            try:
                r.schedule.save(out_path)
            except OSError as exc:
                raise PolytileError(f"cannot write {out_path}: {exc.strerror or exc}") from None
            print()
            print(f"wrote {out_path} ({len(r.schedule.steps)} steps)"
                  + (f"; use it with: {PROG} opt {args.file} --schedule {out_path}"
                     if len(results) == 1 and not split else ""))
            if split:
                print(f"  note: its statements ({', '.join(st.name for st in r.schedule.scop.statements)}) are "
                      f"index-set splits of the region's; `opt --schedule` replays steps on the unsplit region, "
                      f"so this file documents the schedule but cannot be replayed")

    if not _per_region(args.file, results, region):
        return 0
    if len(names) > 1:
        print()
        print(f"{len(names)} regions: one schedule file per region, numbered in file order "
              f"({', '.join(str(n) for n in names)}); `{PROG} opt --schedule` replays one file on every "
              f"region, so use each with --apply or on a file holding that region alone")
    return 0


def _c_schedule_names(out: Path, n: int) -> List[Path]:
    """``-o s.json`` for ``n`` regions: ``s.json`` for one, ``s.1.json``, ``s.2.json``, ... for several."""
    if n <= 1:
        return [out] * n
    return [out.with_name(f"{out.stem}.{k}{out.suffix or '.json'}") for k in range(1, n + 1)]


def cmd_schedule(args) -> int:
    from .. import pipeline

    if _is_c(args):
        return _schedule_c(args)
    _reject_c_options(args, "schedule", ("function", "assume_no_alias", "reassociate") + _C_PREPROCESSOR)
    saved = load_schedule_file(args.apply) if args.apply else None
    target = resolve(args, saved=saved)
    # The options `polytile compile` would be given, so what is shown (and saved) is what compile runs.
    options = compile_options(target, args, saved)
    shapes = dict(zip(target.program.input_names, target.shapes))
    sched = pipeline.schedule(target.program, shapes=shapes, dtypes=list(target.dtypes),
                              steps=options.get("schedule"), fusion=options.get("fusion"),
                              parallel=options.get("parallel", True), hardware=options.get("hardware", "host"))
    dims = ", ".join(f"{k}={v}" for k, v in target.dims.items())
    print(f"// {target.path}" + (f" specialised to {dims}" if dims else "")
          + f"; inputs {_signature(target) or '(none)'}")
    print()
    print("== schedule (loop tree)")
    print(sched.describe())
    print()
    print("== schedule tree (isl)")
    print(_schedule_yaml(sched))
    contraction = _contraction_lines(sched)
    if contraction:
        print()
        print("== array contraction")
        print("\n".join(contraction))
    if args.output:
        out = Path(args.output)
        try:
            sched.save(out)
        except OSError as exc:
            raise PolytileError(f"cannot write {out}: {exc.strerror or exc}") from None
        print()
        print(f"wrote {out} ({len(sched.steps)} steps); use it with: "
              f"{PROG} run {target.path} --schedule {out} --check")
    return 0


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------


def _scalar(text: str) -> Tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()):
            raise ValueError
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, got {text!r}") from None


@_c_command
def _compare_c(args, out: Optional[Path]) -> int:
    """`polytile compare FILE.c`: the original build against `polytile opt` variants, checked bitwise, timed."""
    import shlex

    from .. import crun

    _reject_tile_options(args, "compare", ("tile", "dtype", "dtypes", "inputs"))
    flags = tuple(shlex.split(args.cflags)) if args.cflags else crun.DEFAULT_FLAGS
    shapes: Dict[str, Tuple[int, ...]] = {}
    for sh in args.shape or ():
        shapes.update(sh)
    cands = crun.variants(args.fusion or (), no_tile=args.no_tile, no_parallel=args.no_parallel,
                          schedules=args.schedules or (), reassociate=args.reassociate)
    names = crun.functions(args.file, function=args.function, assume_no_alias=args.assume_no_alias,
                           pure=_pure(args), cpp_args=_cpp_args(args))
    if not names:
        raise PolytileError(f"{args.file}: no #pragma scop region to compare")
    whole = args.function is not None
    ok = True
    results = []
    for k, fname in enumerate(names):
        call = crun.prepare(args.file, sizes=_c_params(args), scalars=dict(args.scalar or ()), shapes=shapes,
                            function=fname, whole_function=whole, seed=args.seed,
                            assume_no_alias=args.assume_no_alias, other_sizes=len(names) > 1, pure=_pure(args),
                            cpp_args=_cpp_args(args))

        def progress(text: str, fname=fname) -> None:
            if not args.quiet:
                _note(f"{fname}: {text}")

        result = crun.compare_c(call, cands, repeat=args.repeat, warmup=args.warmup, flags=flags,
                                hardware=args.hardware or "host", assume_no_alias=args.assume_no_alias,
                                whole_function=whole, progress=progress)
        results.append(result)
        ok = ok and result.ok
        prov = result.provenance
        machine, cc = prov["machine"], prov["compiler"]
        if k:
            print()
        sizes = ", ".join(f"{n}={v}" for n, v in call.sizes.items()) or "none"
        scalars = ", ".join(f"{n}={v:g}" for n, v in call.scalars.items())
        arrays = ", ".join(f"{n}[{'x'.join(map(str, a.shape)) or 'scalar'}]" + (" (global)" if n in call.globals
                                                                                else "")
                           for n, a in call.inputs.items())
        print(f"program  {args.file}: {fname}()  ({sizes}" + (f"; {scalars}" if scalars else "") + ")")
        print(f"arrays   {arrays or '(none)'}")
        print(f"machine  {machine['node']}: {machine['processor']}, {machine['cpu_count']} logical CPUs"
              + (f", OMP_NUM_THREADS={machine['omp_num_threads']}" if machine.get("omp_num_threads") else ""))
        print(f"compiler {cc.get('path', cc.get('name'))} ({cc.get('version', cc.get('error', '?'))}) "
              f"{' '.join(prov['flags'])}")
        print(f"timing   {args.repeat} timed call(s) after {args.warmup} warm-up per build, each on fresh copies "
              f"of the same random inputs (seed {args.seed})")
        print("check    bitwise: every array above equals the original build's, byte for byte"
              + (f"; 'reassociate' within {crun.REASSOCIATED_REL['float64']:g} (double) / "
                 f"{crun.REASSOCIATED_REL['float32']:g} (float) x the array's max |value|" if args.reassociate else ""))
        print()
        print(result.table())
    if out is not None:
        # Several functions: one results file per function, named after it.
        paths = [out] if len(results) == 1 else [out.with_name(f"{out.stem}.{r.provenance['function']}{out.suffix}")
                                                 for r in results]
        for r, path in zip(results, paths):
            r.save(path)
        print()
        print(f"wrote {', '.join(map(str, paths))} (with provenance and each variant's steps)")
    return 0 if ok else 1


def cmd_compare(args) -> int:
    out = Path(args.output) if args.output else None
    if out is not None and out.suffix.lower() not in (".csv", ".json"):
        # Found now, not after minutes of measuring.
        raise UsageError(f"-o {out}: name the results file .csv or .json")
    if _is_c(args):
        return _compare_c(args, out)
    _reject_c_options(args, "compare", ("function", "assume_no_alias", "reassociate", "no_tile", "no_parallel", "hardware",
                                        "scalar", "cflags") + _C_PREPROCESSOR)
    args.inputs = args.inputs or "int"
    files = [load_schedule_file(f) for f in args.schedules or ()]
    # With no sizes given anywhere else, the first saved schedule's shapes are the ones it was checked for.
    target = resolve(args, saved=next((f for f in files if f.shapes is not None), None))

    cands = [compare_mod.default()]
    for f in files:
        cands.append(compare_mod.Candidate(f.path.stem, _recipe(f, None, parallel=True), f"file {f.path}"))
    for choice in args.fusion or ():
        cands.append(compare_mod.fusion(choice))
    for size in args.tile or ():
        cands.append(compare_mod.tiled(size))

    def progress(text: str) -> None:
        if not args.quiet:
            _note(text)

    result = compare_mod.compare(target.program, target.shapes, target.dtypes, cands, repeat=args.repeat,
                                 warmup=args.warmup, inputs=args.inputs, seed=args.seed,
                                 positive=target.hints.positive, progress=progress,
                                 extra_provenance={"file": str(target.path)})
    prov = result.provenance
    machine, cc = prov["machine"], prov["compiler"]
    dims = ", ".join(f"{k}={v}" for k, v in prov["dims"].items()) or "none"
    print(f"program  {target.path}  ({dims}; inputs {_signature(target) or '(none)'})")
    print(f"machine  {machine['node']}: {machine['processor']}, {machine['cpu_count']} logical CPUs"
          + (f", OMP_NUM_THREADS={machine['omp_num_threads']}" if machine.get("omp_num_threads") else ""))
    print(f"compiler {cc.get('path', cc.get('name'))} ({cc.get('version', cc.get('error', '?'))}) "
          f"{' '.join(prov['flags'])}")
    flops = prov.get("flops")
    print(f"timing   {args.repeat} timed call(s) after {args.warmup} warm-up per candidate; inputs {prov['inputs']}"
          + (f"; {flops} flops per call" if flops else ""))
    print()
    print(result.table())
    if out is not None:
        result.save(out)
        print()
        print(f"wrote {out} ({len(result.rows)} candidates, with provenance and each schedule)")
    return 0 if result.ok else 1


# ---------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------

_MAIN_EPILOG = """\
examples:
  polytile compile examples/matmul.tile --dims M=64,N=48,K=32
  polytile run examples/conv2d.tile --check
  polytile show examples/softmax.tile --dims M=4,N=5
  polytile deps examples/matmul.tile --dims M=8,N=8,K=8
  polytile schedule examples/matmul.tile --apply steps.json -o sched.json
  polytile run examples/matmul.tile --schedule sched.json --check
  polytile compare examples/matmul.tile --dims M=256,N=256,K=256 --tile 32,64 --fusion smart
  polytile opt tests/c_kernels/jacobi-2d.c -o jacobi-2d.opt.c        # C: also show, deps, schedule, compare
  polytile cache verify                                             # re-hash cached kernels, drop bad ones

Sizes: --dims gives every dimension name of the inputs' headers; without it
the first `// dims:` comment line of the file is used.  POLYTILE_DEBUG=1..3
(or -v, -vv, -vvv) prints the pipeline's stages.  Exit codes: 0 ok, 1 error or
failed check, 2 bad arguments, 3 the environment (no compiler, no GPU, an
untrusted or unwritable kernel cache, a bad POLYTILE_* setting), 70 a bug in
polytile (-v shows the traceback), 130 interrupted.  `polytile cache info`
shows the kernel cache.
"""

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

_SHOW_EPILOG = """\
examples:
  polytile show examples/matmul.tile
  polytile show examples/softmax.tile --dims M=4,N=5
  polytile show examples/conv2d_strided.tile --dims N=1,H=9,W=9,CI=2,KH=3,KW=3,CO=4

Without sizes (no --dims and no `// dims:` line) only the program is shown.
"""

_DEPS_EPILOG = """\
examples:
  polytile deps examples/matmul.tile --dims M=8,N=8,K=8
  polytile deps examples/matmul_bias_relu.tile
  polytile deps examples/cumsum.tile --dims N=6
  polytile deps tests/c_kernels/jacobi-2d.c                  # each #pragma scop region, parametric
  polytile deps tests/c_kernels/gemm.c --dims ni=4,nj=4,nk=4 # parameters fixed
  polytile deps kernel.c --function kernel_foo                # a whole function body as the region

Each relation is printed as isl maps from a source statement instance to a
sink instance that must follow it, one map per (source, sink) statement pair:

  reduction:
    { S0[i, j, k] -> S0[i' = i, j' = j, k'] : ... and k < k' <= 7 }

reads "iteration (i, j, k) of S0 and every later k' of the same (i, j) update
the same cell".  Statement names (Z0, S0, E1, ...) are listed first with their
Tile text; they are the names `polytile schedule` steps may use (or the
tensor name, e.g. "C", for its main statement).

A C file: one block per region, headed `// file:first-last (function)` with
its symbolic and fixed parameters; its statements are listed with their line
and C text (S0, S1, ... in program order, the names opt's steps use).
"""

_SCHEDULE_EPILOG = """\
examples:
  polytile schedule examples/matmul.tile --dims M=256,N=256,K=256
  polytile schedule examples/matmul.tile --apply steps.json -o sched.json
  polytile schedule examples/matmul_bias_relu.tile --fusion smart
  polytile schedule examples/matmul.tile --no-parallel --apply ikj.json -o ikj.json

where steps.json is a list of steps, replayed in order on the default schedule
(program order with the outermost dependence-free loops parallel; isl's
schedule with --fusion; without the parallel marks with --no-parallel):

  [{"op": "tile", "stmt": "C", "sizes": {"i": 32, "j": 32}},
   {"op": "parallel", "stmt": "C", "loop": "i_t"}]

and ikj.json is [{"op": "interchange", "stmt": "C", "a": "j", "b": "k"}].
Steps: tile(stmt, sizes), interchange(stmt, a, b), reorder(stmt, order),
split(stmt, loop, factor), skew(stmt, loop, by, factor), reverse(stmt, loop),
shift(stmt, loop, amount), fuse(a, b, depth), distribute(stmt, depth),
parallel(stmt, loop, reduction), vectorize(stmt, loop), unroll(stmt, loop,
factor), unmark(stmt, loop, kind), auto_parallel.  A file written with -o
starts with its base step and is used as it is (by --apply, and by compile/run
--schedule, which also take its saved sizes when none are given).

Every step is checked against the dependences: an illegal one stops with the
violated dependence and a pair of iterations it would run in the wrong order
(exit status 1).

C files: per #pragma scop region, the schedule `polytile opt` uses with the
same options (--fusion, --no-tile, --no-parallel, --hardware; --dims fixes
parameters like opt --param; --apply replays steps like opt --schedule),
its loop tree, isl tree and opt's notes:

  polytile schedule tests/c_kernels/jacobi-2d.c -o jacobi.json
  polytile opt tests/c_kernels/jacobi-2d.c --schedule jacobi.json   # = polytile opt tests/c_kernels/jacobi-2d.c

With several regions, -o s.json writes s.1.json, s.2.json, ... (one per
region, in file order); opt --schedule replays one file on every region.  A
region opt split by index sets (floyd-warshall) is saved but cannot be replayed.
"""

_COMPARE_EPILOG = """\
examples:
  polytile compare examples/matmul.tile --dims M=256,N=256,K=256 --tile 16,32,64
  polytile compare examples/matmul_bias_relu.tile --fusion none,smart,max -o fusion.csv
  polytile compare examples/matmul.tile --schedules ikj.json tiled.json --repeat 20 -o mm.json

Candidates, in this order: "default" (what compile does), each --schedules
file (named after it), "isl-<choice>" for each --fusion choice (isl's
scheduler, then auto_parallel), and "tile<T>" for each --tile size (the
default schedule with the first two loops of every contraction tiled by T and
the outermost tile loop parallel).  Each is checked for legality (an illegal
one is listed with the reason and not run), compiled, run on the same random
inputs, checked once against the reference interpreter (ok / MISMATCH; exact
for integer outputs, as `run --check` for floats), then timed: median, min and
max over --repeat calls after --warmup.  GFLOP/s counts 2 flops per
contraction iteration point; speedup is relative to the first candidate.

-o writes CSV or JSON (by the suffix) with the machine, compiler and flags,
versions, date, program, sizes, and every candidate's steps and loop tree.
Exit status 1 if any candidate fails to build or mismatches the reference.

C files: the function holding the regions is called through ctypes, built
from the file as written ("original", the baseline) and from `polytile opt`
variants: "opt" (the default), "fusion-<c>" per --fusion choice, "no-tile",
"no-parallel", and one per --schedules file.  Every build uses the same
compiler and flags (-O3 -march=native -fopenmp -ffp-contract=off: without
FMA contraction both builds round alike; --cflags to change) and the same
random inputs; every array the function reaches must equal the original
build's bitwise (check MISMATCH and exit status 1 otherwise).

  polytile compare tests/c_kernels/jacobi-2d.c --dims tsteps=50,n=1000 --fusion none,max --no-tile
  polytile compare tests/c_kernels/gemm.c --dims ni=800,nj=800,nk=800 --scalar alpha=1.5 -o gemm.csv
  polytile compare tests/c_kernels/heat-3d.c --dims N=120,TSTEPS=20      # macros rewritten in every build

int parameters need --dims (a missing one is named); macros default to the
file's value; float parameters are 1.5 unless --scalar sets them; arrays take
their declared extents, or the extents the regions access (--shape X=100
overrides); file-scope arrays are reached through the library's symbols.
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep the hand-formatted epilogs; show defaults where help text asks for them."""


def _common(p: argparse.ArgumentParser, *, sub: bool) -> None:
    # -v is accepted before and after the subcommand.  On subparsers its default
    # is SUPPRESS, or the subparser's default would overwrite a top-level -v.
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS if sub else 0,
                   help="print the pipeline's stages (debug level 1; -vv IR and schedules, -vvv also source)")


def _cpp_options(g) -> None:
    """-I, -D, -U, --std (passed to the preprocessor like gcc's) and --pure of the C commands."""
    g.add_argument("-I", dest="include_dirs", action="append", metavar="DIR",
                   help="C: add DIR to the preprocessor's include path, as gcc -I (repeatable)")
    g.add_argument("-D", dest="defines", action="append", metavar="NAME[=VALUE]",
                   help="C: define a macro for the preprocessor, as gcc -D (repeatable)")
    g.add_argument("-U", dest="undefines", action="append", metavar="NAME",
                   help="C: undefine a macro, as gcc -U (repeatable)")
    g.add_argument("--std", metavar="STANDARD", help="C: the language standard of the preprocessor, as gcc "
                                                     "-std= (default: c11)")
    g.add_argument("--pure", action="append", metavar="NAME",
                   help="C: statements may call function NAME: its result depends on its arguments only and it "
                        "changes nothing (repeatable; math.h functions and functions declared "
                        "__attribute__((const)) or ((pure)) need no flag; any other call refuses the region)")


def _c_options(p: argparse.ArgumentParser, group=None) -> None:
    g = group or p.add_argument_group("C files")
    _cpp_options(g)
    g.add_argument("--function", metavar="NAME",
                   help="C: the whole body of function NAME is the region (instead of #pragma scop regions)")
    g.add_argument("--assume-no-alias", action="store_true",
                   help="C: assume pointer parameters do not overlap (as with restrict)")
    g.add_argument("--reassociate", action="store_true",
                   help="C: let reductions (s += e, s -= e, s *= e) be reordered, e.g. vectorised with partial "
                        "sums; results then differ by rounding (compare: adds a 'reassociate' variant, checked "
                        "within a tolerance)")


def _fusion_list(text: str) -> List[str]:
    out = []
    for item in _items(text.replace(",", " ")):
        if item not in FUSION:
            raise ValueError(f"unknown fusion choice {item!r}; choose from {', '.join(FUSION)}")
        if item not in out:
            out.append(item)
    if not out:
        raise ValueError(f"expected a comma-separated list of {', '.join(FUSION)}")
    return out


def _size_list(text: str) -> List[int]:
    out = []
    items = _items(text.replace(",", " "))
    if not items:
        raise ValueError("expected comma-separated positive integers, e.g. 16,32,64")
    for item in items:
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"bad tile size {item!r}: expected a positive integer")
        if int(item) not in out:
            out.append(int(item))
    return out


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


_HW_EPILOG = """examples:
  polytile hw list                      the presets
  polytile hw show                      this machine, as detected (facts not found are marked as defaults)
  polytile hw show nvidia-h100          a preset
  polytile hw show mymachine.toml       your own descriptor (format: polytile/data/hardware/README.md)
"""


_CACHE_EPILOG = """examples:
  polytile cache info        where the cache is, how many libraries, how many bytes
  polytile cache verify      re-hash every library; remove damaged or foreign ones (they are rebuilt on use)
  polytile cache clear       delete everything (safe when no polytile process is running)

The cache directory must belong to you and not be writable by group or others,
or polytile refuses to use it (exit 3): it runs the libraries it finds there.
"""


def cmd_cache(args) -> int:
    from .. import runtime

    root = get_config().cache_dir
    if args.action == "info":
        i = runtime.info(root)
        print(f"directory  {i['dir']}")
        print(f"libraries  {i['libraries']}")
        print(f"tune       {i['tune_results']} saved result(s)")
        print(f"size       {bytes_text(i['bytes'])}")
        return 0
    if args.action == "clear":
        freed = runtime.clear(root)
        print(f"removed everything in {root} ({bytes_text(freed)})")
        return 0
    found = runtime.verify(root, remove=True)
    bad = [e for e in found if e.problem is not None]
    for e in bad:
        print(f"removed {e.path}: {e.problem}")
    print(f"verified {root}: {len(found) - len(bad)} ok, {len(bad)} bad" + (" (removed; they are rebuilt on use)"
                                                                          if bad else ""))
    return 0


def cmd_hw(args) -> int:
    from .. import hardware

    if args.action == "list":
        for name in ["host"] + [p for p in hardware.presets() if p != "host"]:
            print(name)
        return 0
    print(hardware.format(hardware.load(args.name or "host")))
    return 0


_OPT_EPILOG = """\
examples:
  polytile opt tests/c_kernels/jacobi-2d.c -o jacobi-2d.opt.c
  polytile opt gemm.c -o gemm.opt.c --no-tile --fusion max
  polytile opt heat.c -o heat.opt.c --param N=200 --param TSTEPS=50
  polytile opt mixed.c -o out.c --skip-nonaffine
  polytile opt tests/c_kernels/gemm.c --function kernel_gemm       # the whole body, no pragmas needed
  polytile schedule tests/c_kernels/jacobi-2d.c -o s.json && polytile opt tests/c_kernels/jacobi-2d.c --schedule s.json

Every #pragma scop region is scheduled with isl's scheduler (or the original
order if it fails), its outermost band tiled (sizes from --hardware), the
outermost parallel loop marked (a wavefront over the tile loops when none is
parallel), unit-stride innermost loops marked simd; every step is checked
against the dependences.  Bytes outside the regions are left unchanged.
Compile the output with -fopenmp.

Results: by default every reduction keeps its order, so the output computes
bitwise the same values as the input when both are compiled with
-ffp-contract=off (polytile compare and opt --verify build with
-O3 -march=native -fopenmp -ffp-contract=off).  Without it GCC may contract
a * b + c into one FMA in one loop structure and not in the other, and
results differ in the last bits.

Assumptions, checked or refused: pointers that may overlap are refused unless
restrict or --assume-no-alias; statements may call only pure functions (math.h,
__attribute__((const))/((pure)) declarations, --pure NAME); other calls,
volatile objects, pointer arithmetic and dereferences, struct members, while
loops, break and goto refuse the region (--skip-nonaffine leaves it as written).  An integer
macro that the preprocessor expanded into a region (a header's #define N 120,
-DN=120, or --param N=...) is guarded in the output by
#if N != 120 / #error, so a build with another value stops instead of
computing with the old one; macros defined in the file itself stay symbolic.
Build the output with the same -I/-D/-U flags.  Generated loop counters never
clash with names of the file (only a loop-bound parameter named c<digits> must
be fixed with --param).

Output: -o must not be the input (the #pragma scop regions would be lost);
--in-place rewrites FILE.c and keeps the original as FILE.c.orig.  --verify
builds the input and the output, runs each function holding a region on the
same random inputs (integer parameters 37 unless --verify-dims sets them) and
fails (exit status 1) unless every array is bitwise identical.
"""


def _params(text: str) -> Tuple[Tuple[str, int], ...]:
    out = []
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            out.append((name.strip(), int(value)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected NAME=INT[,NAME=INT...], got {text!r}") from None
    return tuple(out)


def _opt_output(args) -> Optional[Path]:
    """Where opt writes (None: stdout), checked before any work: never the input unless --in-place, and a
    file that can be written (its directory exists)."""
    src = Path(args.file)
    if not src.exists():
        raise PolytileError(f"no such C file: {src}")
    if src.is_dir():
        raise PolytileError(f"{src} is a directory, not a C file")
    out = Path(args.output) if args.output else None
    if args.in_place:
        if out is not None and not _same_file(out, src):
            raise UsageError(f"--in-place rewrites {src} itself; drop -o {out}")
        out = src
    elif out is not None and _same_file(out, src):
        raise PolytileError(f"-o {out} is the input file: writing it would lose the original loops and their "
                            f"#pragma scop markers; write elsewhere, or pass --in-place (which keeps {src}.orig)")
    if out is None:
        return None
    if out.is_dir():
        raise PolytileError(f"-o {out}: is a directory")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise PolytileError(f"-o {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise PolytileError(f"-o {out}: not writable")
    return out


def _same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` name one file (through symlinks, relative paths or hard links)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


@_c_command
def cmd_opt(args) -> int:
    from .. import crun

    out_path = _opt_output(args)  # before minutes of scheduling, not after
    params = dict(pair for group in args.param or () for pair in group) or None
    out, results = crun.optimise(
        args.file, function=args.function, tile=args.tile, parallel=args.parallel, fusion=args.fusion, hardware=args.hardware,
        params=params, schedule=args.schedule, skip_nonaffine=args.skip_nonaffine,
        assume_no_alias=args.assume_no_alias, reassociate=args.reassociate, pure=_pure(args),
        cpp_args=_cpp_args(args))
    for r in results:
        where = f"{args.file}:{r.cscop.lines[0]}-{r.cscop.lines[1]} ({r.cscop.function})"
        if r.text is None:
            _note(f"{where}: left as it is ({'; '.join(r.notes) or 'not modelled'})")
        elif getattr(args, "verbose", 0):
            for n in r.notes:
                _note(f"{where}: {n}")
    if args.verify and any(r.text is not None for r in results):
        sizes: Dict[str, int] = {}
        for d in args.verify_dims or ():
            sizes.update(d)
        problems = crun.verify(args.file, out, function=args.function, whole_function=args.function is not None,
                               sizes=sizes, assume_no_alias=args.assume_no_alias, pure=_pure(args),
                               cpp_args=_cpp_args(args), reassociated=args.reassociate)
        if problems:
            raise PolytileError(f"{args.file}: --verify: the optimised file computes different results "
                                f"(please report this as a polytile bug):\n  " + "\n  ".join(problems))
        _note(f"{args.file}: --verify: optimised and original builds agree "
              + ("within the reassociation tolerance" if args.reassociate else "bitwise")
              + f" ({' '.join(crun.DEFAULT_FLAGS)})")
    if out_path is not None:
        try:
            if args.in_place:
                backup = out_path.with_name(out_path.name + ".orig")
                backup.write_bytes(out_path.read_bytes())
            out_path.write_bytes(out)
        except OSError as exc:
            raise PolytileError(f"cannot write {out_path}: {exc.strerror or exc}") from None
    else:
        sys.stdout.buffer.write(out) if hasattr(sys.stdout, "buffer") else sys.stdout.write(out.decode())
        sys.stdout.flush()
    return 0


def _timing_options(p) -> None:
    """--repeat, --warmup and --seed, as `run` and `compare` take them."""
    p.add_argument("--repeat", type=positive_int, default=10, metavar="N", help="timed runs (default: 10)")
    p.add_argument("--warmup", type=nonnegative_int, default=2, metavar="N", help="untimed runs first (default: 2)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed for the inputs (default: 0)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=_Formatter, epilog=_MAIN_EPILOG,
        description="polytile: a polyhedral loop optimizer.  Compiles Tile programs (tensor contractions "
                    "and elementwise code) through isl into OpenMP C, runs them, checks them against a "
                    "reference interpreter, and shows the polyhedral model in between.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _common(parser, sub=False)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    p = subs.add_parser("compile", formatter_class=_Formatter, epilog=_COMPILE_EPILOG,
                        help="print (or write) the generated C for given sizes",
                        description="Generate the scheduled OpenMP C of a Tile program specialised to "
                                    "concrete sizes and dtypes.")
    p.add_argument("file", metavar="FILE.tile", help="the Tile program")
    p.add_argument("-o", "--output", metavar="OUT.c", help="write the C here instead of stdout")
    p.add_argument("--target", default="openmp",
                   help="code generation target: openmp (C, the default), cuda (nvcc), or cuda-emulate "
                        "(the CUDA mapping run on the CPU)")
    p.add_argument("--build", action="store_true",
                   help="also compile the C into a shared library (cached) and print its path")
    _shape_options(p)
    _schedule_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_compile)

    p = subs.add_parser("run", formatter_class=_Formatter, epilog=_RUN_EPILOG,
                        help="compile, run on random inputs, time, and optionally check",
                        description="Compile a Tile program for the given sizes, run it on random inputs "
                                    "(warm-up, then timed repeats) and print each output's shape and dtype, "
                                    "the time per call and GFLOP/s.  With --check, compare the outputs "
                                    "with the reference interpreter.")
    p.add_argument("file", metavar="FILE.tile", help="the Tile program")
    p.add_argument("--target", default="openmp",
                   help="code generation target: openmp (C, the default), cuda (nvcc), or cuda-emulate "
                        "(the CUDA mapping run on the CPU)")
    p.add_argument("--check", action="store_true", help="compare with the reference interpreter; exit 1 on FAIL")
    _timing_options(p)
    p.add_argument("--inputs", choices=("int", "normal"), default="int",
                   help="int: integers in [-4, 4] (exact, the default); normal: standard normal.  "
                        "A file with `// inputs: positive` gets values in [1, 4] either way")
    _shape_options(p)
    _schedule_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_run)

    p = subs.add_parser("show", formatter_class=_Formatter, epilog=_SHOW_EPILOG,
                        help="print the program, and with sizes its Scop, dependences and schedule tree",
                        description="Print a Tile program as polytile reads it.  Given sizes (--dims or the "
                                    "file's `// dims:` line), also print the polyhedral model: iteration "
                                    "domains and access maps, the dependences, and the schedule tree.  A C file "
                                    "(.c) shows each #pragma scop region: domains, accesses and dependences "
                                    "(--dims fixes its parameters).")
    p.add_argument("file", metavar="FILE.tile|FILE.c", help="the Tile program, or a C file with #pragma scop regions")
    p.add_argument("--target", default="openmp", choices=("openmp", "cuda", "cuda-emulate"),
                   help="with cuda/cuda-emulate also print the GPU mapping (grid, block, sequential loops)")
    p.add_argument("--hardware", default=None, metavar="NAME|FILE",
                   help="hardware descriptor of the target, as for compile: it guides the automatic tiling "
                        "(default: host), and with cuda/cuda-emulate it is the GPU of the mapping "
                        "(default: nvidia-h100)")
    _shape_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_show)

    p = subs.add_parser("deps", formatter_class=_Formatter, epilog=_DEPS_EPILOG,
                        help="print the dependences (flow, anti, output, reduction) as isl relations",
                        description="Compute the dependences of a Tile program for concrete sizes and print "
                                    "each relation (memory- and value-based flow, anti, output, reduction) "
                                    "as isl text, one map per pair of statements.  A C file (.c): the same for "
                                    "each #pragma scop region, parametric unless --dims fixes parameters.")
    p.add_argument("file", metavar="FILE.tile|FILE.c", help="the Tile program, or a C file with #pragma scop regions")
    _c_options(p)
    _shape_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_deps)

    p = subs.add_parser("schedule", formatter_class=_Formatter, epilog=_SCHEDULE_EPILOG,
                        help="build a schedule, apply transformation steps, check and save it",
                        description="Build the schedule `polytile compile` uses for a Tile program (the "
                                    "default schedule, or isl's with --fusion, blocked for --hardware), or "
                                    "replay the transformation steps of --apply on the untiled default with every "
                                    "step checked against the dependences, and print the loop tree, the isl schedule tree "
                                    "and the memory traffic array contraction saves.  -o saves the schedule "
                                    "as JSON for compile/run --schedule and compare --schedules.  A C file (.c): "
                                    "per #pragma scop region, the schedule `polytile opt` uses (same options), "
                                    "its notes, and with -o the file `polytile opt --schedule` replays.")
    p.add_argument("file", metavar="FILE.tile|FILE.c", help="the Tile program, or a C file with #pragma scop regions")
    p.add_argument("--fusion", choices=FUSION,
                   help="start from isl's scheduler with this fusion choice instead of program order "
                        "(C: as polytile opt --fusion, default smart)")
    p.add_argument("--apply", metavar="STEPS.json",
                   help="steps to replay: a JSON list of steps, or a schedule saved with -o")
    p.add_argument("--no-parallel", action="store_true",
                   help="leave out the automatic parallel marks (auto_parallel) of the base schedule "
                        "(C: as polytile opt --no-parallel, no parallel or simd marks)")
    p.add_argument("--no-tile", action="store_true",
                   help="no automatic tiling: the untiled default schedule (same as --hardware none; "
                        "C: as polytile opt --no-tile)")
    p.add_argument("--hardware", default=None, metavar="NAME|FILE",
                   help="descriptor that guides the automatic tiling, as for compile and opt: a preset "
                        "(see `polytile hw list`), 'host' (detected; the default) or a .toml/.json file")
    p.add_argument("-o", "--output", metavar="SCHED.json", help="save the schedule (steps, isl tree, sizes) here")
    _c_options(p)
    _shape_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_schedule)

    p = subs.add_parser("compare", formatter_class=_Formatter, epilog=_COMPARE_EPILOG,
                        help="check, run and time several schedules of one program side by side",
                        description="Build candidate schedules of a Tile program (the default, saved ones, "
                                    "isl's fusion choices, tilings), check each for legality and against the "
                                    "reference interpreter, time them on the same inputs and print one table; "
                                    "-o writes it as CSV or JSON with provenance.  A C file (.c): the file as "
                                    "written against `polytile opt` variants of it, all built with the same "
                                    "compiler and flags, each checked bitwise against the original.")
    p.add_argument("file", metavar="FILE.tile|FILE.c", help="the Tile program, or a C file with #pragma scop regions")
    p.add_argument("--schedules", nargs="+", metavar="SCHED.json", default=[],
                   help="saved schedules (or JSON step lists) to compare")
    p.add_argument("--fusion", type=arg_type(_fusion_list, "fusion"), metavar="none,smart,max",
                   help="isl scheduler candidates, one per fusion choice")
    p.add_argument("--tile", type=arg_type(_size_list, "tile"), metavar="16,32,64",
                   help="tiled candidates, one per size")
    _timing_options(p)
    p.add_argument("--inputs", choices=("int", "normal"), default=None,
                   help="int: integers in [-4, 4] (exact, the default); normal: standard normal")
    p.add_argument("-o", "--output", metavar="RESULTS.csv|.json", help="write the results and provenance here")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    g = p.add_argument_group("C files")
    g.add_argument("--no-tile", action="store_true", help="also the variant `polytile opt --no-tile`")
    g.add_argument("--no-parallel", action="store_true", help="also the variant `polytile opt --no-parallel`")
    g.add_argument("--hardware", default=None, metavar="NAME|FILE",
                   help="hardware descriptor of the opt variants' tile sizes (default: host)")
    g.add_argument("--scalar", type=_scalar, action="append", metavar="NAME=NUMBER",
                   help="value of a floating-point parameter (repeatable; default 1.5)")
    g.add_argument("--cflags", metavar="FLAGS",
                   help="compiler flags of every build (default: -O3 -march=native -fopenmp -ffp-contract=off)")
    _c_options(p, group=g)
    _shape_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_compare)

    p = subs.add_parser("opt", formatter_class=_Formatter, epilog=_OPT_EPILOG,
                        help="optimise the #pragma scop regions of a C file (tile, parallelise, vectorise)",
                        description="Source-to-source optimisation of a C file, like Pluto's polycc: each "
                                    "#pragma scop region is rescheduled (isl's scheduler), tiled, marked "
                                    "parallel and simd, and written back into the file.")
    p.add_argument("file", metavar="FILE.c", help="the C file")
    p.add_argument("-o", "--output", metavar="OUT.c", help="write the optimised file here instead of stdout")
    p.add_argument("--tile", action=argparse.BooleanOptionalAction, default=True,
                   help="tile the outermost band of each loop nest (default: on)")
    p.add_argument("--parallel", action=argparse.BooleanOptionalAction, default=True,
                   help="mark OpenMP parallel and simd loops, with wavefronts for tiled stencils (default: on)")
    p.add_argument("--hardware", default="host", metavar="NAME|FILE",
                   help="hardware descriptor for tile sizes (default: host)")
    p.add_argument("--fusion", choices=FUSION, default="smart", help="isl scheduler fusion choice (default: smart)")
    p.add_argument("--schedule", metavar="SCHED.json",
                   help="replay these steps (a saved schedule or a JSON list of steps) on every region instead")
    p.add_argument("--dims", "--param", dest="param", type=_params, action="append", metavar="n=1000,m=800",
                   help="fix parameters (function arguments or macros) to values, comma-separated, as --dims "
                        "of the other commands; --param is the same option (repeatable)")
    p.add_argument("--skip-nonaffine", action="store_true",
                   help="leave regions the frontend cannot model untouched instead of failing")
    p.add_argument("--assume-no-alias", action="store_true",
                   help="assume pointer parameters do not overlap (as with restrict)")
    p.add_argument("--reassociate", action="store_true",
                   help="let the schedule reorder reductions (s += e, s -= e, s *= e whose e never reads the "
                        "updated cell) where that makes their loops vectorisable, e.g. a dot product with one "
                        "partial sum per SIMD lane; results then differ from the original by rounding "
                        "(default: every reduction keeps its order, results are bitwise identical when both "
                        "files are built with -ffp-contract=off)")
    p.add_argument("--function", metavar="NAME",
                   help="optimise the whole body of function NAME as one region (no #pragma scop needed)")
    p.add_argument("--in-place", action="store_true",
                   help="rewrite FILE.c itself, keeping the original as FILE.c.orig (-o FILE.c is refused without it)")
    p.add_argument("--verify", action="store_true",
                   help="build the input and the output (-O3 -march=native -fopenmp -ffp-contract=off), run them "
                        "on the same random inputs and fail unless the results are bitwise identical")
    p.add_argument("--verify-dims", action="append", type=arg_type(parse_dims, "dims"), metavar="n=100,m=80",
                   help="integer parameters and macros for --verify (default: 37 for parameters, the file's "
                        "value for macros)")
    _cpp_options(p.add_argument_group("C preprocessor and purity"))
    _common(p, sub=True)
    p.set_defaults(handler=cmd_opt)

    from .. import tune as tune_mod

    p = subs.add_parser("tune", formatter_class=argparse.RawDescriptionHelpFormatter,
                        help="search tile sizes, loop orders and register blocks by measurement",
                        description="Rank the blocked schedules of every contraction with the cost model, measure "
                                    "the best ones, then anneal around the fastest within a time budget.  Every "
                                    "candidate is checked against the reference interpreter once; results are "
                                    "cached, so a second run is instant.")
    tune_mod.add_arguments(p)
    _common(p, sub=True)
    p.set_defaults(handler=tune_mod.main_tune)

    p = subs.add_parser("cache", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_CACHE_EPILOG,
                        help="show, verify or clear the cache of compiled kernels",
                        description="The cache of compiled kernels (POLYTILE_CACHE_DIR, default ~/.cache/polytile): "
                                    "info shows where it is and what it holds; verify re-hashes every library "
                                    "against its manifest and removes the bad ones; clear deletes everything in it.")
    p.add_argument("action", choices=("info", "verify", "clear"), help="what to do")
    _common(p, sub=True)
    p.set_defaults(handler=cmd_cache)

    p = subs.add_parser("hw", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_HW_EPILOG,
                        help="show hardware descriptors (memory levels, SIMD, cores; GPUs)",
                        description="Print a hardware descriptor: the detected host, a preset, or a file.")
    p.add_argument("action", choices=("show", "list"), help="show one descriptor, or list the presets")
    p.add_argument("name", nargs="?", metavar="NAME|FILE", help="preset name or file (default: host)")
    _common(p, sub=True)
    p.set_defaults(handler=cmd_hw)

    examples_cmd.add_parser(subs, _Formatter, _common)
    return parser


def _exit_code(code) -> int:
    # SystemExit carries None (success), an int, or a message (failure).
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


#: Exit codes (the error contract; see :mod:`polytile.errors`).
EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130


def _debug_requested(verbose: int) -> bool:
    """-v or POLYTILE_DEBUG >= 1 (read leniently: a bad value must not hide the real error)."""
    if verbose:
        return True
    text = os.environ.get("POLYTILE_DEBUG", "").strip()
    return text.isdigit() and int(text) > 0


def check_output_path(path, option: str = "-o") -> Path:
    """``path`` if a file can be written there, else a PolytileError naming ``option`` -- called before
    any work starts, so a typo in -o does not cost a whole run (and its results).

    >>> check_output_path("/no/such/dir/r.csv")
    Traceback (most recent call last):
    ...
    polytile.errors.PolytileError: cannot write /no/such/dir/r.csv (-o): the directory /no/such/dir does not exist
    """
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise PolytileError(f"cannot write {p} ({option}): is a directory; name a file")
    if not parent.exists():
        raise PolytileError(f"cannot write {p} ({option}): the directory {parent} does not exist")
    if not parent.is_dir():
        raise PolytileError(f"cannot write {p} ({option}): {parent} is not a directory")
    if p.exists() and not os.access(p, os.W_OK):
        raise PolytileError(f"cannot write {p} ({option}): the file is not writable")
    if not p.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise PolytileError(f"cannot write {p} ({option}): cannot create files in {parent} (permission denied)")
    return p


#: Options of any command that name a file the command writes: (attribute, option text).
_OUTPUT_OPTIONS = (("output", "-o"), ("json_out", "--json"))


def _check_outputs(args) -> None:
    for attr, option in _OUTPUT_OPTIONS:
        value = getattr(args, attr, None)
        if isinstance(value, (str, os.PathLike)) and str(value) != "-":
            check_output_path(value, option)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status (the console script passes it to sys.exit).

    Exit codes: 0 success; 1 a user error (a PolytileError, a failed check, a
    missing input file); 2 bad usage; 3 the environment (no compiler, no GPU,
    untrusted or unwritable cache, bad POLYTILE_* setting); 70 an internal
    error, reported in one line (the traceback with -v or POLYTILE_DEBUG); 130
    interrupted (Ctrl-C), at any moment, without a traceback.
    """
    sub_prog = PROG
    verbose = 0
    interrupted, restore = _watch_interrupts()
    try:
        code = _main(argv)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    finally:
        restore()
    if interrupted() and code != EXIT_OK:
        # A Ctrl-C that reached C code (isl) can surface as that library's error instead of
        # KeyboardInterrupt; whatever error followed it, the user interrupted the run.
        if code != EXIT_INTERRUPTED:
            _print_quietly(f"{PROG}: interrupted")
        return EXIT_INTERRUPTED
    return code


def _watch_interrupts():
    """Record every SIGINT while the command runs (still raising KeyboardInterrupt).

    Returns (whether one came, a function restoring the previous handler).
    """
    seen = [False]
    if threading.current_thread() is not threading.main_thread():
        return (lambda: False), (lambda: None)
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        seen[0] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    return (lambda: seen[0]), (lambda: signal.signal(signal.SIGINT, previous))


def _main(argv: Optional[Sequence[str]] = None) -> int:
    sub_prog = PROG
    verbose = 0
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version, or an argparse error (already printed)
            return _exit_code(exc.code)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        sub_prog = f"{PROG} {args.command}"
        verbose = args.verbose or 0
        level = max(get_config().debug, min(verbose, 3))  # a bad POLYTILE_DEBUG raises ConfigError here
        _check_outputs(args)
        with override(debug=level):
            return args.handler(args)
    except PolytileEnvironmentError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except PolytileError as err:
        text = str(err)
        # A located error already reads "file:line:col: error: ..."; don't stack prefixes.
        print(text if err.loc is not None else f"{PROG}: error: {text}", file=sys.stderr)
        return EXIT_USER
    except UsageError as err:
        print(f"{sub_prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _print_quietly(f"{PROG}: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `polytile compile ... | head`: the reader left; silence Python's
        # second complaint when it flushes stdout at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_USER
    except MemoryError:
        print(f"{PROG}: error: out of memory; try smaller sizes (--dims)", file=sys.stderr)
        return EXIT_USER
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        if exc.filename is None:
            return _internal_error(exc, verbose)
        # A file the user named (or that should be there) is missing or unreadable.
        name = exc.filename if exc.filename2 is None else f"{exc.filename} -> {exc.filename2}"
        print(f"{PROG}: error: {name}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USER
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
        return _internal_error(exc, verbose)


def _print_quietly(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError, KeyboardInterrupt):
        pass


def _internal_error(exc: BaseException, verbose: int) -> int:
    """Report a bug: one line, or the traceback too when debugging was asked for."""
    import traceback

    if _debug_requested(verbose):
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    hint = "" if _debug_requested(verbose) else "; run with -v (or POLYTILE_DEBUG=1) to see the traceback"
    print(f"{PROG}: internal error: {type(exc).__name__}{': ' + first if first else ''} -- this is a bug in "
          f"polytile, please report it with the command line and input file{hint}", file=sys.stderr)
    return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover - `python -m polytile` goes through __main__.py
    sys.exit(main())
