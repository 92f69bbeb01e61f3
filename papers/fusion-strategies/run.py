"""Fusion strategies (Verdoolaege & Janssens, "Scheduling for PPCG", 2017; Pluto's nofuse/smartfuse/maxfuse).

isl's scheduler with no, smart and maximal fusion on producer-consumer programs: C kernels of
tests/c_kernels (2mm, 3mm, gemver, mvt, covariance) through `polytile opt --fusion`, and Tile programs
(matmul+bias+relu, conv+relu+pool) through `polytile compare`'s isl-none/smart/max candidates beside
polytile's default schedule.  Each schedule is also read for what fusion cost: whether its deepest
statements kept a parallel loop and a vectorisable (unit-stride, simd-marked) innermost loop.

    python papers/fusion-strategies/run.py            # about 3 minutes on 2 cores
    python papers/fusion-strategies/run.py --quick --out /tmp/fusion
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import paperlib as C  # noqa: E402

import polytile  # noqa: E402
from polytile import c_runner  # noqa: E402
from polytile import compare as cmp  # noqa: E402

TITLE = "Fusion strategies none/smart/max (Verdoolaege & Janssens 2017; Pluto)"

HERE = Path(__file__).resolve().parent
C_KERNELS = {  # file: (full sizes, quick sizes, scalars)
    "2mm": ({"NI": 400, "NJ": 450, "NK": 500, "NL": 550}, None, {}),
    "3mm": ({"NI": 300, "NJ": 350, "NK": 400, "NL": 450, "NM": 500}, None, {}),
    "gemver": ({"n": 2000}, {"n": 60}, {"alpha": 1.5, "beta": 1.2}),
    "mvt": ({"n": 2000}, {"n": 60}, {}),
    "covariance": ({"m": 500, "n": 600}, {"m": 30, "n": 40}, {"float_n": 600.0}),
}
TILE = {  # name: (file, full dims, quick dims)
    "matmul+bias+relu": (C.ROOT / "examples" / "matmul_bias_relu.tile", "M=512,K=512,N=512", "M=32,K=24,N=40"),
    "conv+relu+pool": (HERE / "conv_relu_pool.tile", "N=1,H=58,W=58,CI=64,KH=3,KW=3,CO=64",
                       "N=1,H=18,W=18,CI=8,KH=3,KW=3,CO=16"),
}
QUICK_C = ("2mm", "mvt")


def _schedule_facts(s) -> dict:
    """Of the statements with the most loops: how many, how many have no parallel loop, and how many an
    innermost loop that cannot vectorise (strided, or carrying the statement's value: a reduction)."""
    from polytile.c_optimiser.strategy import _deepest, serial_penalty, stride_penalty

    return {"deepest": len(_deepest(s)), "without_parallel": serial_penalty(s), "without_vector": stride_penalty(s)}


def c_kernel(name, sizes, scalars, repeat, say, scratch: Path):
    path = C.ROOT / "tests" / "c_kernels" / f"{name}.c"
    macros = {k: v for k, v in sizes.items() if k.isupper()} if sizes else {}
    if macros:
        # Sizes given as macros are written into a copy of the file before it is optimised, so the
        # optimiser's size-dependent choices (which loops are worth a parallel region) see them.
        copy = scratch / path.name
        copy.write_bytes(c_runner.set_macros(path.read_bytes(), macros))
        path, sizes = copy, {k: v for k, v in sizes.items() if k not in macros}
    alias = name in ("2mm", "3mm")  # their arrays are plain parameters: say they do not overlap
    call = c_runner.prepare(path, sizes=sizes or None, scalars=scalars, assume_no_alias=alias)
    variants = c_runner.variants(["none", "max"])  # original, opt (smart), fusion-none, fusion-max
    res = c_runner.compare_c(call, variants, repeat=repeat, warmup=1, progress=say, assume_no_alias=alias)
    rows = {r.name: r.to_json() for r in res.rows}
    facts = {}
    for v in variants[1:]:
        _, results = c_runner.optimise(path, assume_no_alias=alias, **v.options)
        facts[v.name] = [_schedule_facts(r.schedule) for r in results if r.schedule is not None]
    return {"sizes": {**macros, **dict(call.sizes)}, "rows": rows, "facts": facts}


def tile_program(path, dims, repeat, say, executor=None):
    cands = [cmp.default(), cmp.fusion("none"), cmp.fusion("smart"), cmp.fusion("max")]
    res = cmp.compare(path, dims, candidates=cands, repeat=repeat, warmup=1, progress=say, executor=executor)
    rows = {r.name: r.to_json() for r in res.rows}
    facts = {}
    for choice in ("none", "smart", "max"):
        s = polytile.schedule(str(path), dims=dims, fusion=choice)
        facts[f"isl-{choice}"] = [_schedule_facts(s)]
    return {"dims": dims, "rows": rows, "facts": facts}


def main(argv=None) -> int:
    args = C.parse(__doc__.splitlines()[0], __file__, argv=argv)
    say = C.say()
    repeat = 2 if args.quick else 5
    out = {"c": {}, "tile": {}}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (full, quick, scalars) in C_KERNELS.items():
            if args.quick and name not in QUICK_C:
                continue
            say(name)
            out["c"][name] = c_kernel(name, quick if args.quick else full, scalars, repeat, say, Path(scratch))
    for name, (path, full, quick) in TILE.items():
        say(name)
        out["tile"][name] = tile_program(path, quick if args.quick else full, repeat, say, args.executor)
    data = {"paper": "Verdoolaege, Janssens: Scheduling for PPCG (2017); Bondhugula et al.: Pluto's fusion "
                     "heuristics (nofuse, smartfuse, maxfuse)",
            "quick": args.quick, **out, "provenance": C.provenance(repeat=repeat)}
    figures = draw(data, args.out)
    C.finish(args, data, render, figures)
    return 0


C_COLUMNS = (("fusion-none", "none"), ("opt", "smart"), ("fusion-max", "max"))
TILE_COLUMNS = (("isl-none", "none"), ("isl-smart", "smart"), ("isl-max", "max"), ("default", "polytile default"))


def _speed(rows, name, base):
    r, b = rows.get(name), rows.get(base)
    if not r or r["check"] != "ok" or not r["median_s"] or not b or not b["median_s"]:
        return None
    return b["median_s"] / r["median_s"]


def draw(data, out: Path):
    plt = C.pyplot()
    figs = []
    for part, cols, base, title in (("c", C_COLUMNS, "original", "C kernels: speedup over gcc -O3 (original)"),
                                    ("tile", TILE_COLUMNS, "isl-none", "Tile programs: speedup over isl, no fusion")):
        names = list(data[part])
        if not names:
            continue
        fig, ax = plt.subplots(figsize=(7, 3.6))
        width = 0.8 / len(cols)
        for k, (row, label) in enumerate(cols):
            vals = [_speed(data[part][n]["rows"], row, base) or 0.0 for n in names]
            bars = ax.bar([i + (k - (len(cols) - 1) / 2) * width for i in range(len(names))], vals, width, label=label)
            ax.bar_label(bars, labels=[f"{v:.1f}" for v in vals], fontsize=7)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel("speedup")
        ax.set_title(title)
        ax.legend(fontsize=8, title="fusion")
        figs.append(C.save(fig, out, f"fusion_{part}.png"))
    return figs


def _facts_text(facts) -> str:
    """``1/2 serial, 0/2 scalar``: of the deepest statements, those without a parallel loop, and those whose
    innermost loop cannot be vectorised (strided, or a reduction carried along it)."""
    if not facts:
        return "-"
    lost_p = sum(f["without_parallel"] for f in facts)
    lost_v = sum(f["without_vector"] for f in facts)
    deep = sum(f["deepest"] for f in facts)
    return f"{lost_p}/{deep} serial, {lost_v}/{deep} scalar"


def render(data) -> str:
    p = data["provenance"]
    text = (f"{'Quick smoke run' if data['quick'] else 'Run'} on {C.machine_line(p)}; medians of {p.get('repeat')} "
            f"calls.  C kernels: speedup over the original built with gcc -O3; every variant bitwise equal to it "
            f"(`check`).  Per fusion choice also: of the deepest statements, how many have no parallel loop "
            f"and how many an innermost loop that cannot be vectorised (strided, or a reduction along it: `scalar`).\n\n")
    rows = []
    for n, k in data["c"].items():
        r = k["rows"]
        ok = all(v["check"] == "ok" for v in r.values())
        rows.append([n, ", ".join(f"{a}={b}" for a, b in k["sizes"].items()), f"{r['original']['median_s'] * 1e3:.2f} ms"]
                    + [f"{C.x(_speed(r, row, 'original'))} ({_facts_text(k['facts'].get(row))})" for row, _ in C_COLUMNS]
                    + ["bitwise" if ok else "see JSON"])
    text += C.table(rows, ["kernel", "sizes", "gcc -O3", "none", "smart (opt)", "max", "check"])
    text += "\nTile programs (float32), speedup over isl's schedule without fusion, with the same two counts:\n\n"
    rows = []
    for n, k in data["tile"].items():
        r = k["rows"]
        ok = all(v["check"] == "ok" for v in r.values())
        rows.append([n, k["dims"], f"{r['isl-none']['median_s'] * 1e3:.3f} ms"]
                    + [C.x(_speed(r, row, "isl-none")) + (f" ({_facts_text(k['facts'].get(row))})" if row in k["facts"] else "")
                       for row, _ in TILE_COLUMNS]
                    + ["ok" if ok else "see JSON"])
    text += C.table(rows, ["program", "dims", "isl none", "none", "smart", "max", "polytile default", "check"])
    return text


def headline(data) -> str:
    """One line for papers/README.md: per fusion choice, the geometric mean speedup of the C kernels."""
    import math

    parts = []
    for row, label in C_COLUMNS:
        vals = [_speed(k["rows"], row, "original") for k in data["c"].values()]
        vals = [v for v in vals if v]
        if vals:
            parts.append(f"{label} {math.exp(sum(map(math.log, vals)) / len(vals)):.2f}x")
    return "C kernels, geomean over gcc -O3: " + ", ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
