"""SGEMM against numpy.matmul: polytile's default (autotiled for the host) and, with --tune, the autotuner.

    python benchmarks/bench_gemm.py                    # 1024^3 and 2048^3
    python benchmarks/bench_gemm.py --tune 30s         # also tune each size (30 s of search)
    python benchmarks/bench_gemm.py --sizes 512 1024
    python benchmarks/bench_gemm.py --sizes 1500 300x2000x300 100   # M x N x K, or one size for all three

``examples/matmul.tile`` (C = A @ B) at each ``--sizes`` value (``n``: M = N = K = n; ``MxNxK``),
float32, inputs standard normal; the baseline is ``numpy.matmul`` on the same
arrays.  Must reach numpy / polytile >= 1.0x (issue 14).  How the numbers are
made (worker processes for the two OPENBLAS_CORETYPE settings, checks,
interleaved timing, load wait) is in ``bench_all.py``'s docstring.  Writes
``benchmarks/results/cpu_gemm.json``.
"""
from __future__ import annotations

import argparse
import sys
from typing import Tuple

import numpy as np

import _common
import bench_all

BASELINES = {"matmul": np.matmul}


def gemm_shape(text: str) -> Tuple[int, int, int]:
    """``(M, N, K)`` of a ``--sizes`` value: ``n`` (a cube) or ``MxNxK``.

    >>> gemm_shape("1500"), gemm_shape("300x2000x300")
    ((1500, 1500, 1500), (300, 2000, 300))
    """
    parts = text.lower().split("x")
    try:
        dims = [int(x) for x in parts]
    except ValueError:
        dims = []
    if len(dims) == 1:
        dims *= 3
    if len(dims) != 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive size n (M = N = K) or MxNxK, "
                                         "e.g. 300x2000x300")
    return dims[0], dims[1], dims[2]


def workloads(args):
    out = []
    for m, n, k in args.sizes:
        shape = f"{m}^3" if m == n == k else f"{m}x{n}x{k}"
        out.append(bench_all.Workload("SGEMM", shape, _common.EXAMPLES / "matmul.tile", f"M={m},N={n},K={k}",
                                      [(m, k), (k, n)], np.matmul, ("matmul",), 2 * m * n * k, target=1.0))
    return out


def extra(p):
    p.add_argument("--sizes", type=gemm_shape, nargs="+", default=[(1024,) * 3, (2048,) * 3],
                   help="each SGEMM: n (M = N = K = n) or MxNxK (default: 1024 2048)")


if __name__ == "__main__":
    sys.exit(bench_all.main(__file__, __doc__.splitlines()[0], "cpu_gemm.json", workloads, BASELINES,
                            extra_args=extra))
