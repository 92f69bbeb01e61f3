"""What this machine really sustains, measured: an FMA loop's GFLOP/s and a triad's memory bandwidth.

The descriptor's peak comes from the clock /proc/cpuinfo reports (on a VM usually the nominal one) and
its bandwidths are defaults where nothing can be detected; rooflines and "% of peak" columns want the
measured ceilings.  Both probes are small C kernels built with the kernels' own flags (the kernel
cache keeps them) and run on every OpenMP thread; None when no C compiler is found.

    >>> # probe.fma_peak_gflops() -> 464.9 ; probe.triad_bandwidth_gbs() -> 13.1   (2-core Xeon VM)
"""
from __future__ import annotations

import ctypes
from typing import Optional

from . import runtime
from .runtime import openmp
from .config import get_config
from .errors import PolytileError

# A register-only FMA loop on every thread: 24 independent accumulators hide the FMA latency.
_PEAK_C = r"""
#include <omp.h>
typedef float pt_v16 __attribute__((vector_size(64)));
double pt_peak(long iters) {
  double best = 0.0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = omp_get_wtime();
    float sink = 0.0f;
    #pragma omp parallel reduction(+:sink)
    {
      pt_v16 a[24]; pt_v16 b = {1.0f}, c = {1e-7f};
      for (int i = 0; i < 24; i++) a[i] = (pt_v16){(float)i};
      for (long n = 0; n < iters; n++) {
        #pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = a[i] * b + c;
      }
      for (int i = 0; i < 24; i++) sink += a[i][0];
    }
    double dt = omp_get_wtime() - t0;
    double flops = (double)iters * 24 * 32 * omp_get_max_threads();
    if (sink != -1.0f && flops / dt > best) best = flops / dt;
  }
  return best / 1e9;
}
"""

# STREAM's triad, a[i] = b[i] + s * c[i], on arrays far larger than any cache, split statically over
# the threads; 24 bytes move per element (write-allocate traffic not counted, as STREAM counts).
_TRIAD_C = r"""
#include <omp.h>
#include <stdlib.h>
double pt_triad(long n, int reps) {
  double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)), *c = malloc(n * sizeof(double));
  if (!a || !b || !c) { free(a); free(b); free(c); return -1.0; }
  #pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) { a[i] = 0.0; b[i] = 1.0; c[i] = 2.0; }
  double best = 0.0;
  for (int r = 0; r < reps; r++) {
    double t0 = omp_get_wtime();
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
    double dt = omp_get_wtime() - t0;
    if (24.0 * n / dt > best) best = 24.0 * n / dt;
  }
  double sink = a[n / 2];
  free(a); free(b); free(c);
  return sink == 7.0 ? best : -1.0;
}
"""


def _load(text: str, name: str, restype, argtypes):
    try:
        path = runtime.build(text, flags=get_config().cflags, name_hint=name)
    except PolytileError:  # no C compiler (or it failed): the probe is simply unavailable
        return None
    openmp.load()  # the probes are OpenMP code: the libgomp kernels use, with its spin (runtime.openmp)
    fn = getattr(ctypes.CDLL(str(path)), f"pt_{name}")
    fn.restype, fn.argtypes = restype, argtypes
    return fn


def fma_peak_gflops(iters: int = 20_000_000) -> Optional[float]:
    """fp32 GFLOP/s of a pure FMA loop on all threads (best of 3), or None without a C compiler.

        >>> # fma_peak_gflops() -> 464.9 on the 2-core AVX-512 Xeon VM (descriptor: 332.8 at 2.6 GHz)
    """
    fn = _load(_PEAK_C, "peak", ctypes.c_double, [ctypes.c_long])
    return None if fn is None else float(fn(iters))


def triad_bandwidth_gbs(megabytes: int = 768, reps: int = 5) -> Optional[float]:
    """Memory bandwidth in GB/s (1e9 bytes) of STREAM's triad on all threads (best of ``reps``), over three
    arrays of ``megabytes`` / 3 each; None without a C compiler or memory.

        >>> # triad_bandwidth_gbs() -> about 13 on the 2-core Xeon VM
    """
    fn = _load(_TRIAD_C, "triad", ctypes.c_double, [ctypes.c_long, ctypes.c_int])
    if fn is None:
        return None
    got = float(fn(megabytes * 1_000_000 // 24, reps))
    return got / 1e9 if got > 0 else None
