"""Reductions, pooling, elementwise programs and narrow products against numpy: the shapes that are not a big GEMM.

    python benchmarks/bench_ops.py                     # twenty-two workloads, ~7 minutes
    python benchmarks/bench_ops.py --only matvec softmax

Each row is an ``examples/`` program at the size below, float32 standard normal inputs, compiled with
the default schedule, against the numpy formulation a user would write (one call each):

* ``matvec`` 4096 x 4096 @ 4096: ``A @ x`` (BLAS sgemv); ``vecmat`` 4096 @ 4096 x 4096: ``x @ A``;
* ``row_sum`` 2048 x 2048: ``I.sum(axis=1)``;
* ``dot`` 2^20: ``numpy.dot``;
* ``maxpool`` 2x2 over 8 x 64 x 64 x 32 (NHWC): ``I.reshape(8, 32, 2, 32, 2, 32).max(axis=(2, 4))``;
* ``softmax`` 1024 x 1024 over rows: ``exp(X - max) / sum``; ``softmax_masked`` the same with 30% of the
  entries -1e9 (an attention mask: exp's result is exactly 0 there);
* ``elementwise_chain`` 2^20: ``where(X >= Y, exp(-|X|) + tanh(X) sigmoid(Y), sqrt|XY| - tanh(X) sigmoid(Y))``;
* ``min_plus`` 256^3 (tropical matmul): ``(A[:, :, None] + B[None]).min(axis=1)``;
* ``row_max`` 4096^2: ``I.max(axis=1)``; ``min_reduce`` 4096^2 (column minima): ``I.min(axis=0)``;
* ``transpose`` 4096^2: ``ascontiguousarray(I.T)``;
* ``matmul_abt`` 1024^3: ``A @ B.T`` (BLAS sgemm, transposed operand);
* ``global_avgpool`` 8 x 28 x 28 x 512: ``I.mean(axis=(1, 2))``;
* ``conv2d_same`` 3x3 "same" 1 x 56 x 56 x 64 -> 64: im2col of the zero-padded image and one sgemm;
* ``conv2d_nchw`` the same convolution of a channels-first image 1 x 64 x 56 x 56, written as PlaidML's op
  library writes it: the image transposed to NHWC, ``conv2d_same``'s im2col and sgemm, transposed back;
  ``conv2d_nchw_small`` the same at 1 x 256 x 14 x 14 -> 256 (fewer image columns than a vector);
* ``matmul_narrow`` 4096 x 256 @ 256 x 8 (``matmul.tile``): ``A @ B`` (fewer columns than one 16-lane vector);
* ``batched_small`` 2048 x (8 x 64 @ 64 x 8) (``batched_matmul.tile``): ``numpy.matmul`` on the stacks;
* ``logits`` 1024 x 784 @ 784 x 10 (``matmul.tile``): ``A @ B`` (10 columns: one zero-padded 16-lane block);
* ``batch8_linear`` 8 x 4096 @ 4096 x 4096 (``matmul.tile``): ``A @ B`` (a 64 MB weight read from memory once);
* ``cumsum`` 2^20: ``numpy.cumsum`` (``examples/cumsum.tile``'s triangle, ``O[i : N] = +(I[k]), i - k < N``, run as a recurrence).

These run on the paths the register tiles do not take: sums into one cell in SIMD lanes
(``codegen/c_accumulate.py``), unit-stride output loops innermost (``scheduling.vector_inner``),
innermost parallel loops outlined by chunks and libm's vector variants (``codegen/c_expr.LIBMVEC``).
"GFLOP/s" counts the arithmetic of the program (an exp as one operation).  Method: ``bench_all.py``'s
docstring (interleaved rounds, numpy in worker processes, both OpenBLAS core types).  The target is
parity with numpy (1.0x).  Writes ``benchmarks/results/cpu_ops.json``.
"""
from __future__ import annotations

import sys

import numpy as np

import _common
import bench_all


def matvec(A, x):
    return A @ x


def matmul_narrow(A, B):
    return A @ B


def batched_small(A, B):
    return np.matmul(A, B)


def logits(A, B):
    return A @ B


def batch8_linear(A, B):
    return A @ B


def cumsum(I):
    return np.cumsum(I)


def conv2d_nchw(I, F):
    return conv2d_same(I.transpose(0, 2, 3, 1), F).transpose(0, 3, 1, 2)


def conv2d_nchw_small(I, F):
    return conv2d_nchw(I, F)


def vecmat(x, A):
    return x @ A


def row_sum(I):
    return I.sum(axis=1)


def dot(x, y):
    return np.dot(x, y)


def maxpool(I):
    n, h, w, c = I.shape
    return I.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def softmax(X):
    E = np.exp(X - X.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def softmax_masked(X):
    return softmax(X)


def _masked(arrays):
    """30% of the entries set to -1e9, as an attention mask writes them (seeded)."""
    X, = arrays
    return [np.where(np.random.default_rng(1).random(X.shape) < 0.3, np.float32(-1e9), X)]


def elementwise_chain(X, Y):
    T = np.tanh(X) / (1 + np.exp(-Y))
    return np.where(X >= Y, np.exp(-np.abs(X)) + T, np.sqrt(np.abs(X * Y)) - T)


def min_plus(A, B):
    return (A[:, :, None] + B[None, :, :]).min(axis=1)


def row_max(I):
    return I.max(axis=1)


def min_reduce(I):
    return I.min(axis=0)


def transpose(I):
    return np.ascontiguousarray(I.T)


def matmul_abt(A, B):
    return A @ B.T


def global_avgpool(I):
    return I.mean(axis=(1, 2))


def conv2d_same(I, F):
    # im2col over the zero-padded image, then one BLAS call (bench_all's conv baseline, padded)
    P = np.pad(I, ((0, 0), (1, 1), (1, 1), (0, 0)))
    n, h, w, ci = I.shape
    cols = np.lib.stride_tricks.sliding_window_view(P, (3, 3), axis=(1, 2))  # n, h, w, ci, 3, 3
    cols = cols.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, 9 * ci)
    return (cols @ F.reshape(9 * ci, -1)).reshape(n, h, w, -1)


BASELINES = {f.__name__: f for f in (matvec, vecmat, row_sum, dot, maxpool, softmax, softmax_masked, elementwise_chain,
                                     min_plus, row_max, min_reduce, transpose, matmul_abt, global_avgpool, conv2d_same, matmul_narrow,
                                     batched_small, logits, batch8_linear, cumsum, conv2d_nchw, conv2d_nchw_small)}
#: Rows whose program is an example of another name.
PROGRAMS = {"matmul_narrow": "matmul", "batched_small": "batched_matmul", "logits": "matmul",
            "batch8_linear": "matmul", "softmax_masked": "softmax", "conv2d_nchw_small": "conv2d_nchw"}
#: Rows whose inputs are not plain standard normals.
INPUTS = {"softmax_masked": _masked}


def workloads(args):
    ex = _common.EXAMPLES
    rows = [
        ("matvec", "4096x4096 @ 4096", "M=4096,N=4096", [(4096, 4096), (4096,)], 2 * 4096 * 4096),
        ("vecmat", "4096 @ 4096x4096", "M=4096,N=4096", [(4096,), (4096, 4096)], 2 * 4096 * 4096),
        ("row_sum", "2048x2048", "M=2048,N=2048", [(2048, 2048)], 2048 * 2048),
        ("dot", "2^20", "L=1048576", [(1 << 20,), (1 << 20,)], 2 << 20),
        ("maxpool", "8x64x64x32, 2x2", "N=8,H=64,W=64,C=32", [(8, 64, 64, 32)], 8 * 64 * 64 * 32),
        ("softmax", "1024x1024", "M=1024,N=1024", [(1024, 1024)], 5 * 1024 * 1024),
        ("softmax_masked", "1024x1024, 30% -1e9", "M=1024,N=1024", [(1024, 1024)], 5 * 1024 * 1024),
        ("elementwise_chain", "2^20", "N=1048576", [(1 << 20,), (1 << 20,)], 16 << 20),
        ("min_plus", "256^3", "M=256,K=256,N=256", [(256, 256), (256, 256)], 2 * 256 ** 3),
        ("row_max", "4096x4096", "M=4096,N=4096", [(4096, 4096)], 4096 * 4096),
        ("min_reduce", "4096x4096 (columns)", "M=4096,N=4096", [(4096, 4096)], 4096 * 4096),
        ("transpose", "4096x4096", "M=4096,N=4096", [(4096, 4096)], 0),
        ("matmul_abt", "1024^3, A @ B.T", "M=1024,N=1024,K=1024", [(1024, 1024), (1024, 1024)], 2 * 1024 ** 3),
        ("global_avgpool", "8x28x28x512", "N=8,H=28,W=28,C=512", [(8, 28, 28, 512)], 8 * 28 * 28 * 512),
        ("conv2d_same", "1x56x56x64 -> 64, 3x3", "N=1,H=56,W=56,CI=64,CO=64", [(1, 56, 56, 64), (3, 3, 64, 64)],
         2 * 56 * 56 * 64 * 9 * 64),
        ("matmul_narrow", "4096x256 @ 256x8", "M=4096,N=8,K=256", [(4096, 256), (256, 8)], 2 * 4096 * 256 * 8),
        ("batched_small", "2048x(8x64 @ 64x8)", "NB=2048,M=8,N=8,K=64", [(2048, 8, 64), (2048, 64, 8)],
         2 * 2048 * 8 * 64 * 8),
        ("logits", "1024x784 @ 784x10", "M=1024,N=10,K=784", [(1024, 784), (784, 10)], 2 * 1024 * 784 * 10),
        ("batch8_linear", "8x4096 @ 4096x4096", "M=8,N=4096,K=4096", [(8, 4096), (4096, 4096)],
         2 * 8 * 4096 * 4096),
        ("cumsum", "2^20", "N=1048576", [(1 << 20,)], 1 << 20),
        ("conv2d_nchw", "1x64x56x56 -> 64, 3x3 (NCHW)", "N=1,CI=64,L0=56,L1=56,CO=64", [(1, 64, 56, 56), (3, 3, 64, 64)],
         2 * 56 * 56 * 64 * 9 * 64),
        ("conv2d_nchw_small", "1x256x14x14 -> 256, 3x3 (NCHW)", "N=1,CI=256,L0=14,L1=14,CO=256",
         [(1, 256, 14, 14), (3, 3, 256, 256)], 2 * 14 * 14 * 256 * 9 * 256),
    ]
    out = []
    for name, shape, dims, shapes, flops in rows:
        if args.only and name not in args.only:
            continue
        out.append(bench_all.Workload(name, shape, ex / f"{PROGRAMS.get(name, name)}.tile", dims, shapes,
                                      BASELINES[name], (name,),
                                      flops, target=1.0, inputs=INPUTS.get(name)))
    return out


def extra(p):
    p.add_argument("--only", nargs="+", choices=sorted(BASELINES), help="run only these workloads")


if __name__ == "__main__":
    sys.exit(bench_all.main(__file__, __doc__.splitlines()[0], "cpu_ops.json", workloads, BASELINES,
                            extra_args=extra))
