"""SGEMM against numpy.matmul: polytile's default (autotiled for the host) and, with --tune, the autotuner.

    python benchmarks/bench_gemm.py                    # 1024^3 and 2048^3
    python benchmarks/bench_gemm.py --tune 30s         # also tune each size (30 s of search)
    python benchmarks/bench_gemm.py --sizes 512 1024

``examples/matmul.tile`` (C = A @ B) at M = N = K = each ``--sizes`` value,
float32, inputs standard normal; the baseline is ``numpy.matmul`` on the same
arrays.  Must reach numpy / polytile >= 1.0x (issue 14).  How the numbers are
made (worker processes for the two OPENBLAS_CORETYPE settings, checks,
interleaved timing, load wait) is in ``bench_all.py``'s docstring.  Writes
``benchmarks/results/cpu_gemm.json``.
"""
from __future__ import annotations

import sys

import numpy as np

import _common
import bench_all

BASELINES = {"matmul": np.matmul}


def workloads(args):
    return [bench_all.Workload("SGEMM", f"{n}^3", _common.EXAMPLES / "matmul.tile", f"M={n},N={n},K={n}",
                               [(n, n), (n, n)], np.matmul, ("matmul",), 2 * n ** 3, target=1.0)
            for n in args.sizes]


def extra(p):
    p.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048], help="M = N = K of each SGEMM")


if __name__ == "__main__":
    sys.exit(bench_all.main(__file__, __doc__.splitlines()[0], "cpu_gemm.json", workloads, BASELINES,
                            extra_args=extra))
