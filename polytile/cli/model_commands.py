"""``polytile show``, ``deps`` and ``schedule``: the polyhedral model of a Tile program or of each #pragma scop
region of a C file -- domains and accesses, dependences, schedules -- as text.

Each command's parser, its Tile half and its C half sit together; the views both halves print (the isl
schedule tree, the dependence relations) come first.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..errors import PolytileError
from ..isl_parts import maps_of
from . import json_output
from .c_files import (
    _C_PREPROCESSOR, _c_command, _c_options, _c_params, _c_region_header, _c_regions, _cpp_args, _is_c,
    _per_region, _pure, _reject_c_options, _reject_tile_options,
)
from .inputs import (
    FUSION, PROG, Target, _header_dim_names, _note, _shape_options, _signature, _specialize, compile_options,
    load_schedule_file, resolve,
)


# ---------------------------------------------------------------------------
# views shared by the commands
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


#: The relations of polytile.deps.Dependences, in the order `deps` prints them.
DEP_RELATIONS = (
    ("flow (RAW, memory-based)", "flow", "a write, then a later read of the same cell"),
    ("flow (RAW, value-based)", "flow_value", "a read and the last write before it (the value it sees)"),
    ("anti (WAR)", "anti", "a read, then a later write of the same cell"),
    ("output (WAW)", "output", "a write, then a later write of the same cell"),
    ("reduction", "reduction", "an aggregation onto its own cell: may be reordered, not run in parallel as is"),
)


def _relation_maps(rel, order: Sequence[str]) -> list:
    """The isl maps of a union map, one per (source, sink) statement pair, in statement order."""
    maps = maps_of(rel.coalesce())
    rank = {n: k for k, n in enumerate(order)}

    def key(m):
        import islpy as isl

        return (rank.get(m.get_tuple_name(isl.dim_type.in_), len(rank)),
                rank.get(m.get_tuple_name(isl.dim_type.out), len(rank)), str(m))

    return sorted(maps, key=key)


def _relation_lines(rel, order: Sequence[str]) -> List[str]:
    """One line per (source, sink) statement pair of an isl union map, in statement order."""
    return [str(m) for m in _relation_maps(rel, order)]


def _dependence_lines(dep, order: Sequence[str], *, indent: str, meanings: bool) -> List[str]:
    out: List[str] = []
    for title, attr, meaning in DEP_RELATIONS:
        if meanings:
            out += ["", f"{indent}{title}: {meaning}"]
        else:
            out.append(f"{indent}{title}:")
        out += [f"{indent}  {line}" for line in _relation_lines(getattr(dep, attr), order) or ["(none)"]]
    return out


def _c_dependences(cs):
    """A modelled region's dependences (in its original order) and its statement names."""
    from .. import deps as deps_mod

    return deps_mod.compute(cs.scop), [st.name for st in cs.scop.statements]


def _c_dependence_lines(cs, *, indent: str, meanings: bool) -> List[str]:
    """The dependence relations of a region (DEP_RELATIONS order), as ``deps`` and ``show`` print them."""
    dep, order = _c_dependences(cs)
    return _dependence_lines(dep, order, indent=indent, meanings=meanings)


# ---------------------------------------------------------------------------
# the same views as JSON data (--json; docs/json-output.md)
# ---------------------------------------------------------------------------


def dependences_json(dep, order: Sequence[str]) -> Dict[str, Any]:
    """Each relation of DEP_RELATIONS as ``{"relation": union map text, "maps": [{source, sink, map}]}``,
    the maps being the lines ``polytile deps`` prints.

    >>> # dependences_json(spec.deps, ["Z0", "S0"])["flow"]["maps"][0]["source"] -> "Z0"
    """
    import islpy as isl

    out: Dict[str, Any] = {}
    for _, attr, _ in DEP_RELATIONS:
        rel = getattr(dep, attr)
        out[attr] = {"relation": str(rel.coalesce()),
                     "maps": [{"source": m.get_tuple_name(isl.dim_type.in_), "sink": m.get_tuple_name(isl.dim_type.out),
                               "map": str(m)} for m in _relation_maps(rel, order)]}
    return out


def statement_json(st) -> Dict[str, Any]:
    """A Scop statement: its name and source text, iteration domain and accesses as isl text.

    >>> # statement_json(spec.scop.statements[1])["domain"] -> "{ S0[i, j, k] : 0 <= i <= 7 and ... }"
    """
    return {"name": st.name, "kind": st.kind, "origin": st.origin or None,
            "text": st.c_text if st.c_text is not None else (st.text or None),
            "line": st.loc.line if st.loc is not None else None, "iterators": list(st.iters),
            "domain": str(st.domain), "write": str(st.write_map()), "reads": [str(m) for m in maps_of(st.reads())]}


def _arrays_json(scop) -> List[Dict[str, Any]]:
    # A C array whose extent the frontend could not tell has -1 there ("?" in the text).
    return [{"name": a.name, "kind": a.kind, "dtype": a.dtype, "shape": [d if d >= 0 else None for d in a.shape]}
            for a in scop.arrays]


def schedule_json(schedule) -> Dict[str, Any]:
    """A schedule as ``show`` and ``run --json`` report it: its steps (replayable), the loop tree, the isl
    schedule tree (block YAML, as ``show`` prints it; ``isl.Schedule`` reads it back), each statement's
    time map with its loop names, and the marks (from :meth:`Schedule.to_json`, the saved form).

    >>> # schedule_json(spec.schedule)["steps"][0] -> {"op": "base", "kind": "original"}
    """
    tree = _schedule_yaml(schedule)
    if not hasattr(schedule, "to_json"):  # a bare isl schedule: only its tree is known
        return {"steps": None, "description": None, "tree": tree, "statements": None, "marks": None}
    saved = schedule.to_json()
    return {"steps": saved["steps"], "description": schedule.describe(), "tree": tree,
            "statements": [{"name": name, "map": v["map"], "loops": v["names"]}
                           for name, v in saved["statements"].items()],
            "marks": [{"statement": m[0], "loop": m[1], "kind": m[2], "arg": m[3]} for m in saved["marks"]]}


def _region_json(args, cs, *, full: bool) -> Dict[str, Any]:
    """A C region for ``deps --json`` (``full``: also what ``show`` prints: arrays, context, notes, ...)."""
    modelled = not (cs.skipped or cs.scop is None)
    out: Dict[str, Any] = {
        "lines": list(cs.lines), "function": cs.function, "params": list(cs.params), "fixed": dict(cs.fixed),
        "skipped": not modelled, "reason": cs.reason or None,
        "statements": [statement_json(st) for st in cs.scop.statements] if modelled else [],
        "dependences": dependences_json(*_c_dependences(cs)) if modelled else None,
    }
    if full:
        out.update({"bytes": [cs.start, cs.end], "context": str(cs.scop.context) if modelled else None,
                    "assumptions": list(cs.assumptions),
                    "declarations": list(cs.declarations), "arrays": _arrays_json(cs.scop) if modelled else [],
                    "schedule_map": str(cs.scop.schedule.get_map()) if modelled else None,
                    "notes": list(cs.notes)})
    return out


def _c_document(name: str, args, regions) -> Dict[str, Any]:
    return json_output.document(name, file=str(args.file), language="c", regions=regions)


# ---------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------


_SHOW_EPILOG = """\
examples:
  polytile show examples/matmul.tile
  polytile show examples/softmax.tile --dims M=4,N=5
  polytile show examples/conv2d_strided.tile --dims N=1,H=9,W=9,CI=2,KH=3,KW=3,CO=4

Without sizes (no --dims and no `// dims:` line) only the program is shown.
"""


def add_show_parser(subs, formatter, common) -> None:
    """Register ``polytile show`` on the subcommand parser."""
    p = subs.add_parser("show", formatter_class=formatter, epilog=_SHOW_EPILOG,
                        help="print the program, and with sizes its Scop, dependences and schedule tree",
                        description="Print a Tile program as polytile reads it.  Given sizes (--dims or the "
                                    "file's `// dims:` line), also print the polyhedral model: iteration "
                                    "domains and access maps, the dependences, and the schedule tree.  A C file "
                                    "(.c) shows each #pragma scop region: domains, accesses and dependences "
                                    "(--dims fixes its parameters).")
    p.add_argument("file", metavar="FILE.tile|FILE.c", help="the Tile program, or a C file with #pragma scop regions")
    p.add_argument("--target", default="openmp", choices=("openmp", "llvm", "cuda", "cuda-emulate"),
                   help="with cuda/cuda-emulate also print the GPU mapping (grid, block, sequential loops)")
    p.add_argument("--hardware", default=None, metavar="NAME|FILE",
                   help="hardware descriptor of the target, as for compile: it guides the automatic tiling "
                        "(default: host), and with cuda/cuda-emulate it is the GPU of the mapping "
                        "(default: nvidia-h100)")
    _shape_options(p)
    json_output.add_json_option(p, "the program (inputs, outputs, statements), and with sizes each statement's "
                                   "domain and accesses, the dependences and the schedule (steps, loop tree, "
                                   "isl tree) as isl text; a C file: each region")
    common(p, sub=True)
    p.set_defaults(handler=cmd_show)


@_c_command
def _show_c(args) -> int:
    """`polytile show FILE.c`: each region's parameters, arrays, domains, accesses and dependences."""
    from ..frontends.c import show

    if getattr(args, "json", False):
        json_output.emit(_c_document("show", args, [_region_json(args, cs, full=True) for cs in _c_regions(args)]))
        return 0

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
    if getattr(args, "json", False):
        return _show_json(args, target)
    print(f"// {target.path}")
    print(str(target.program).rstrip())
    if target.shapes is None:
        from .. import pipeline

        dims = _header_dim_names(target.program)
        names = dims + [n for n in pipeline.size_inputs(target.program) if n not in dims]
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
    mapping = _gpu_mapping(args, target)
    if mapping is not None:
        print()
        print(f"== GPU mapping ({mapping['hardware']}: grid, block, loops per thread)")
        print(mapping["description"])
    return 0


def _gpu_mapping(args, target: Target) -> Optional[Dict[str, str]]:
    """With --target cuda/cuda-emulate: the GPU of the mapping and the mapping in words."""
    if getattr(args, "target", "openmp") not in ("cuda", "cuda-emulate"):
        return None
    from ..targets import cuda as cuda_target

    hw = getattr(args, "hardware", None) or "nvidia-h100"
    kernel = cuda_target.compile_cuda(target.program, target.shapes, target.dtypes, hardware=hw, emulate=True)
    return {"hardware": hw, "description": kernel.describe()}


def _program_json(target: Target, spec) -> Dict[str, Any]:
    """The program as polytile reads it: its text, inputs (dimension names; shapes and dtypes), outputs
    and statements; shapes (and output dtypes) are null without sizes."""
    from .. import ir

    program = target.program
    tensors = spec.bound.tensors if spec is not None else {}
    return {
        "text": str(program).rstrip(),
        "inputs": [{"name": i.name, "dims": list(i.dims) if i.dims is not None else None,
                    "shape": list(target.shapes[k]) if target.shapes is not None else None,
                    "dtype": target.dtypes[k]} for k, i in enumerate(program.inputs)],
        "outputs": [{"name": o, "shape": list(tensors[o].shape) if o in tensors else None,
                     "dtype": tensors[o].dtype.name if o in tensors else None} for o in program.outputs],
        "statements": [{"target": st.target, "kind": type(st).__name__.lower(), "text": ir.format_stmt(st)}
                       for st in program.body],
    }


def _show_json(args, target: Target) -> int:
    """`polytile show FILE.tile --json`: the program, and with sizes the Scop, dependences and schedule."""
    spec = None
    if target.shapes is not None:
        spec = _specialize(target, args, build=False)
    elif _header_dim_names(target.program):
        _note("pass --dims to also get the Scop, dependences and schedule (they are null without sizes)")
    order = [st.name for st in spec.scop.statements] if spec is not None else []
    json_output.emit(json_output.document(
        "show", file=str(target.path), language="tile",
        dims=dict(spec.bound.dims) if spec is not None else None,
        program=_program_json(target, spec),
        scop=None if spec is None else {
            "name": spec.scop.name, "arrays": _arrays_json(spec.scop),
            "statements": [statement_json(st) for st in spec.scop.statements],
            "schedule_map": str(spec.scop.schedule.get_map())},
        dependences=dependences_json(spec.deps, order) if spec is not None else None,
        schedule=schedule_json(spec.schedule) if spec is not None else None,
        gpu_mapping=_gpu_mapping(args, target) if spec is not None else None,
    ))
    return 0


# ---------------------------------------------------------------------------
# deps
# ---------------------------------------------------------------------------


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


def add_deps_parser(subs, formatter, common) -> None:
    """Register ``polytile deps`` on the subcommand parser."""
    p = subs.add_parser("deps", formatter_class=formatter, epilog=_DEPS_EPILOG,
                        help="print the dependences (flow, anti, output, reduction) as isl relations",
                        description="Compute the dependences of a Tile program for concrete sizes and print "
                                    "each relation (memory- and value-based flow, anti, output, reduction) "
                                    "as isl text, one map per pair of statements.  A C file (.c): the same for "
                                    "each #pragma scop region, parametric unless --dims fixes parameters.")
    p.add_argument("file", metavar="FILE.tile|FILE.c", help="the Tile program, or a C file with #pragma scop regions")
    _c_options(p)
    _shape_options(p)
    json_output.add_json_option(p, "the statements and, per kind (flow, flow_value, anti, output, reduction), the "
                                   "relation and its maps per statement pair as isl text; a C file: per region")
    common(p, sub=True)
    p.set_defaults(handler=cmd_deps)


def _specialised_header(target: Target, spec) -> str:
    dims = ", ".join(f"{k}={v}" for k, v in spec.bound.dims.items()) or "none"
    return f"// {target.path} specialised to {dims}; inputs {_signature(target) or '(none)'}"


def cmd_deps(args) -> int:
    if _is_c(args):
        return _deps_c(args)
    _reject_c_options(args, "deps", ("function", "assume_no_alias", "reassociate") + _C_PREPROCESSOR)
    target = resolve(args)
    spec = _specialize(target, args, build=False)
    order = [s.name for s in spec.scop.statements]
    if getattr(args, "json", False):
        json_output.emit(json_output.document(
            "deps", file=str(target.path), language="tile", dims=dict(spec.bound.dims),
            inputs=[{"name": n, "shape": list(sh), "dtype": dt}
                    for n, sh, dt in zip(target.program.input_names, target.shapes, target.dtypes)],
            statements=[statement_json(st) for st in spec.scop.statements],
            dependences=dependences_json(spec.deps, order)))
        return 0
    print(_specialised_header(target, spec))
    print()
    print("statements:")
    for s in spec.scop.statements:
        print(f"  {s.name}: {s.text or s.kind}")
    print("\n".join(_dependence_lines(spec.deps, order, indent="", meanings=True)))
    return 0


@_c_command
def _deps_c(args) -> int:
    """`polytile deps FILE.c`: per region, its statements with their C text and each dependence relation."""
    _reject_tile_options(args, "deps", ("shape", "dtype", "dtypes"))
    if getattr(args, "json", False):
        json_output.emit(_c_document("deps", args, [_region_json(args, cs, full=False) for cs in _c_regions(args)]))
        return 0

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


def add_schedule_parser(subs, formatter, common) -> None:
    """Register ``polytile schedule`` on the subcommand parser."""
    p = subs.add_parser("schedule", formatter_class=formatter, epilog=_SCHEDULE_EPILOG,
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
    common(p, sub=True)
    p.set_defaults(handler=cmd_schedule)


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


@_c_command
def _schedule_c(args) -> int:
    """`polytile schedule FILE.c`: per region, the schedule `polytile opt` uses (loop tree, isl tree, notes)."""
    from .. import c_runner

    _reject_tile_options(args, "schedule", ("shape", "dtype", "dtypes"))
    _, results = c_runner.optimise(
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
    sched = pipeline.schedule(target.program, target.size_values, shapes=shapes, dtypes=list(target.dtypes),
                              steps=options.get("schedule"), fusion=options.get("fusion"),
                              parallel=options.get("parallel", True), hardware=options.get("hardware", "host"),
                              min_parallel_work=options.get("min_parallel_work"))  # compile's: loops too small stay serial
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
