"""Loop fusion and array contraction: producer-consumer chains unfused vs fused.

    python benchmarks/bench_fusion.py                      # matmul+bias+relu 512^3, conv+relu+pool 64x64x32
    python benchmarks/bench_fusion.py --size 1024 --repeat 10
    python benchmarks/bench_fusion.py --only conv --conv-size 130 --channels 64

Two programs, each an operator followed by cheap elementwise/pooling consumers
whose intermediates fusion can keep out of memory:

* matmul+bias+relu (``examples/matmul_bias_relu.tile``): ``C = A @ W``,
  ``Y = relu(C + B)``.
* conv+relu+pool (the Tile program below): a 3x3 "valid" NHWC convolution,
  relu, then 2x2 stride-2 max pooling.

Schedules compared (each legality-checked, checked against the reference
interpreter, then timed on the same inputs):

* ``isl-none``  isl's scheduler with ``fusion=none`` (every statement its own
  nest) + auto_parallel: the **unfused baseline**;
* ``isl-smart`` / ``isl-max``  isl's scheduler fusing (smart: only whole
  components; max: as much as it can) + auto_parallel;
* ``fuse-explicit`` (conv only)  program order with the accumulator's
  initialisation and the relu fused into the convolution's output loops
  (polytile.scheduling.fuse), so ``C`` lives in a scalar.

isl's ``smart`` fusion is left out for conv+relu+pool by default: isl's
scheduler takes minutes on it even at small sizes (``--conv-smart`` adds it).

For each fused schedule the table gives the runtime ratio to the unfused one
(unfused median / fused median: > 1 means fusion won) and the intermediate
bytes it avoids: the arrays contracted to scalars
(``polytile.scheduling.contracted_bytes``) and the memory traffic that saves,
at least one write and one read of each (``traffic_saved``).

Writes ``benchmarks/results/fusion.json``.
"""
from __future__ import annotations

import sys

import _common
from polytile.compare import format_table

#: conv (3x3 valid, NHWC/HWIO) -> relu -> 2x2 stride-2 max pool.
CONV_RELU_POOL = """\
function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (P) {
  C[n, y, x, co : N, H - KH + 1, W - KW + 1, CO] = +(I[n, y + ky, x + kx, ci] * F[ky, kx, ci, co]);
  R = relu(C);
  P[n, y, x, c : N, (H - KH + 1) / 2, (W - KW + 1) / 2, CO] = >(R[n, 2*y + i, 2*x + j, c]), i < 2, j < 2;
}
"""


def explicit_conv_fusion(dims: str):
    """Program order with Z0 (C = 0) and E1 (R = relu(C)) fused into the conv's output loops, then auto_parallel.

    The depth is the number of output loops the initialisation has (a loop of
    extent 1, e.g. N=1, is not a loop), so the steps are built per size.
    """
    from polytile import pipeline
    from polytile.scheduling import auto_parallel

    s = pipeline.schedule(CONV_RELU_POOL, dims=dims, parallel=False)
    depth = len(s.loop_names("Z0"))
    s = s.fuse("C", "Z0", depth, before=True).fuse("C", "R", depth)
    return auto_parallel(s)


def fusion_rows(result, baseline: str):
    """Per fused candidate: (name, unfused ms, fused ms, ratio, contracted arrays, traffic saved)."""
    base = result.row(baseline)
    out = []
    for r in result.rows:
        if r.name == baseline:
            continue
        ratio = base.median / r.median if (r.median and base.median) else None
        arrays = ", ".join(f"{a} {b} B" for a, b in sorted(r.contracted_bytes.items())) or "none"
        out.append({"candidate": r.name, "unfused_median_s": base.median, "fused_median_s": r.median,
                    "ratio_unfused_over_fused": ratio, "check": r.check, "contracted_bytes": r.contracted_bytes,
                    "traffic_saved_bytes": r.traffic_saved, "arrays": arrays})
    return out


def run_one(title: str, program, dims: str, cands, args):
    from polytile.compare import compare

    print(f"== {title}  ({dims}, float32)", flush=True)
    result = compare(program, dims, "float32", cands, repeat=args.repeat, warmup=args.warmup, seed=args.seed,
                     progress=_common.progress(args.quiet), extra_provenance={"benchmark": f"fusion: {title}", **_common.run_info()})
    print(result.table())
    print()
    rows = fusion_rows(result, "isl-none")
    table = [["fused schedule", "unfused ms", "fused ms", "unfused/fused", "contracted", "traffic saved"]]
    for f in rows:
        table.append([f["candidate"], _common.ms(f["unfused_median_s"]), _common.ms(f["fused_median_s"]),
                      "-" if f["ratio_unfused_over_fused"] is None else f"{f['ratio_unfused_over_fused']:.2f}x",
                      f["arrays"], f"{f['traffic_saved_bytes']} B"])
    print(format_table(table))
    print()
    print("schedules:")
    print("\n".join(_common.summary_lines(result)))
    print(flush=True)
    return {"title": title, "dims": dims, "result": result.to_json(), "fusion": rows}, result.ok


def main(argv=None) -> int:
    p = _common.parser(__doc__.splitlines()[0], "fusion.json")
    p.add_argument("--size", type=int, default=512, help="M = K = N of matmul+bias+relu")
    p.add_argument("--conv-size", type=int, default=66, help="H = W of the conv input (output is size - 2)")
    p.add_argument("--channels", type=int, default=32, help="CI = CO of the convolution")
    p.add_argument("--only", choices=("matmul", "conv"), help="run one of the two programs")
    p.add_argument("--conv-smart", action="store_true", help="also try isl's smart fusion on conv (slow to schedule)")
    args = p.parse_args(argv)

    from polytile.compare import Candidate, fusion

    sections = []
    ok = True
    if args.only in (None, "matmul"):
        n = args.size
        dims = f"M={n},K={n},N={n}"
        sec, good = run_one("matmul+bias+relu", _common.EXAMPLES / "matmul_bias_relu.tile", dims,
                            [fusion("none"), fusion("smart"), fusion("max")], args)
        sections.append(sec)
        ok &= good
    if args.only in (None, "conv"):
        h, c = args.conv_size, args.channels
        dims = f"N=1,H={h},W={h},CI={c},KH=3,KW=3,CO={c}"
        cands = [fusion("none"), Candidate("fuse-explicit", explicit_conv_fusion(dims),
                                           "program order, Z0 and relu fused into the conv output loops"),
                 fusion("max")]
        if args.conv_smart:
            cands.append(fusion("smart"))
        sec, good = run_one("conv+relu+pool", CONV_RELU_POOL, dims, cands, args)
        sections.append(sec)
        ok &= good

    data = {"provenance": _common.provenance(benchmark="fusion"), "programs": sections}
    out = _common.write_json(args.out, data)
    print(f"wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
