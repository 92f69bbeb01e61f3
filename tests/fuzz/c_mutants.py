#!/usr/bin/env python3
"""Mutants of the tests/c_kernels kernels fed to ``polytile opt``: refuse with a located error, or be bitwise right.

Issue 12's proof, part 2.  Each kernel of ``tests/c_kernels`` is mutated by text operators on its
``#pragma scop`` regions (loop bounds, lower bounds, strides, reversal, swapped and offset subscripts,
floor-division / modulo / constant subscripts that add dependences, duplicated / swapped / rewritten
statements, extra reads of the written array, calls to unknown, ``const`` and side-effecting functions,
dropped ``restrict``, ``volatile``, function-like and object-like macros, non-affine subscripts and bounds,
data-dependent guards, ``break``, pointer arithmetic, ``while`` loops, ``float`` instead of ``double``, ...).
Every mutant then goes through:

1. ``polytile.c_optimiser.optimize_regions`` (what ``polytile opt`` runs) in a worker process.  A
   :class:`PolytileError` is a *refusal*; its message must name ``FILE:LINE:COL`` (else: *unlocated*, a
   finding).  Any other exception is a *crash* (the CLI's exit 70).
2. The mutant as written, built with ``-fsanitize=address,undefined -fno-sanitize-recover=all -O1`` and
   run on the inputs ``opt --verify`` uses: a sanitizer report means the *mutant itself* is undefined
   (an out-of-bounds subscript...), so it is *invalid* and not compared.  Mutants gcc rejects, or whose
   arrays :mod:`polytile.c_runner` cannot set up, are *invalid* too.
3. The optimised file built the same way: a sanitizer report here (and not in step 2) is a finding.
4. :func:`polytile.c_runner.verify` (``opt --verify``): both built with ``-O3 -march=native -fopenmp
   -ffp-contract=off``, run on the same random inputs, every array compared byte for byte.  A difference
   is a *mismatch* (a wrong result: a finding); a crash of the run is *died*.

Every tenth mutant (``--cli-every``) also goes through the real command line, ``python -m polytile opt
M.c -o OUT.c``, whose exit status must agree with step 1 (0 or 1, never 70, and the error line located).

    python tests/fuzz/c_mutants.py                      # >= 500 mutants (~15 min on 2 cores)
    python tests/fuzz/c_mutants.py --count 60 --json /tmp/m.json
    python tests/fuzz/c_mutants.py --keep /tmp/mutants  # keep the mutant files (to reproduce a finding)
"""
from __future__ import annotations

import argparse
import faulthandler
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KERNELS = ROOT / "tests" / "c_kernels"
sys.path.insert(0, str(HERE))

import sanitize  # noqa: E402  (same directory: sanitizer runtime detection and worker environment)

SAN_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-O1", "-g",
             "-fopenmp", "-ffp-contract=off")
LOCATED = re.compile(r"\.c:\d+:\d+")
#: Kernels whose extraction needs --assume-no-alias (2mm passes plain arrays).
NO_ALIAS = {"2mm.c"}

# ---------------------------------------------------------------------------
# mutation operators
# ---------------------------------------------------------------------------

FOR_RE = re.compile(r"for \((int )?(\w+) = ([^;]+); (\w+) (<=|<|>=|>) ([^;]+); ([^)]+)\)")
ACCESS_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)((?:\[[^\[\]]+\])+)")
STMT_RE = re.compile(r"^(\s*)([A-Za-z_]\w*(?:\[[^\[\]]+\])*) (=|\+=|-=|\*=|/=) (.+);\s*$")
SUBS_RE = re.compile(r"\[([^\[\]]+)\]")


def regions(text: str) -> List[Tuple[int, int]]:
    """(first, last) line numbers (0-based, exclusive of the pragmas) of each scop region."""
    lines = text.split("\n")
    out, start = [], None
    for n, line in enumerate(lines):
        if line.strip().startswith("#pragma scop"):
            start = n + 1
        elif line.strip().startswith("#pragma endscop") and start is not None:
            out.append((start, n))
            start = None
    return out


def region_lines(text: str) -> List[int]:
    return [n for a, b in regions(text) for n in range(a, b)]


def replace_line(text: str, n: int, new: str) -> str:
    lines = text.split("\n")
    lines[n] = new
    return "\n".join(lines)


def insert_top(text: str, decl: str) -> str:
    """``decl`` after the leading comment and includes."""
    lines = text.split("\n")
    at = 0
    for k, line in enumerate(lines):
        if line.startswith("#include") or line.startswith("/*") or line.startswith(" *") or line.startswith("#define"):
            at = k + 1
        elif line.strip():
            break
    lines.insert(at, decl)
    return "\n".join(lines)


def for_sites(text):
    for n in region_lines(text):
        line = text.split("\n")[n]
        for m in FOR_RE.finditer(line):
            yield n, line, m


def access_sites(text, min_subs=1):
    for n in region_lines(text):
        line = text.split("\n")[n]
        if "for (" in line:
            continue
        for m in ACCESS_RE.finditer(line):
            subs = SUBS_RE.findall(m.group(2))
            if len(subs) >= min_subs:
                yield n, line, m, subs


def stmt_sites(text):
    for n in region_lines(text):
        line = text.split("\n")[n]
        m = STMT_RE.match(line)
        if m and "for (" not in line and not line.strip().startswith(("double ", "int ", "float ")):
            yield n, line, m


def _sub_access(m, subs, k, new):
    subs = list(subs)
    subs[k] = new
    return m.group(1) + "".join(f"[{s}]" for s in subs)


Mutant = Tuple[str, str]  # (operator name, text)


def op_bounds(text) -> Iterator[Mutant]:
    for n, line, m in for_sites(text):
        init, var, cmp, hi, inc = m.group(3), m.group(4), m.group(5), m.group(6), m.group(7)
        head = f"for ({m.group(1) or ''}{m.group(2)} = "
        def sub(new):
            return replace_line(text, n, line[:m.start()] + new + line[m.end():])
        if cmp in ("<", "<="):
            yield "bound_hi_shrink", sub(f"{head}{init}; {var} {cmp} {hi} - 1; {inc})")
            yield "bound_hi_grow", sub(f"{head}{init}; {var} {'<=' if cmp == '<' else '<'} {hi}{'' if cmp == '<' else ' + 1'}; {inc})")
            yield "bound_lo_plus", sub(f"{head}{init} + 1; {var} {cmp} {hi}; {inc})")
            yield "bound_lo_minus", sub(f"{head}{init} - 1; {var} {cmp} {hi}; {inc})")
            yield "bound_zero_trip", sub(f"{head}{init}; {var} {cmp} {init}{' - 1' if cmp == '<=' else ''}; {inc})")
            yield "bound_ternary", sub(f"{head}{init}; {var} {cmp} ({hi} < 20 ? {hi} : 20); {inc})")
            yield "bound_const", sub(f"{head}{init}; {var} {cmp} 5; {inc})")
            if inc.strip() in (f"{var}++", f"++{var}"):
                yield "stride2", sub(f"{head}{init}; {var} {cmp} {hi}; {var} += 2)")
                yield "stride3", sub(f"{head}{init}; {var} {cmp} {hi}; {var} += 3)")
                last = f"{hi} - 1" if cmp == "<" else hi
                yield "reverse", sub(f"{head}{last}; {var} >= {init}; {var}--)")
                # the same iterations as a while loop (refusal expected; if accepted, it must stay right)
                yield "while_loop", sub(f"{m.group(1) or ''}{var} = ({init}) - 1; while (++{var} {cmp} {hi})")
                yield "nonaffine_bound", sub(f"{head}{init}; {var} {cmp} ({hi}) * ({hi}) / 7; {inc})")
                yield "macro_bound", insert_top(sub(f"{head}{init}; {var} {cmp} UB({hi}); {inc})"),
                                                "#define UB(x) ((x) - 1)")
                yield "macro_step", insert_top(sub(f"{head}{init}; {var} {cmp} {hi}; {var} += STEP)"), "#define STEP 2")
                yield "macro_const_bound", insert_top(sub(f"{head}{init}; {var} {cmp} LIM; {inc})"), "#define LIM 9")
        else:  # decreasing loops (trisolv, features)
            yield "bound_lo_shrink", sub(f"{head}{init}; {var} {cmp} {hi} + 1; {inc})")
            yield "bound_start_minus", sub(f"{head}{init} - 1; {var} {cmp} {hi}; {inc})")
            yield "bound_lo_grow", sub(f"{head}{init}; {var} {cmp} {hi} - 1; {inc})")


def op_subscripts(text) -> Iterator[Mutant]:
    for n, line, m, subs in access_sites(text):
        def sub(new):
            return replace_line(text, n, line[:m.start()] + new + line[m.end():])
        if len(subs) >= 2:
            s = list(subs)
            s[0], s[1] = s[1], s[0]
            yield "swap_idx", sub(m.group(1) + "".join(f"[{x}]" for x in s))
        for k, e in enumerate(subs):
            yield "offset_plus", sub(_sub_access(m, subs, k, f"{e} + 1"))
            yield "offset_minus", sub(_sub_access(m, subs, k, f"{e} - 1"))
            yield "floordiv_idx", sub(_sub_access(m, subs, k, f"({e}) / 2"))
            yield "mod_idx", sub(_sub_access(m, subs, k, f"({e}) % 3"))
            yield "const_idx", sub(_sub_access(m, subs, k, "0"))
            yield "nonaffine_idx", sub(_sub_access(m, subs, k, f"({e}) * ({e}) % 2"))
            yield "macro_idx", insert_top(sub(_sub_access(m, subs, k, f"IDX({e})")), "#define IDX(a) (a)")
            yield "data_dep_idx", sub(_sub_access(m, subs, k, f"(int) {m.group(1)}[0]" if len(subs) == 1 else "0"))
        if len(subs) == 2:
            yield "pointer_arith", sub(f"(*(&{m.group(1)}[{subs[0]}][0] + ({subs[1]})))")
        if len(subs) == 1:
            yield "pointer_arith", sub(f"(*({m.group(1)} + ({subs[0]})))")


def op_statements(text) -> Iterator[Mutant]:
    lines = text.split("\n")
    sites = list(stmt_sites(text))
    for n, line, m in sites:
        indent, lhs, op, rhs = m.groups()
        cast = "(float)" if "float" in text.split("#pragma scop")[0] else ""
        yield "dup_stmt", replace_line(text, n, f"{line}\n{line}")
        if op == "+=":
            yield "op_change", replace_line(text, n, f"{indent}{lhs} -= {rhs};")
        elif op == "=":
            yield "op_change", replace_line(text, n, f"{indent}{lhs} += {rhs};")
        yield "rhs_extra_read", replace_line(text, n, f"{indent}{lhs} {op} {rhs} + 0.5 * {lhs};")
        am = ACCESS_RE.match(lhs)
        if am:
            subs = SUBS_RE.findall(am.group(2))
            for k, e in enumerate(subs):
                shifted = _sub_access(am, subs, k, f"({e}) / 2")
                yield "add_dep_floordiv", replace_line(text, n, f"{indent}{lhs} {op} {rhs} + 0.25 * {shifted};")
                if "- 1" not in e:
                    guarded = _sub_access(am, subs, k, f"{e} - 1")
                    # a read one row/column back, only where it exists: a new loop-carried flow dependence
                    yield "add_dep_guarded", replace_line(
                        text, n, f"{indent}{lhs} {op} {rhs} + ({e} >= 1 ? 0.25 * {guarded} : 0.0);")
            yield "data_dep_guard", replace_line(text, n, f"{indent}if ({lhs} > 1.0) {lhs} {op} {rhs};")
        yield "scalar_temp", replace_line(text, n, f"{indent}{{ double t_ = {rhs}; {lhs} {op} t_; }}")
        yield "unknown_call", insert_top(replace_line(text, n, f"{indent}{lhs} {op} ext_fn({rhs});"),
                                         "double ext_fn(double);") + "\nstatic int ext_calls;\n" \
            "double ext_fn(double x) { ext_calls++; return x * 0.5; }\n"
        yield "const_call", insert_top(replace_line(text, n, f"{indent}{lhs} {op} cfn({rhs});"),
                                       "__attribute__((const)) static inline double cfn(double x) "
                                       "{ return x * 0.5 + 1.0; }")
        yield "math_call", insert_top(replace_line(text, n, f"{indent}{lhs} {op} fabs({rhs});"), "#include <math.h>")
        yield "call_stmt", insert_top(replace_line(text, n, f"{line}\n{indent}ext_log({lhs});"),
                                      "void ext_log(double);") + "\nvoid ext_log(double x) { (void) x; }\n"
        yield "macro_stmt", insert_top(replace_line(text, n, f"{indent}UPD({lhs}, {rhs});"),
                                       f"#define UPD(a, b) a {op} (b)")
        yield "comma_side_effect", replace_line(text, n, f"{indent}{lhs} {op} ({lhs} > 0 ? {rhs} : {rhs});")
        loopvars = re.findall(r"for \((?:int )?(\w+) =", "\n".join(lines[:n]))
        if loopvars:
            v = loopvars[-1]
            yield "break_stmt", replace_line(text, n, f"{line}\n{indent}if ({v} == 3) break;")
            yield "return_stmt", replace_line(text, n, f"{line}\n{indent}if ({v} == 3) return;")
            yield "iter_write", replace_line(text, n, f"{line}\n{indent}{v} = {v};")
    for (n1, l1, m1), (n2, l2, m2) in zip(sites, sites[1:]):
        if n2 == n1 + 1 and m1.group(1) == m2.group(1):
            t = replace_line(replace_line(text, n1, l2), n2, l1)
            yield "swap_stmts", t


def op_declarations(text) -> Iterator[Mutant]:
    head = text.split("#pragma scop")[0]
    if "restrict" in head:
        yield "no_restrict_all", head.replace("restrict ", "").replace("*restrict", "*") + text[len(head):]
        spots = [m.start() for m in re.finditer(r"restrict", head)]
        for s in spots:
            h = head[:s] + head[s:].replace("restrict ", "", 1) if head[s:].startswith("restrict ") else head
            yield "no_restrict_one", h + text[len(head):]
    for m in re.finditer(r"(?<=[(,] )(double|int) (\*?\s*(?:restrict )?)?(\w+)(\[|\b)", head):
        if m.group(3) in ("i", "j", "k", "n", "m", "t"):
            continue
        yield "volatile_param", head[:m.start()] + "volatile " + head[m.start():] + text[len(head):]
    for m in re.finditer(r"^(\s*)(double \w+( = [^;]+)?;)", text, flags=re.M):
        yield "volatile_local", text[:m.start()] + m.group(1) + "volatile " + m.group(2) + text[m.end():]
    if "double" in text:
        yield "float_type", text.replace("double", "float")
    if "int i, j" in text:
        yield "long_iters", text.replace("int i, j", "long i, j")
    for m in re.finditer(r"#define (N\w*|TSTEPS) (\d+)", text):
        v = int(m.group(2))
        for nv in (1, 2, v + 3):
            yield "macro_value", text[:m.start()] + f"#define {m.group(1)} {nv}" + text[m.end():]


OPERATORS: List[Callable[[str], Iterator[Mutant]]] = [op_bounds, op_subscripts, op_statements, op_declarations]


def generate(count: int, seed: int = 12) -> List[dict]:
    """``count`` distinct mutants (about evenly over kernels and operator names), deterministic in ``seed``."""
    rng = random.Random(seed)
    pools: Dict[Tuple[str, str], List[str]] = {}
    seen = set()
    for path in sorted(KERNELS.glob("*.c")):
        text = path.read_text()
        for op in OPERATORS:
            for name, mutant in op(text):
                h = hashlib.sha256(mutant.encode()).hexdigest()
                if mutant == text or h in seen:
                    continue
                seen.add(h)
                pools.setdefault((path.name, name), []).append(mutant)
    keys = sorted(pools)
    for k in keys:
        rng.shuffle(pools[k])
    out: List[dict] = []
    # round robin over (kernel, operator) so every operator on every kernel is tried before repeats
    while len(out) < count and any(pools.values()):
        rng.shuffle(keys)
        for k in keys:
            if pools[k] and len(out) < count:
                out.append({"kernel": k[0], "op": k[1], "text": pools[k].pop()})
    for i, m in enumerate(out):
        m["id"] = f"m{i:04d}_{Path(m['kernel']).stem.replace('-', '_')}_{m['op']}"
    return out


# ---------------------------------------------------------------------------
# the worker (preloaded with ASan: see sanitize.py)
# ---------------------------------------------------------------------------


def check_one(m: dict, workdir: Path) -> dict:
    from polytile import c_optimiser, c_runner
    from polytile.errors import PolytileError

    path = workdir / f"{m['id']}.c"
    path.write_text(m["text"])
    alias = m["kernel"] in NO_ALIAS
    rec: dict = {"id": m["id"]}
    # 1. polytile opt
    try:
        out, results = c_optimiser.optimize_regions(path, assume_no_alias=alias)
    except PolytileError as e:
        msg = str(e)
        first = msg.splitlines()[0] if msg else type(e).__name__
        rec.update(status="refused" if LOCATED.search(first) else "unlocated", detail=f"{type(e).__name__}: {first}")
        return rec
    except Exception as e:  # noqa: BLE001
        rec.update(status="crash", detail=f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2500:]}")
        return rec
    (workdir / f"{m['id']}.opt.c").write_bytes(out)
    rec["changed"] = out != path.read_bytes()
    # 2./3. the mutant and its optimised version under ASan + UBSan
    try:
        names = c_runner.functions(path, assume_no_alias=alias)
        calls = [c_runner.prepare(path, function=f, other_sizes=True, default_size=c_runner.VERIFY_SIZE,
                              assume_no_alias=alias) for f in names]
    except PolytileError as e:
        rec.update(status="invalid", detail=f"cannot set up a call: {str(e).splitlines()[0][:200]}")
        return rec
    for tag, text in (("orig", path.read_bytes()), ("opt", out)):
        for call in calls:
            try:
                lib = c_runner.build(call.with_macros(text), name=f"{call.function}_{tag}_san", flags=SAN_FLAGS,
                                 include_dir=path.parent)
            except PolytileError as e:
                if tag == "orig":
                    rec.update(status="invalid", detail=f"gcc rejects the mutant: {str(e).splitlines()[0][:200]}")
                else:
                    rec.update(status="build_error", detail=f"gcc rejects the optimised mutant: {e}"[:3000])
                return rec
            print(f"@@PHASE {tag}-san", flush=True)
            call.run(lib)
    # 4. opt --verify
    print("@@PHASE verify", flush=True)
    try:
        problems = c_runner.verify(path, out, assume_no_alias=alias)
    except PolytileError as e:
        rec.update(status="build_error", detail=f"verify: {str(e)[:3000]}")
        return rec
    if problems:
        rec.update(status="mismatch", detail="; ".join(problems))
    else:
        rec.update(status="identical", detail="" if rec["changed"] else "(output = input)")
    return rec


def worker(case_file: str) -> int:
    os.environ.pop("LD_PRELOAD", None)
    spec = json.loads(Path(case_file).read_text())
    workdir = Path(spec["workdir"])
    for i, m in enumerate(spec["mutants"]):
        print(f"@@BEGIN {i}", flush=True)
        t0 = time.perf_counter()
        # a C call cannot be interrupted from Python: faulthandler's watchdog thread ends the process
        faulthandler.dump_traceback_later(spec["timeout"], exit=True)
        rec = check_one(m, workdir)
        faulthandler.cancel_dump_traceback_later()
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        print(f"@@END {i} {json.dumps(rec)}", flush=True)
    return 0


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------


def run_batch(mutants: List[dict], env, workdir: Path, timeout: float) -> List[dict]:
    records = []
    todo = list(mutants)
    while todo:
        fd, spec = tempfile.mkstemp(dir=workdir, suffix=".json")
        os.close(fd)
        Path(spec).write_text(json.dumps({"workdir": str(workdir), "mutants": todo, "timeout": timeout}))
        try:
            p = subprocess.run([sys.executable, __file__, "--worker", spec], capture_output=True, text=True, env=env,
                               timeout=timeout * len(todo) + 60, cwd=ROOT)
            out, err, rc = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + "\n[timeout]"
            rc = None
        done, begun, phase = {}, -1, None
        for line in out.splitlines():
            if line.startswith("@@BEGIN "):
                begun, phase = int(line.split()[1]), "opt"
            elif line.startswith("@@PHASE "):
                phase = line.split()[1]
            elif line.startswith("@@END "):
                _, idx, payload = line.split(" ", 2)
                done[int(idx)] = json.loads(payload)
        records += [done[i] for i in sorted(done)]
        if len(done) == len(todo):
            break
        crashed = begun if begun >= 0 and begun not in done else (max(done) + 1 if done else 0)
        san = bool(sanitize.SAN_PATTERNS.search(err))
        excerpt = sanitize._sanitizer_excerpt(err)
        timed_out = rc is None or "Timeout (" in err
        if timed_out:
            status = "timeout" if phase not in ("orig-san",) else "invalid"
        elif phase == "orig-san":
            status = "invalid"  # the mutant as written is undefined (or dies): not comparable
        elif phase == "opt-san":
            status = "sanitizer_opt" if san else "died"
        else:
            status = "died"
        records.append({"id": todo[crashed]["id"], "status": status, "phase": phase,
                        "detail": (f"the mutant as written fails under ASan/UBSan or dies (exit {rc}): "
                                   if status == "invalid" else f"exit {rc} in phase {phase}: ") + excerpt[:3000]})
        todo = todo[crashed + 1:]
    return records


def cli_check(m: dict, workdir: Path, env) -> dict:
    """``python -m polytile opt`` on the mutant: exit status and first line."""
    path = workdir / f"{m['id']}.c"
    path.write_text(m["text"])
    out = workdir / f"{m['id']}.cli.c"
    args = [sys.executable, "-m", "polytile", "opt", str(path), "-o", str(out)]
    if m["kernel"] in NO_ALIAS:
        args.append("--assume-no-alias")
    p = subprocess.run(args, capture_output=True, text=True, env=env, cwd=workdir, timeout=600)
    first = next((ln for ln in p.stderr.splitlines() if ln.strip()), "")
    return {"rc": p.returncode, "first": first, "located": bool(LOCATED.search(first)),
            "same_output": out.exists() and out.read_bytes() == (workdir / f"{m['id']}.opt.c").read_bytes()
            if (workdir / f"{m['id']}.opt.c").exists() else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=560)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    ap.add_argument("--cli-every", type=int, default=10, help="every Nth mutant also through the CLI (0: none)")
    ap.add_argument("--keep", type=Path, help="keep mutants and outputs in this directory")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--jsonl", type=Path, help="append each batch's records here as they finish")
    ap.add_argument("--list", action="store_true", help="print the operator counts and exit")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)

    mutants = generate(args.count, args.seed)
    ops: Dict[str, int] = {}
    for m in mutants:
        ops[m["op"]] = ops.get(m["op"], 0) + 1
    print(f"{len(mutants)} mutants of {len({m['kernel'] for m in mutants})} kernels, {len(ops)} operators")
    if args.list:
        for k, v in sorted(ops.items()):
            print(f"  {k:22s} {v}")
        return 0
    libasan = sanitize.sanitizer_runtime()
    if libasan is None:
        print("no ASan runtime: the screening of mutants for undefined behaviour needs it", file=sys.stderr)
        return 3
    cache = tempfile.mkdtemp(prefix="polytile-mut-cache-")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        workdir = args.keep
    else:
        workdir = Path(tempfile.mkdtemp(prefix="polytile-mutants-"))
    env = sanitize.worker_env(libasan, cache)
    by_id = {m["id"]: m for m in mutants}
    batches = [mutants[i:i + args.batch] for i in range(0, len(mutants), args.batch)]
    t0 = time.perf_counter()
    records: List[dict] = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for k, recs in enumerate(pool.map(lambda b: run_batch(b, env, workdir, args.timeout), batches)):
            records += recs
            if args.jsonl:  # partial results survive an interrupted campaign
                with open(args.jsonl, "a") as fh:
                    for r in recs:
                        fh.write(json.dumps({**r, **{k2: by_id[r["id"]][k2] for k2 in ("kernel", "op")}}) + "\n")
            counts: Dict[str, int] = {}
            for r in records:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            print(f"  [{len(records)}/{len(mutants)} {time.perf_counter() - t0:.0f} s] "
                  + ", ".join(f"{s} {n}" for s, n in sorted(counts.items())), flush=True)
    by_id = {m["id"]: m for m in mutants}
    # the command line on a sample
    cli = {}
    if args.cli_every:
        plain = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
        sample = [m for i, m in enumerate(mutants) if i % args.cli_every == 0]
        with ThreadPoolExecutor(args.jobs) as pool:
            for m, res in zip(sample, pool.map(lambda m: cli_check(m, workdir, plain), sample)):
                cli[m["id"]] = res
    elapsed = time.perf_counter() - t0

    status_of = {r["id"]: r["status"] for r in records}
    cli_disagree = []
    for mid, res in cli.items():
        st = status_of.get(mid)
        want_rc = 1 if st in ("refused", "unlocated") else (70 if st == "crash" else 0)
        if res["rc"] != want_rc or (res["rc"] == 1 and not res["located"]) or res["rc"] == 70:
            cli_disagree.append((mid, st, res))
    counts: Dict[str, int] = {}
    per_op: Dict[str, Dict[str, int]] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        op = by_id[r["id"]]["op"]
        per_op.setdefault(op, {})
        per_op[op][r["status"]] = per_op[op].get(r["status"], 0) + 1
    print(f"\n{len(records)} mutants in {elapsed:.0f} s")
    for s in ("refused", "identical", "invalid", "mismatch", "crash", "unlocated", "sanitizer_opt", "died",
              "build_error", "timeout"):
        print(f"  {s:14s} {counts.get(s, 0)}")
    unchanged = sum(1 for r in records if r["status"] == "identical" and "output = input" in r.get("detail", ""))
    print(f"  (identical includes {unchanged} whose output is the input unchanged)")
    print(f"\nCLI sample: {len(cli)} mutants, exit codes {sorted({v['rc'] for v in cli.values()})}, "
          f"{len(cli_disagree)} disagreements")
    for mid, st, res in cli_disagree:
        print(f"  {mid}: worker {st}, CLI exit {res['rc']}: {res['first'][:200]}")
    print("\nper operator:")
    for op in sorted(per_op):
        print(f"  {op:22s} " + ", ".join(f"{s} {n}" for s, n in sorted(per_op[op].items())))
    findings = [r for r in records if r["status"] in ("mismatch", "crash", "unlocated", "sanitizer_opt", "died",
                                                      "build_error", "timeout")]
    print(f"\nfindings: {len(findings)}")
    for r in findings:
        print(f"--- {r['status']}: {r['id']} ({by_id[r['id']]['kernel']}, {by_id[r['id']]['op']})\n{r['detail'][:2500]}\n")
    if args.json:
        args.json.write_text(json.dumps({"count": len(records), "seconds": elapsed, "counts": counts,
                                         "per_operator": per_op, "cli": cli, "records": records,
                                         "mutants": {m["id"]: {"kernel": m["kernel"], "op": m["op"]} for m in mutants}},
                                        indent=1))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    return 1 if findings or cli_disagree else 0


if __name__ == "__main__":
    sys.exit(main())
