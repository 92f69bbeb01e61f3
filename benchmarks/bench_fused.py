"""matmul + bias + relu against numpy: polytile's default (epilogue fused if it does) and, with --tune, the autotuner.

    python benchmarks/bench_fused.py                   # M = K = N = 1024
    python benchmarks/bench_fused.py --tune 30s --size 512

``examples/matmul_bias_relu.tile`` (Y = relu(A @ W + B)) at M = K = N =
``--size``, float32, inputs standard normal, compiled with the default.  The
baseline is numpy doing the same with one temporary and in-place epilogue::

    C = A @ W; C += b; np.maximum(C, 0, out=C)

Besides the timing table it prints the default schedule (``describe()``) and
what it keeps out of memory: the arrays contracted by fusion
(``polytile.scheduling.contracted_bytes``) and the memory traffic that saves
(``traffic_saved``: one write and one read of each).  GFLOP/s count the
matmul's 2·M·N·K only.  Must reach numpy / polytile >= 1.05x (issue 14).  Method:
``bench_all.py``'s docstring.  Writes ``benchmarks/results/cpu_fused.json``.
"""
from __future__ import annotations

import sys

import numpy as np

import _common
import bench_all


def dense_relu(A, W, b):
    C = A @ W
    C += b
    np.maximum(C, 0, out=C)
    return C


BASELINES = {"matmul+bias+relu": dense_relu}


def workloads(args):
    n = args.size
    return [bench_all.Workload("matmul+bias+relu", f"{n}^3", _common.EXAMPLES / "matmul_bias_relu.tile",
                               f"M={n},K={n},N={n}", [(n, n), (n, n), (n,)], dense_relu, ("matmul+bias+relu",),
                               2 * n ** 3, target=1.05, fusion_report=True)]


def extra(p):
    p.add_argument("--size", type=int, default=1024, help="M = K = N")


if __name__ == "__main__":
    sys.exit(bench_all.main(__file__, __doc__.splitlines()[0], "cpu_fused.json", workloads, BASELINES,
                            extra_args=extra))
