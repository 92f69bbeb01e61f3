"""Parallel loops nested in parallel loops are emitted as plain loops (codegen/c.py ``_for``).

libgomp runs a nested region on the calling thread alone, so the inner pragma only costs; the fused
epilogue autotile places inside a GEMM's parallel loop is the case that produced them.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import polytile
from polytile import autotile

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _outlined_bodies(text: str):
    """The bodies of the outlined parallel-loop functions (pt_parN)."""
    return re.findall(r"void pt_par\d+\(.*?\)\n\{\n(.*?)\n\}\n", text, re.S)


def test_fused_epilogue_inside_a_parallel_loop_is_not_a_nested_region():
    # The GEMM blocked with its outer tile loop parallel (order ijk, i_t) and the epilogue fused into
    # it, as autotile does: built explicitly, so the case does not depend on the ranking's choice.
    src = str(EXAMPLES / "matmul_bias_relu.tile")
    cfg = autotile.TileConfig("S0", "i", "j", "k", 128, 128, 256, 8, 32, 16, "ijk", "i_t")
    s = autotile.apply(polytile.schedule(src, dims=dict(M=512, N=512, K=512)), cfg)
    k = polytile.compile(src, schedule=autotile.fuse_epilogues(s, cfg))
    rng = np.random.default_rng(0)
    A, W, B = (rng.integers(-4, 5, s).astype(np.float32) for s in ((512, 512), (512, 512), (512,)))
    spec = k.specialize(A, W, B)
    bodies = _outlined_bodies(spec.source.text)
    assert bodies, "expected outlined parallel loops"
    assert not any("omp parallel" in b for b in bodies)
    # The case arises: the epilogue (the loop writing Y) runs inside the GEMM's parallel loop.
    assert any("Y[" in b and "A[" in b for b in bodies)
    np.testing.assert_array_equal(k(A, W, B), np.maximum(A @ W + B, 0))
