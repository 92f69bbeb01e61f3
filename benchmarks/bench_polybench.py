"""PolyBench/C 4.2.1 through ``polytile opt``: is every kernel still right, and how fast is it against GCC,
Graphite and Polly?  How to run it, the rules in full and measured numbers: benchmarks/README.md.

Reads an unmodified checkout and never writes into it (optimised files and
builds go to a temporary directory, or ``--workdir``).  The kernels are the
``.c`` files under ``datamining/``, ``linear-algebra/{blas,kernels,solvers}/``,
``medley/`` and ``stencils/`` with a ``.h`` of the same name beside them (30).

* **Optimising**: ``polytile opt -I utilities -D<DATASET>_DATASET
  --assume-no-alias [--reassociate]`` per (kernel, dataset): the output guards
  the header's size macros (``#if NI != 60 / #error``), and PolyBench's array
  parameters are pointers ``polytile opt`` refuses without the flag (checked
  and printed at the start; ``main`` allocates every array separately).  A
  failure is reported with the first line of the error; the run goes on.
* **Correctness**: original and optimised file built alike (``gcc -O2 -fopenmp
  -ffp-contract=off -DPOLYBENCH_DUMP_ARRAYS``, SMALL then MEDIUM), run, dumps
  compared byte for byte (a region versioned on the thread team's pay: its
  parallel and its serial copy, each built alone): ``bitwise`` / ``DIFFERENT`` / ``failed``; unequal
  ``--reassociate`` dumps number by number: ``close`` when
  ``|a - b| <= rtol * max(|a|, |b|) + one unit of the last printed digit``.
* **Timing**: ``-DPOLYBENCH_TIME`` (PolyBench's kernel time) at LARGE, MEDIUM
  where the gcc -O3 kernel takes over ``--slow-limit``; variants ``gcc-O3``
  (baseline), ``graphite``, ``polly`` (clang-14 or clang, when it works),
  ``polytile``, ``reassoc`` (``--variants`` picks some); ``--rounds`` interleaved rounds in rotating order
  (a kernel under 10 ms: ``--short-runs`` runs per round, their median the
  round's time); min, median, ratio = gcc-O3 median / variant median, geometric means.  With
  ``--busy N`` the rounds run beside N processes spinning on arithmetic (a
  shared machine; the probes stay quiet).

Prints the tables; writes JSON with provenance to ``benchmarks/results/polybench.json``.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _common  # noqa: E402
from _polybench_results import (  # noqa: E402  (the pure helpers; tests reach them through this module)
    error_line, parse_time, compare_dumps, ratio, geomean, rotate, summarise)

from polytile.compare import cpu_model, format_table  # noqa: E402
from polytile.c_optimiser.team import copies as team_copies  # noqa: E402

#: Where PolyBench keeps its kernels, in the order of its utilities/benchmark_list.
CATEGORIES = ("datamining", "linear-algebra/blas", "linear-algebra/kernels", "linear-algebra/solvers",
              "medley", "stencils")
DATASETS = ("MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE")
CHECK_DATASETS = ("SMALL", "MEDIUM")
#: Correctness builds: the same for the original and the optimised file.
CHECK_FLAGS = ("-O2", "-fopenmp", "-ffp-contract=off")
O3 = ("-O3", "-march=native")
GRAPHITE = ("-floop-parallelize-all", "-ftree-parallelize-loops={threads}", "-floop-nest-optimize")
POLLY = ("-mllvm", "-polly", "-mllvm", "-polly-parallel")
BASELINE = "gcc-O3"
PEERS = ("graphite", "polly")  # the other compilers timed beside the baseline
#: The optimised sources: variant name -> extra ``polytile opt`` options.
OPT_SOURCES = {"polytile": (), "reassoc": ("--reassociate",)}
MIN_ROUNDS = 3
#: A kernel whose gcc -O3 probe ran under this many seconds is run --short-runs times per round.
SHORT_S = 0.01
#: Dump verdicts from best to worst (one of two copies of a region decides a kernel's).
VERDICT_RANK = {"bitwise": 0, "close": 1}
#: The dataset probe stops a LARGE run after this many times --slow-limit of wall time.
PROBE_WALL = 10

EPILOG = """\
examples:
  # correctness only, all 30 kernels (SMALL and MEDIUM dumps compared), builds 2 at a time
  python benchmarks/bench_polybench.py /tmp/pb --skip-timing --jobs 2

  # timing on a few kernels, 3 interleaved rounds at LARGE (MEDIUM for slow ones)
  python benchmarks/bench_polybench.py /tmp/pb --kernels gemm atax durbin --rounds 3

  # everything, forced to MEDIUM, one thread, results elsewhere
  python benchmarks/bench_polybench.py /tmp/pb --dataset MEDIUM --threads 1 --out pb.json

  # keep the optimised files and builds to look at them (never inside the checkout)
  python benchmarks/bench_polybench.py /tmp/pb --kernels jacobi-2d --skip-timing --workdir /tmp/pbw

Correctness: the dumps of the original and of the polytile opt output are "bitwise" identical,
"close" (--reassociate only: within --rtol plus a last printed digit), "DIFFERENT" or "failed".
Timing: ratio = gcc -O3 time / variant time, same run (> 1: faster).
"""


# --- Kernels ---


@dataclass(frozen=True)
class Kernel:
    """One PolyBench kernel: its name (the file's stem), source, header and category folder."""

    name: str
    source: Path
    header: Path
    category: str

    @property
    def folder(self) -> Path:
        return self.source.parent


def check_checkout(root: Path) -> None:
    """Raise ValueError unless ``root`` looks like a PolyBench/C checkout (utilities/polybench.{c,h})."""
    for name in ("polybench.c", "polybench.h"):
        if not (root / "utilities" / name).is_file():
            raise ValueError(f"{root} is not a PolyBench/C checkout: no utilities/{name}")


def discover(root: Path) -> List[Kernel]:
    """The kernels under ``root``: every ``<category>/<dir>/<name>.c`` with a ``<name>.h`` beside it."""
    root = Path(root)
    kernels = []
    for category in CATEGORIES:
        base = root / category
        if not base.is_dir():
            continue
        for folder in sorted(p for p in base.iterdir() if p.is_dir()):
            for source in sorted(folder.glob("*.c")):
                header = source.with_suffix(".h")
                if header.is_file():
                    kernels.append(Kernel(source.stem, source, header, category))
    return kernels


def select(kernels: Sequence[Kernel], names: Optional[Sequence[str]]) -> List[Kernel]:
    """The kernels named (in the order given), or all; ValueError naming the unknown ones."""
    if not names:
        return list(kernels)
    by_name = {k.name: k for k in kernels}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(sorted(by_name))}")
    return [by_name[n] for n in dict.fromkeys(names)]


# --- Processes: optimise, build, run ---


@dataclass
class Proc:
    """What a child process did."""

    rc: Optional[int]  # None: killed at the timeout
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def why(self, what: str) -> str:
        if self.rc is None:
            return f"{what} timed out after {self.seconds:.0f} s"
        return f"{what} failed (exit {self.rc}): {error_line(self.stderr or self.stdout)}"


def run(cmd: Sequence[str], timeout: float, env: Optional[Dict[str, str]] = None) -> Proc:
    """Run an argument list (never a shell), capturing its output."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(list(cmd), capture_output=True, text=True, errors="replace", timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return Proc(None, out, "", time.perf_counter() - t0)
    except OSError as exc:
        return Proc(127, "", str(exc), time.perf_counter() - t0)
    return Proc(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)


def optimise_cmd(kernel: Kernel, root: Path, dataset: str, out: Path, extra: Sequence[str] = (),
                 assume_no_alias: bool = True) -> List[str]:
    """The ``polytile opt`` command line for one kernel and dataset."""
    cmd = [sys.executable, "-m", "polytile", "opt", str(kernel.source), "-o", str(out),
           "-I", str(Path(root) / "utilities"), "-D", f"{dataset}_DATASET"]
    if assume_no_alias:
        cmd.append("--assume-no-alias")
    return cmd + list(extra)


def optimise(kernel: Kernel, root: Path, dataset: str, out: Path, extra: Sequence[str], timeout: float
             ) -> Dict[str, Any]:
    """Optimise into ``out``: {"ok", "error", "seconds", "changed"} (never raises)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    p = run(optimise_cmd(kernel, root, dataset, out, extra), timeout)
    rec: Dict[str, Any] = {"ok": p.ok and out.is_file(), "seconds": round(p.seconds, 3), "error": None}
    if not rec["ok"]:
        rec["error"] = p.why("polytile opt") if p.rc is None else error_line(p.stderr or p.stdout)
    else:
        rec["changed"] = out.read_bytes() != kernel.source.read_bytes()
    return rec


def build_cmd(cc: str, flags: Sequence[str], source: Path, kernel: Kernel, root: Path,
              defines: Sequence[str], exe: Path, libs: Sequence[str] = ("-lm",)) -> List[str]:
    """Compile ``source`` (the kernel or its optimised copy) with utilities/polybench.c into ``exe``."""
    util = Path(root) / "utilities"
    return [cc, *flags, "-I", str(util), "-I", str(kernel.folder), *(f"-D{d}" for d in defines),
            str(util / "polybench.c"), str(source), "-o", str(exe), *libs]


def build(cmd: List[str], timeout: float) -> Optional[str]:
    """None when the build succeeded, else its first error line."""
    Path(cmd[cmd.index("-o") + 1]).parent.mkdir(parents=True, exist_ok=True)
    p = run(cmd, timeout)
    return None if p.ok else p.why("build")


# --- Variants ---


@dataclass(frozen=True)
class Variant:
    """A timed build: compiler, flags, libraries, and which source ("original" or an OPT_SOURCES name)."""

    name: str
    cc: str
    flags: Tuple[str, ...]
    source: str
    libs: Tuple[str, ...] = ("-lm",)

    def command_text(self) -> str:
        return " ".join([Path(self.cc).name, *self.flags, *self.libs])


def compiler_version(cc: Optional[str]) -> Optional[str]:
    """First line of ``cc --version`` (None when there is no such compiler)."""
    from polytile.errors import PolytileError
    from polytile.runtime import compiler_version as version

    try:
        return version(cc) if cc else None
    except PolytileError:
        return None


_PROBE_C = "double a[512][512];\nint main(void) {\n  for (int i = 0; i < 512; i++)\n" \
           "    for (int j = 0; j < 512; j++) a[i][j] = i * j;\n  return a[3][4] == 12.0 ? 0 : 1;\n}\n"


def probe_compiler(cc: str, flags: Sequence[str], libs: Sequence[str], tmp: Path, label: str) -> Optional[str]:
    """None when ``cc flags`` builds and runs a small parallelisable loop cleanly, else why not."""
    src = tmp / f"probe_{label}.c"
    src.write_text(_PROBE_C)
    exe = tmp / f"probe_{label}"
    p = run([cc, *flags, str(src), "-o", str(exe), *libs], 120)
    if not p.ok:
        return p.why(f"{label} test build")
    warning = next((line for line in p.stderr.splitlines() if "warning" in line.lower()), None)
    if warning:  # e.g. a GCC built without isl: "Graphite loop optimizations cannot be used"
        return f"{label} test build warns: {warning.strip()}"
    p = run([str(exe)], 60)
    return None if p.ok else p.why(f"{label} test run")


def find_clang() -> Optional[str]:
    return shutil.which("clang-14") or shutil.which("clang")


def make_variants(threads: int, gcc: str, clang: Optional[str], tmp: Path) -> Tuple[List[Variant], List[str]]:
    """The timed variants that work on this machine, and notes about those that do not."""
    notes = []
    graphite = tuple(f.format(threads=threads) for f in GRAPHITE)
    variants = [Variant(BASELINE, gcc, O3 + ("-fopenmp",), "original"),
                Variant("graphite", gcc, O3 + ("-fopenmp",) + graphite, "original")]
    why = probe_compiler(gcc, variants[1].flags, ("-lm",), tmp, "graphite")
    if why:
        notes.append(f"graphite skipped: {why}")
        variants.pop()
    if clang is None:
        notes.append("polly skipped: neither clang-14 nor clang is installed")
    else:
        polly = Variant("polly", clang, O3 + POLLY, "original", ("-lm", "-lgomp"))
        why = probe_compiler(clang, polly.flags, polly.libs, tmp, "polly")
        if why:
            notes.append(f"polly skipped: {why}")
        else:
            variants.append(polly)
    variants += [Variant(name, gcc, O3 + ("-fopenmp",), name) for name in OPT_SOURCES]
    return variants, notes


def pick_variants(variants: Sequence[Variant], names: Sequence[str]) -> Tuple[List[Variant], List[str]]:
    """The baseline (always first) and the variants named in ``names``, and a note naming the others.

    >>> # pick_variants([gcc-O3, graphite, polly, polytile, reassoc], ["polytile"]) -> [gcc-O3, polytile]
    """
    keep = [v for v in variants if v.name == BASELINE or v.name in names]
    dropped = [v.name for v in variants if v not in keep]
    return keep, [f"not timed (--variants): {', '.join(dropped)}"] if dropped else []


# --- The two phases ---


class Harness:
    """Shared settings of a run and the helpers both phases use."""

    def __init__(self, root: Path, work: Path, args: argparse.Namespace, say: Callable[[str], None]):
        self.root, self.work, self.args, self.say = root, work, args, say
        self.gcc = shutil.which("gcc") or "gcc"
        self.env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> List[Any]:
        """``fn`` over ``items``, ``--jobs`` at a time, results in order."""
        if self.args.jobs <= 1 or len(items) <= 1:
            return [fn(item) for item in items]
        with concurrent.futures.ThreadPoolExecutor(self.args.jobs) as pool:
            return list(pool.map(fn, items))

    def source_for(self, kernel: Kernel, dataset: str, name: str) -> Tuple[Optional[Path], Dict[str, Any]]:
        """The optimised file of ``kernel`` for ``dataset`` (OPT_SOURCES ``name``), optimising it once."""
        out = self.work / kernel.name / dataset / name / kernel.source.name
        rec = optimise(kernel, self.root, dataset, out, OPT_SOURCES[name], self.args.opt_timeout)
        return (out if rec["ok"] else None), rec

    def alias_note(self, kernel: Kernel) -> str:
        """What ``polytile opt`` says about PolyBench's array parameters without --assume-no-alias."""
        out = self.work / "_alias_check" / kernel.source.name
        out.parent.mkdir(parents=True, exist_ok=True)
        p = run(optimise_cmd(kernel, self.root, "SMALL", out, assume_no_alias=False), self.args.opt_timeout)
        said = error_line(p.stderr or p.stdout)
        if p.ok:
            return (f"polytile opt accepted {kernel.name} without --assume-no-alias; the harness passes it "
                    "anyway (PolyBench's main allocates every array separately)")
        if "--assume-no-alias" not in said and "overlap" not in said:
            return f"passing --assume-no-alias (without it {kernel.name} fails for another reason: {said})"
        return (f"polytile opt needs --assume-no-alias for PolyBench (array parameters are pointers that may "
                f"overlap as far as the file says; PolyBench's main allocates every array separately, so the "
                f"harness passes it). Without it, {kernel.name}: {said}")

    # -- correctness ---------------------------------------------------------

    def check_one(self, item: Tuple[Kernel, str]) -> Dict[str, Any]:
        """Original vs optimised dumps of one kernel at one dataset."""
        kernel, dataset = item
        base = self.work / kernel.name / dataset
        defines = ("POLYBENCH_DUMP_ARRAYS", f"{dataset}_DATASET")
        limit = self.args.timeout

        def dump(source: Path, tag: str, force: Tuple[str, ...] = ()) -> Tuple[Optional[str], Optional[str]]:
            exe = base / f"check_{tag}"
            err = build(build_cmd(self.gcc, CHECK_FLAGS + force, source, kernel, self.root, defines, exe), limit)
            if err:
                return None, err
            p = run([str(exe)], limit, self.env)
            if not p.ok:
                return None, p.why("run")
            if "==BEGIN DUMP_ARRAYS==" not in p.stderr:  # an empty dump would compare "bitwise"
                return None, "run printed no array dump"
            return p.stderr, None

        original, orig_err = dump(kernel.source, "original")
        rec: Dict[str, Any] = {}
        for name in OPT_SOURCES:
            path, opt = self.source_for(kernel, dataset, name)
            entry: Dict[str, Any] = {"optimise": opt}
            if path is None:
                entry.update(verdict="failed", error=opt["error"])
            elif orig_err:
                entry.update(verdict="failed", error=f"original: {orig_err}")
            else:
                # A region versioned on the thread team's pay has a parallel and a serial copy; the
                # dataset's sizes pick one at run time, so each is built alone and compared.
                copies = team_copies(path.read_bytes())
                verdicts = []
                for copy, force in copies:
                    got, err = dump(path, f"{name}_{copy}" if copy else name, force)
                    if err:
                        entry.update(verdict="failed", error=err if copy is None else f"{copy} copy: {err}")
                        break
                    verdicts.append(compare_dumps(original, got, self.args.rtol if name == "reassoc" else None))
                else:
                    worst = max(verdicts, key=lambda v: VERDICT_RANK.get(v["verdict"], 3))
                    entry.update(worst, copies=[c for c, _ in copies if c])
            rec[name] = entry
        p0, p1 = (self.work / kernel.name / dataset / n / kernel.source.name for n in OPT_SOURCES)
        ok = all(rec[n]["optimise"]["ok"] for n in OPT_SOURCES)  # None: nothing to compare
        rec["reassoc_same_code"] = p0.read_bytes() == p1.read_bytes() if ok else None
        self.say(f"{kernel.name} {dataset}: " + ", ".join(f"{n} {rec[n]['verdict']}" for n in OPT_SOURCES))
        return rec

    def correctness(self, kernels: Sequence[Kernel]) -> Dict[str, Dict[str, Any]]:
        items = [(k, d) for k in kernels for d in CHECK_DATASETS]
        results = self.map(self.check_one, items)
        out: Dict[str, Dict[str, Any]] = {}
        for (kernel, dataset), rec in zip(items, results):
            out.setdefault(kernel.name, {})[dataset] = rec
        return out

    # -- timing --------------------------------------------------------------

    def timed_cmd(self, variant: Variant, kernel: Kernel, dataset: str, source: Path) -> Tuple[List[str], Path]:
        exe = self.work / kernel.name / dataset / f"time_{variant.name}"
        defines = ("POLYBENCH_TIME", f"{dataset}_DATASET")
        return build_cmd(variant.cc, variant.flags, source, kernel, self.root, defines, exe, variant.libs), exe

    def choose_dataset(self, kernel: Kernel, baseline: Variant) -> Dict[str, Any]:
        """LARGE, or MEDIUM when the baseline's untimed probe run at LARGE exceeds --slow-limit."""
        if self.args.dataset:
            return {"dataset": self.args.dataset, "why": "--dataset"}
        cmd, exe = self.timed_cmd(baseline, kernel, "LARGE", kernel.source)
        err = build(cmd, self.args.timeout)
        if err:
            return {"dataset": "MEDIUM", "why": f"LARGE build failed: {err}"}
        # The kernel's time decides (ludcmp's O(N^3) initialisation makes its LARGE run 30 s for a 4 s
        # kernel); a whole run over PROBE_WALL times the limit is stopped and also means MEDIUM.
        limit = self.args.slow_limit
        p = run([str(exe)], PROBE_WALL * limit, self.env)
        t = parse_time(p.stdout) if p.ok else None
        rec = {"probe_s": t, "probe_wall_s": round(p.seconds, 2)}
        if p.rc is None:
            return {"dataset": "MEDIUM", "why": f"gcc -O3 run at LARGE over {PROBE_WALL * limit:g} s", **rec}
        if not p.ok or t is None:
            return {"dataset": "MEDIUM", "why": f"LARGE probe: {p.why('run') if not p.ok else 'no time'}", **rec}
        if t > limit:
            return {"dataset": "MEDIUM", "why": f"gcc -O3 kernel at LARGE {t:.1f} s > {limit:g} s", **rec}
        return {"dataset": "LARGE", "why": f"gcc -O3 kernel at LARGE {t:.2f} s <= {limit:g} s", **rec}

    def prepare(self, item: Tuple[Kernel, str, List[Variant]]) -> Dict[str, Any]:
        """Optimise one kernel for its timing dataset and build every variant: name -> exe or error."""
        kernel, dataset, variants = item
        built: Dict[str, Any] = {}
        sources = {"original": (kernel.source, None), **{n: self.source_for(kernel, dataset, n) for n in OPT_SOURCES}}
        for v in variants:
            path, rec = sources[v.source]
            if path is None:
                built[v.name] = {"error": rec["error"]}
                continue
            cmd, exe = self.timed_cmd(v, kernel, dataset, path)
            err = build(cmd, self.args.timeout)
            built[v.name] = {"error": err} if err else {"exe": str(exe)}
        p0, p1 = (sources[n][0] for n in OPT_SOURCES)
        built["_reassoc_same_code"] = bool(p0 and p1 and p0.read_bytes() == p1.read_bytes())
        self.say(f"{kernel.name} ({dataset}) built: "
                 + ", ".join(f"{v.name} {'ok' if 'exe' in built[v.name] else 'FAILED'}" for v in variants))
        return built

    def _rounds(self, kernels, variants, prepared, times, errors, rounds, runs) -> None:
        """The interleaved timing rounds: every variant of every kernel once per round, in rotated order;
        ``runs[kernel]`` runs back to back per slot, the slot's time their median."""
        for r in range(self.args.rounds):
            order = [(k, v) for k in rotate(kernels, r) for v in rotate(variants, r)]
            rounds.append({"round": r + 1, "order": [f"{k.name}/{v.name}" for k, v in order],
                           "load_before": _loadavg()})
            for k, v in order:
                if v.name in errors[k.name]:
                    times[k.name][v.name].append(None)
                    continue
                got: List[float] = []
                for _ in range(runs[k.name]):
                    p = run([prepared[k.name][v.name]["exe"]], self.args.timeout, self.env)
                    t = parse_time(p.stdout) if p.ok else None
                    if t is None:  # a crash or a timeout is not retried in later rounds
                        errors[k.name][v.name] = p.why("run") if not p.ok else "no time printed"
                        got = []
                        break
                    got.append(t)
                t = statistics.median(got) if got else None
                times[k.name][v.name].append(t)
                self.say(f"round {r + 1}: {k.name} {v.name} " + (f"{t:.4f} s" if t is not None else "failed"))

    def timing(self, kernels: Sequence[Kernel], variants: Sequence[Variant]) -> Dict[str, Any]:
        baseline = variants[0]
        chosen = {}
        for k in kernels:  # one at a time: the probe is a measurement
            chosen[k.name] = self.choose_dataset(k, baseline)
            self.say(f"{k.name}: {chosen[k.name]['dataset']} ({chosen[k.name]['why']})")
        items = [(k, chosen[k.name]["dataset"], list(variants)) for k in kernels]
        prepared = dict(zip((k.name for k in kernels), self.map(self.prepare, items)))
        times: Dict[str, Dict[str, List[Optional[float]]]] = {k.name: {v.name: [] for v in variants} for k in kernels}
        errors = {k.name: {v.name: prepared[k.name][v.name]["error"] for v in variants
                           if "error" in prepared[k.name][v.name]} for k in kernels}
        rounds = []
        # A kernel of a few milliseconds swings by 10-20% from run to run (thread wake-up, the timer's
        # own overhead); more runs per slot keep its median honest without more rounds for all.
        runs = {k.name: self.args.short_runs if (chosen[k.name].get("probe_s") or SHORT_S) < SHORT_S else 1
                for k in kernels}
        with _common.busy_processes(self.args.busy):
            self._rounds(kernels, variants, prepared, times, errors, rounds, runs)
        out: Dict[str, Any] = {"rounds": rounds, "busy_processes": self.args.busy, "kernels": {}}
        for k in kernels:
            stats = {v.name: summarise(times[k.name][v.name]) for v in variants}
            base = stats[baseline.name]["median"]
            out["kernels"][k.name] = {
                **chosen[k.name],
                "reassoc_same_code": prepared[k.name]["_reassoc_same_code"],
                "runs_per_round": runs[k.name],
                "variants": {v.name: {"times_s": times[k.name][v.name], **stats[v.name],
                                      "ratio": ratio(base, stats[v.name]["median"]),
                                      "error": errors[k.name].get(v.name)} for v in variants}}
        out["geomean_ratio"] = {
            v.name: geomean(out["kernels"][k.name]["variants"][v.name]["ratio"] for k in kernels)
            for v in variants}
        out["geomean_n"] = {v.name: sum(out["kernels"][k.name]["variants"][v.name]["ratio"] is not None
                                        for k in kernels) for v in variants}
        return out


def _loadavg() -> Optional[List[float]]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


# --- Reports ---


def _verdict_cell(entry: Dict[str, Any]) -> str:
    v = entry["verdict"]
    if v == "close":  # how many printed numbers moved (by at most rtol plus one last digit)
        return f"close ({entry['differ']}/{entry['values']})"
    return v


def correctness_table(results: Dict[str, Dict[str, Any]]) -> Tuple[str, List[str]]:
    """The per-kernel verdicts and the list of reasons for every failure or difference."""
    rows, notes = [], []
    for name, per_ds in results.items():
        row = [name]
        for opt in OPT_SOURCES:
            for ds in CHECK_DATASETS:
                entry = per_ds[ds][opt]
                row.append(_verdict_cell(entry))
                if entry["verdict"] == "failed":
                    notes.append(f"{name} {opt} {ds}: {entry['error']}")
                elif entry["verdict"] == "DIFFERENT":
                    notes.append(f"{name} {opt} {ds}: first difference {entry['where']} "
                                 f"(max rel {entry['max_rel']:.1e})")
        same = [per_ds[ds]["reassoc_same_code"] for ds in CHECK_DATASETS]
        row.append("-" if None in same else "yes" if all(same) else "no")
        rows.append(row)
    headers = ["kernel"] + [f"{opt} {ds}" for opt in OPT_SOURCES for ds in CHECK_DATASETS] + ["reassoc=polytile"]
    return format_table(rows, headers), list(dict.fromkeys(notes))


def _s(x: Optional[float]) -> str:
    return "-" if x is None else (f"{x:.4f}" if x < 10 else f"{x:.2f}")


def _x(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}x"


def timing_table(timing: Dict[str, Any], names: Sequence[str]) -> Tuple[str, List[str]]:
    """Median/min seconds per variant and the ratios to gcc -O3, with a geometric-mean row."""
    others = [n for n in names if n != BASELINE]
    rows, notes = [], []
    for kname, rec in timing["kernels"].items():
        vs = rec["variants"]
        rows.append([kname, rec["dataset"]] + [f"{_s(vs[n]['median'])}/{_s(vs[n]['min'])}" for n in names]
                    + [_x(vs[n]["ratio"]) for n in others])
        notes += [f"{kname} {n}: {vs[n]['error']}" for n in names if vs[n]["error"]]
    rows.append(["geomean", ""] + [""] * len(names)
                + [f"{_x(timing['geomean_ratio'][n])} ({timing['geomean_n'][n]})" for n in others])
    headers = ["kernel", "dataset"] + [f"{n} s" for n in names] + [f"{n} vs -O3" for n in others]
    return format_table(rows, headers), notes


# --- Command line ---


def default_threads() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench_polybench.py", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="PolyBench/C 4.2.1 through polytile opt: correctness of every kernel (SMALL and MEDIUM "
                    "dumps against the original's) and timing against gcc -O3, Graphite and Polly.")
    p.add_argument("polybench", type=Path, help="an unmodified PolyBench/C 4.2.1 checkout (never written to)")
    p.add_argument("--kernels", nargs="+", metavar="NAME", help="only these kernels (e.g. gemm atax jacobi-2d)")
    p.add_argument("--rounds", type=_common.at_least(int, MIN_ROUNDS, "rounds"), default=MIN_ROUNDS,
                   help="interleaved timing rounds (>= 3; default 3)")
    p.add_argument("--dataset", choices=DATASETS,
                   help="timing dataset for every kernel (default: LARGE, MEDIUM where gcc -O3 takes over "
                        "--slow-limit)")
    p.add_argument("--slow-limit", type=_common.at_least(float, 1, "seconds"), default=20.0,
                   help="kernel seconds of the gcc -O3 probe at LARGE above which a kernel is timed at MEDIUM "
                        "(20; the probe is stopped after 10x this wall time, also meaning MEDIUM)")
    p.add_argument("--skip-timing", action="store_true", help="correctness only")
    # 15, not 5: a 0.2 ms kernel (jacobi-1d, durbin on a fast core) moved 6% between two runs of 5 while
    # 21 back-to-back runs of gcc's and polytile's builds agreed to 0.1%; more runs cost ~1 s per kernel.
    p.add_argument("--short-runs", type=_common.at_least(int, 1, "run"), default=15,
                   help=f"runs per round of a kernel whose gcc -O3 probe took under {SHORT_S * 1e3:g} ms, every "
                        "variant alike; the round's time is their median (default 15)")
    p.add_argument("--jobs", type=_common.at_least(int, 1, "job"), default=1,
                   help="optimisations, builds and correctness runs at a time (default 1; timed runs are "
                        "always one at a time)")
    p.add_argument("--threads", type=_common.at_least(int, 1, "thread"), default=default_threads(),
                   help="OMP_NUM_THREADS of every run and N of -ftree-parallelize-loops=N "
                        "(default: $OMP_NUM_THREADS, else the core count)")
    p.add_argument("--variants", nargs="+", metavar="NAME", choices=PEERS + tuple(OPT_SOURCES),
                   help=f"time only these besides the {BASELINE} baseline (of: {', '.join(PEERS + tuple(OPT_SOURCES))}; "
                        "default all): e.g. leave out Polly and Graphite, whose floyd-warshall runs take minutes")
    p.add_argument("--busy", type=_common.at_least(int, 0, "busy processes"), default=0,
                   help="run the timing rounds beside this many busy processes (processes spinning on "
                        "arithmetic, one core each; the dataset probes stay quiet): how each variant degrades "
                        "on a shared machine")
    p.add_argument("--rtol", type=float, default=1e-6,
                   help="relative tolerance of --reassociate dumps (plus one unit of the last printed digit)")
    p.add_argument("--timeout", type=_common.at_least(float, 1, "seconds"), default=600.0,
                   help="seconds before a build or a run is stopped and reported failed (600)")
    p.add_argument("--opt-timeout", type=_common.at_least(float, 1, "seconds"), default=600.0,
                   help="seconds before polytile opt is stopped and the kernel reported failed (600)")
    p.add_argument("--workdir", type=Path,
                   help="keep optimised files and builds here (default: a temporary directory, removed)")
    p.add_argument("--out", type=Path, default=_common.RESULTS / "polybench.json",
                   help="JSON results file (default: benchmarks/results/polybench.json)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def polybench_commit(root: Path) -> Dict[str, Any]:
    """The checkout's git commit and whether it has local changes (None when it is not a git tree)."""
    head = run(["git", "-C", str(root), "rev-parse", "HEAD"], 30)
    if not head.ok:
        return {"commit": None}
    status = run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], 30)
    return {"commit": head.stdout.strip(), "modified": bool(status.stdout.strip()) if status.ok else None}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = make_parser().parse_args(argv)
    say = _common.progress(args.quiet)
    root = args.polybench.resolve()
    try:
        check_checkout(root)
        kernels = select(discover(root), args.kernels)
    except ValueError as exc:
        print(f"bench_polybench: {exc}", file=sys.stderr)
        return 2
    if args.workdir is not None:
        work = args.workdir.resolve()
        if work == root or root in work.parents:
            print("bench_polybench: --workdir must not be inside the PolyBench checkout", file=sys.stderr)
            return 2
        work.mkdir(parents=True, exist_ok=True)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="bench_polybench_")
        work = Path(cleanup.name)
    try:
        return _run(args, root, work, kernels, say)
    finally:
        if cleanup is not None:
            cleanup.cleanup()


def _run(args: argparse.Namespace, root: Path, work: Path, kernels: List[Kernel], say) -> int:
    h = Harness(root, work, args, say)
    clang = find_clang()
    variants, notes = ([], []) if args.skip_timing else make_variants(args.threads, h.gcc, clang, work)
    if args.variants:
        variants, note = pick_variants(variants, args.variants)
        notes += note
    alias = h.alias_note(kernels[0])
    print(f"PolyBench: {root} ({len(kernels)} kernels); OMP_NUM_THREADS={args.threads}"
          + (f"; timing rounds beside {args.busy} busy process(es)" if args.busy else ""))
    print(alias)
    for note in notes:
        print(note)

    say("correctness: SMALL and MEDIUM dumps")
    t0 = time.perf_counter()
    checks = h.correctness(kernels)
    table, reasons = correctness_table(checks)
    print("\nCorrectness (dumps of the optimised file vs the original's; gcc " + " ".join(CHECK_FLAGS)
          + f"; reassoc: 'close (differing/all numbers)' within rtol {args.rtol:g} + 1 unit of the last "
          "printed digit):")
    print(table)
    for line in reasons:
        print(f"  {line}")
    n = len(kernels)
    def count(ok: Callable[[Dict[str, Any]], bool]) -> int:  # kernels for which ok() holds at both datasets
        return sum(all(ok(checks[k.name][ds]) for ds in CHECK_DATASETS) for k in kernels)
    optimised = count(lambda r: all(r[o]["optimise"]["ok"] for o in OPT_SOURCES))
    bitwise = count(lambda r: r["polytile"]["verdict"] == "bitwise")
    reassoc_ok = count(lambda r: r["reassoc"]["verdict"] in ("bitwise", "close"))
    print(f"{optimised}/{n} kernels optimise (both variants, SMALL and MEDIUM); {bitwise}/{n} bitwise identical "
          f"on SMALL and MEDIUM; {reassoc_ok}/{n} --reassociate bitwise or close "
          f"({time.perf_counter() - t0:.0f} s)")

    timing = None
    if not args.skip_timing:
        say(f"timing: {args.rounds} interleaved rounds of {', '.join(v.name for v in variants)}")
        timing = h.timing(kernels, variants)
        table, reasons = timing_table(timing, [v.name for v in variants])
        short = sorted(k for k, rec in timing["kernels"].items() if rec["runs_per_round"] > 1)
        print(f"\nTiming (PolyBench's kernel time, seconds: median/min of {args.rounds} rounds; "
              "ratio = gcc-O3 median / variant median, > 1 faster; geomean over the kernels where both ran):")
        print(table)
        for line in reasons:
            print(f"  {line}")
        if short:
            print(f"  under {SHORT_S * 1e3:g} ms at the probe, so {args.short_runs} runs per round (the round's time "
                  f"their median), every variant alike: {', '.join(short)}")
        same = [k for k, rec in timing["kernels"].items() if rec["reassoc_same_code"]]
        if same:
            print(f"  reassoc is the same code as polytile for: {', '.join(same)} (their difference is noise)")
        for v in variants:
            print(f"  {v.name}: {v.command_text()}")

    gcc_v, clang_v = compiler_version(h.gcc), compiler_version(clang)
    data = {
        "provenance": _common.provenance(
            benchmark="polybench",
            cpu_model=cpu_model(), cores=os.cpu_count(), omp_num_threads=args.threads,
            compilers={"gcc": {"path": h.gcc, "version": gcc_v},
                       "clang": {"path": clang, "version": clang_v} if clang else None},
            polybench={"path": str(root), **polybench_commit(root)},
            flags={"optimise": ["polytile", "opt", "KERNEL.c", "-o", "OUT.c", "-I", str(root / "utilities"),
                                "-D", "<DATASET>_DATASET", "--assume-no-alias", "[--reassociate]"],
                   "check": list(CHECK_FLAGS) + ["-DPOLYBENCH_DUMP_ARRAYS", "-D<DATASET>_DATASET", "-lm"],
                   "timing_defines": ["-DPOLYBENCH_TIME", "-D<DATASET>_DATASET"],
                   "variants": {v.name: {"cc": v.cc, "flags": list(v.flags), "libs": list(v.libs),
                                         "source": v.source} for v in variants}},
            alias_note=alias, notes=notes, rtol=args.rtol, rounds=args.rounds, busy_processes=args.busy,
            load_average_end=_loadavg()),
        "kernels": [{"name": k.name, "category": k.category} for k in kernels],
        "correctness": checks,
        "timing": timing,
    }
    path = _common.write_json(args.out, data)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
