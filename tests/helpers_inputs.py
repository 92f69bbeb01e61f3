"""Inputs of a Tile program for tests: small integers, so every product and sum is exact in every dtype."""
from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import polytile

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def small_int_inputs(program, dims: str, dtype: str, seed: int = 0):
    """One array per input of ``program`` at ``dims``, integers in [-3, 3] ([0, 3] for unsigned dtypes).

    >>> [a.shape for a in small_int_inputs("examples/matmul.tile", "M=2,N=3,K=4", "int32")]
    [(2, 4), (4, 3)]
    """
    prog = polytile.load_program(program)
    shapes = polytile.shapes_from_dims(prog, polytile.parse_dims(dims))
    rng = np.random.default_rng(seed)
    lo = 0 if np.dtype(dtype).kind == "u" else -3
    return [rng.integers(lo, 4, size=s).astype(dtype) for s in shapes]


@contextmanager
def bench_module(name: str):
    """The benchmark script ``benchmarks/<name>.py`` imported as a module (with ``benchmarks/`` on the path,
    as it runs), under a test-only module name."""
    sys.path.insert(0, str(BENCH))
    key = f"{name}_under_test"
    try:
        spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod  # its dataclasses look their module up here
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.path.remove(str(BENCH))
        sys.modules.pop(key, None)
