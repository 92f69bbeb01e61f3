"""Batched matmul against numpy.matmul on 3-D stacks: polytile's default and, with --tune, the autotuner.

    python benchmarks/bench_batched.py                 # 32 x (128x64 @ 64x128)
    python benchmarks/bench_batched.py --tune 30s

``examples/batched_matmul.tile`` (Z[b] = X[b] @ Y[b]) with NB = 32, M = 128,
K = 64, N = 128 (``--batch``, ``--m``, ``--k``, ``--n``), float32, inputs
standard normal; the baseline is ``numpy.matmul`` on the same stacks.  Must
reach numpy / polytile >= 1.2x (issue 14).  Method: ``bench_all.py``'s docstring (a
sample of this sub-millisecond kernel is many back-to-back calls).  Writes
``benchmarks/results/cpu_batched.json``.
"""
from __future__ import annotations

import sys

import numpy as np

import _common
import bench_all

BASELINES = {"matmul": np.matmul}


def workloads(args):
    b, m, k, n = args.batch, args.m, args.k, args.n
    return [bench_all.Workload("batched matmul", f"{b}x({m}x{k} @ {k}x{n})", _common.EXAMPLES / "batched_matmul.tile",
                               f"NB={b},M={m},N={n},K={k}", [(b, m, k), (b, k, n)], np.matmul, ("matmul",),
                               2 * b * m * n * k, target=1.2)]


def extra(p):
    p.add_argument("--batch", type=int, default=32, help="NB, the number of matrices")
    p.add_argument("--m", type=int, default=128, help="rows of each X[b]")
    p.add_argument("--k", type=int, default=64, help="columns of X[b], rows of Y[b]")
    p.add_argument("--n", type=int, default=128, help="columns of each Y[b]")


if __name__ == "__main__":
    sys.exit(bench_all.main(__file__, __doc__.splitlines()[0], "cpu_batched.json", workloads, BASELINES,
                            extra_args=extra))
