"""conv2d (NHWC, 3x3, valid) against the best of two numpy formulations; with --tune, the autotuner too.

    python benchmarks/bench_conv.py                    # 1x56x56x64 -> 64 and 1x28x28x128 -> 128
    python benchmarks/bench_conv.py --tune 30s

``examples/conv2d.tile`` (NHWC input, HWIO filter, stride 1, no padding) on
float32 standard normal inputs:

* input 1x56x56x64, 64 filters of 3x3 (output 1x54x54x64);
* input 1x28x28x128, 128 filters of 3x3 (output 1x26x26x128).

The baseline is the faster (median) of

* ``im2col``: ``sliding_window_view`` of the input, reshaped to a
  (N·OH·OW) x (KH·KW·CI) matrix (one copy), times the filter reshaped to
  (KH·KW·CI) x CO with ``matmul``;
* ``einsum``: ``np.einsum("nyxcij,ijco->nyxo", windows, F, optimize=True)`` on
  the same window view (numpy picks a tensordot, i.e. BLAS);

both measured in the same run on the same inputs (the table names the
winner).  Must reach numpy / polytile >= 1.3x (issue 14).  Method: ``bench_all.py``'s
docstring.  Writes ``benchmarks/results/cpu_conv.json``.
"""
from __future__ import annotations

import sys

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import _common
import bench_all


def conv_im2col(I, F):
    n, h, w, ci = I.shape
    kh, kw, _, co = F.shape
    oh, ow = h - kh + 1, w - kw + 1
    win = sliding_window_view(I, (kh, kw), axis=(1, 2))          # n, oh, ow, ci, kh, kw (a view)
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, kh * kw * ci)  # the im2col copy
    return (cols @ F.reshape(kh * kw * ci, co)).reshape(n, oh, ow, co)


def conv_einsum(I, F):
    kh, kw = F.shape[:2]
    win = sliding_window_view(I, (kh, kw), axis=(1, 2))
    return np.einsum("nyxcij,ijco->nyxo", win, F, optimize=True)


BASELINES = {"im2col": conv_im2col, "einsum": conv_einsum}

SHAPES = ((56, 64, 64), (28, 128, 128))  # H = W, CI, CO


def workloads(args):
    out = []
    for h, ci, co in SHAPES:
        oh = h - 2
        out.append(bench_all.Workload("conv2d", f"1x{h}x{h}x{ci} * 3x3x{ci}x{co}", _common.EXAMPLES / "conv2d.tile",
                                      f"N=1,H={h},W={h},CI={ci},KH=3,KW=3,CO={co}", [(1, h, h, ci), (3, 3, ci, co)],
                                      conv_im2col, ("im2col", "einsum"), 2 * oh * oh * co * 9 * ci, target=1.3))
    return out


if __name__ == "__main__":
    sys.exit(bench_all.main(__file__, __doc__.splitlines()[0], "cpu_conv.json", workloads, BASELINES))
