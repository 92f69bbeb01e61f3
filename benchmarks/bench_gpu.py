"""CUDA backend: SGEMM and conv2d on the GPU, against cuBLAS (via cupy) when installed.

    python benchmarks/bench_gpu.py                       # SGEMM 4096^3, conv2d 8x66x66x64 * 3x3x64x128
    python benchmarks/bench_gpu.py --sizes 2048 4096 --hardware nvidia-h200
    python benchmarks/bench_gpu.py --no-shared          # only the model's choice and the plain mapping

Prints the GPU mapping the cost model chooses for each workload (grid,
block, sequential loops, shared-memory tiles, occupancy and predicted time;
no GPU needed for that).  Variants timed: ``model`` (the cost model's
block sizes, steps and promotion), ``plain`` (256-thread blocks, no shared
memory) and ``shared`` (256-thread blocks, the default promotion).  Without a CUDA device it then says so and exits 0.
With one, each kernel is built by nvcc for the descriptor's arch and timed
through its ``<entry>_device`` launcher on device buffers (cupy) -- median of
``--repeat`` calls after a warm-up, each call synchronised -- and compared
with cupy (cuBLAS for SGEMM; an im2col + cuBLAS product for conv2d).
Without cupy the host-pointer entry is timed (transfers included) and only
absolute TFLOP/s against the descriptor's fp32 peak are reported.  Results
go to ``benchmarks/results/gpu.json``.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import _common

from polytile import hardware
from polytile.compare import random_inputs, spread, time_calls
from polytile.targets.cuda import compile_cuda, cuda_source, no_device_reason


def workloads(args):
    out = []
    for n in args.sizes:
        out.append(("SGEMM", f"{n}^3", _common.EXAMPLES / "matmul.tile", [(n, n), (n, n)], 2 * n ** 3))
    for N, H, W, CI, KH, KW, CO in ((1, 56, 56, 64, 3, 3, 64), (8, 66, 66, 64, 3, 3, 128)):
        flops = 2 * N * (H - KH + 1) * (W - KW + 1) * CO * KH * KW * CI
        out.append(("conv2d", f"{N}x{H}x{W}x{CI} * {KH}x{KW}x{CI}x{CO}", _common.EXAMPLES / "conv2d.tile",
                    [(N, H, W, CI), (KH, KW, CI, CO)], flops))
    return out


def _cupy_baseline(cp, name, arrays):
    if name == "SGEMM":
        A, B = arrays
        return lambda: (cp.matmul(A, B), cp.cuda.Device().synchronize())
    I, F = arrays
    n, h, w, ci = I.shape
    kh, kw, _, co = F.shape
    oh, ow = h - kh + 1, w - kw + 1
    s = I.strides
    win = cp.lib.stride_tricks.as_strided(I, (n, oh, ow, kh, kw, ci), (s[0], s[1], s[2], s[1], s[2], s[3]))

    def run():
        cp.matmul(win.reshape(n * oh * ow, kh * kw * ci), F.reshape(kh * kw * ci, co))
        cp.cuda.Device().synchronize()

    return run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096], help="M = N = K of each SGEMM")
    p.add_argument("--hardware", default="nvidia-h100", help="GPU descriptor (preset name or file)")
    p.add_argument("--repeat", type=int, default=_common.MIN_REPEAT)
    p.add_argument("--no-shared", action="store_true", help="skip the shared-memory variant")
    args = p.parse_args(argv)
    desc = hardware.load(args.hardware)
    peak = float(desc.peak_tflops.get("fp32", 0.0))
    wl = workloads(args)
    # variant -> compile_cuda keywords: the model's choice, or forced 256-thread blocks without/with promotion
    variants = {"model": {}, "plain": dict(threads=256, shared=False), "shared": dict(threads=256, shared=True)}
    if args.no_shared:
        del variants["shared"]
    for name, size, path, shapes, _ in wl:
        k = compile_cuda(path, shapes, ["float32"] * len(shapes), hardware=desc, emulate=True)
        print(f"== {name} {size}: the cost model's mapping for {desc.name}")
        print("   " + k.describe().replace("\n", "\n   "))
    reason = no_device_reason()
    if reason is not None:
        print(f"\n{reason}: nothing measured (the mappings above are what would run).")
        return 0
    try:
        import cupy as cp  # noqa: F401
    except ImportError:
        cp = None
    rows = []
    for (kind, size, path, shapes, flops), variant in [(w, v) for w in wl for v in variants]:
        host = random_inputs(shapes, ["float32"] * len(shapes), "normal", seed=0)
        k = compile_cuda(path, shapes, ["float32"] * len(shapes), hardware=desc, **variants[variant])
        name = f"{kind} ({variant})"
        row = {"workload": name, "size": size, "flops": flops, "variant": variant,
               "mapping": [m.describe() for m in k.mappings]}
        if cp is not None:
            dev_in = [cp.asarray(a) for a in host]
            bufs = {p.name: a for p, a in zip([q for q in k.source.params if q.kind == "input"], dev_in)}
            for q in k.source.params:
                if q.name not in bufs:
                    bufs[q.name] = cp.empty(q.shape, dtype=q.dtype)
            fn = ctypes.CDLL(str(k.library_path))[f"{k.source.entry}_device"]
            fn.argtypes = [ctypes.c_void_p] * len(k.source.params)
            fn.restype = ctypes.c_int
            ptrs = [bufs[q.name].data.ptr for q in k.source.params]

            def run():
                rc = fn(*ptrs)
                if rc:
                    raise RuntimeError(f"CUDA error {rc}")

            t = spread(time_calls(run, args.repeat, 1)).median
            tb = spread(time_calls(_cupy_baseline(cp, kind, dev_in), args.repeat, 1)).median
            row.update(seconds=t, baseline_seconds=tb, baseline="cupy (cuBLAS)", ratio=tb / t)
        else:
            t = spread(time_calls(lambda: k(*host), args.repeat, 1)).median
            row.update(seconds=t, note="host entry: transfers included (no cupy)")
        row["tflops"] = flops / t / 1e12
        row["fraction_of_peak"] = row["tflops"] / peak if peak else None
        rows.append(row)
        extra = f", {row['ratio']:.2f}x of cuBLAS" if "ratio" in row else ""
        print(f"{name:17} {size:28} {t * 1e3:9.2f} ms  {row['tflops']:7.2f} TFLOP/s "
              f"({100 * (row['fraction_of_peak'] or 0):.1f}% of fp32 peak{extra})")
    out = _common.RESULTS / "gpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"hardware": desc.name, "results": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
