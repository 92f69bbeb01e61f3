"""Roofline (Williams, Waterman & Patterson, CACM 2009): this machine's ceilings and every benchmark
kernel placed by its arithmetic intensity and attained GFLOP/s.

The ceilings are measured (`polytile.probe`: an FMA loop on all threads; STREAM's triad on arrays far
larger than the caches) and also taken from the host descriptor.  Each kernel is compiled with
polytile's default schedule; its arithmetic intensity is flops over the DRAM traffic the cost model
counts from isl footprints of that schedule (`cost.predict`), and its attained GFLOP/s is flops over
the measured median (`polytile.compare`, checked against the reference interpreter).  The model's own
predicted GFLOP/s is drawn beside each measured point.

    python papers/roofline/run.py                    # about 2 minutes on 2 cores
    python papers/roofline/run.py --quick --out /tmp/roofline
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import paperlib as C  # noqa: E402

from polytile import compare as cmp  # noqa: E402
from polytile import cost, hardware, pipeline, probe  # noqa: E402

TITLE = "Roofline (Williams, Waterman & Patterson, CACM 2009)"

EX = C.ROOT / "examples"
KERNELS = [  # (label, file, full dims, quick dims)
    ("SGEMM", "matmul.tile", "M=1024,N=1024,K=1024", "M=48,N=48,K=48"),
    ("conv2d 56x56x64", "conv2d.tile", "N=1,H=58,W=58,CI=64,KH=3,KW=3,CO=64", "N=1,H=10,W=10,CI=8,KH=3,KW=3,CO=8"),
    ("conv2d 28x28x128", "conv2d.tile", "N=1,H=30,W=30,CI=128,KH=3,KW=3,CO=128", None),
    ("matmul+bias+relu", "matmul_bias_relu.tile", "M=1024,K=1024,N=1024", None),
    ("batched matmul", "batched_matmul.tile", "NB=32,M=128,K=64,N=128", None),
    ("matvec", "matvec.tile", "M=4096,N=4096", "M=64,N=64"),
    ("softmax", "softmax.tile", "M=2048,N=2048", None),
    ("transpose", "transpose.tile", "M=4096,N=4096", None),
    ("row_sum", "row_sum.tile", "M=4096,N=4096", None),
    ("stencil2d", "stencil2d.tile", "B=4,H=1024,W=1024", None),
]


def place(label, path, dims, hw, repeat, say, executor=None) -> dict:
    say(label)
    program = pipeline.load_program(path)
    shapes = pipeline.shapes_from_dims(program, pipeline.parse_dims(dims), None)
    s = pipeline.schedule(program, shapes=dict(zip(program.input_names, shapes)), hardware=hw, min_parallel_work=None)
    pred = cost.predict(s, hw)
    dram = list(hw.memory)[-1].name
    res = cmp.compare(path, dims, candidates=[cmp.default()], repeat=repeat, warmup=1, inputs="normal", executor=executor)
    row = res.rows[0]
    flops = row.flops or pred.flops
    traffic = pred.traffic.get(dram) or None
    return {"label": label, "file": str(path.relative_to(C.ROOT)), "dims": dims, "flops": flops,
            "dram_bytes_model": traffic, "intensity": flops / traffic if traffic else None,
            "median_s": row.median, "min_s": row.min, "max_s": row.max, "check": row.check,
            "gflops": flops / row.median / 1e9 if row.median else None,
            "predicted_s": pred.time_s, "predicted_gflops": flops / pred.time_s / 1e9 if pred.time_s else None}


def main(argv=None) -> int:
    args = C.parse(__doc__.splitlines()[0], __file__, argv=argv)
    say = C.say()
    repeat = 2 if args.quick else 7
    hw = hardware.load("host")
    say("ceilings: FMA loop, triad")
    peak = probe.fma_peak_gflops(2_000_000 if args.quick else 20_000_000)
    bw = probe.triad_bandwidth_gbs(48 if args.quick else 768, 2 if args.quick else 5)
    dram = list(hw.memory)[-1]
    points = []
    for label, file, full, quick in KERNELS:
        dims = quick if args.quick else full
        if dims is None:
            continue
        points.append(place(label, EX / file, dims, hw, repeat, say, args.executor))
    data = {"paper": "Williams, Waterman, Patterson: Roofline: an insightful visual performance model for "
                     "multicore architectures, CACM 52(4), 2009",
            "quick": args.quick,
            "ceilings": {"measured_peak_gflops": peak, "measured_triad_gbs": bw,
                         "descriptor_peak_gflops": hw.peak_gflops("float32"),
                         "descriptor_dram_gbs": hw.bandwidth(dram) / 1e9, "dram_level": dram.name},
            "kernels": points, "provenance": C.provenance(repeat=repeat)}
    figures = draw(data, args.out)
    C.finish(args, data, render, figures)
    return 0


def measured_machine(data):
    """The host descriptor with the measured ceilings: the FMA loop's peak and the triad's DRAM bandwidth."""
    import dataclasses

    hw = hardware.load("host")
    c = data["ceilings"]
    if not c["measured_peak_gflops"] or not c["measured_triad_gbs"]:
        return hw
    levels = list(hw.memory)
    dram = levels[-1]
    levels[-1] = dataclasses.replace(dram, bandwidth_gbs=c["measured_triad_gbs"] / (hw.cores if dram.per_core else 1))
    return dataclasses.replace(hw, memory=tuple(levels), peak_gflops_fp32=c["measured_peak_gflops"])


def draw(data, out: Path):
    """polytile.plots.roofline of the machine as measured, every kernel at its intensity (filled:
    measured, hollow: the model's prediction)."""
    from polytile import plots

    points = [plots.KernelPoint(k["label"], k["flops"], k["dram_bytes_model"], k["predicted_s"], k["median_s"])
              for k in data["kernels"] if k["dram_bytes_model"]]
    fig = plots.roofline(measured_machine(data), points,
                         title="Roofline of this machine (measured ceilings), polytile's default schedules")
    return [C.save(fig, out, "roofline.png")]


def render(data) -> str:
    c, p = data["ceilings"], data["provenance"]
    def num(v, f):
        return "-" if v is None else format(v, f)
    head = (f"{'Quick smoke run' if data['quick'] else 'Run'} on {C.machine_line(p)}.  Ceilings: measured "
            f"{num(c['measured_peak_gflops'], '.0f')} GFLOP/s (FMA loop) and {num(c['measured_triad_gbs'], '.1f')} GB/s "
            f"(triad); the descriptor says {num(c['descriptor_peak_gflops'], '.0f')} GFLOP/s and "
            f"{num(c['descriptor_dram_gbs'], '.1f')} GB/s.  Medians of {p.get('repeat')} calls, float32.\n\n")
    rows = []
    for k in data["kernels"]:
        roof = None
        if k["intensity"] and c["measured_peak_gflops"] and c["measured_triad_gbs"]:
            roof = min(c["measured_peak_gflops"], c["measured_triad_gbs"] * k["intensity"])
        rows.append([k["label"], k["dims"], num(k["intensity"], ".2f"), num(k["gflops"], ".1f"), num(roof, ".0f"),
                     f"{100 * k['gflops'] / roof:.0f}%" if roof and k["gflops"] else "-",
                     num(k["predicted_gflops"], ".1f"), k["check"]])
    return head + C.table(rows, ["kernel", "dims", "flop/byte", "GFLOP/s", "roof", "of roof", "model GFLOP/s", "check"])


def headline(data) -> str:
    """One line for papers/README.md: the ceilings, and the share of their roof the kernels reach."""
    c = data["ceilings"]
    peak, bw = c["measured_peak_gflops"], c["measured_triad_gbs"]
    if not peak or not bw:
        return "ceilings not measured"
    compute, memory = [], []
    for k in data["kernels"]:
        if k["intensity"] and k["gflops"]:
            roof = min(peak, bw * k["intensity"])
            (compute if bw * k["intensity"] >= peak else memory).append(100 * k["gflops"] / roof)
    def span(v):
        return f"{min(v):.0f}-{max(v):.0f}%" if v else "-"
    return (f"{peak:.0f} GFLOP/s and {bw:.1f} GB/s measured; compute-bound kernels at {span(compute)} of the "
            f"peak, bandwidth-bound ones at {span(memory)} of the DRAM roof")

if __name__ == "__main__":
    sys.exit(main())
