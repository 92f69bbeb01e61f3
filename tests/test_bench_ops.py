"""bench_ops's numpy baselines compute what its Tile programs compute (a benchmark against a different
computation would measure nothing): each baseline against the oracle on small, odd shapes."""
from pathlib import Path

import numpy as np
import pytest

import polytile
from helpers_inputs import bench_module

ROOT = Path(__file__).resolve().parents[1]

SMALL = {  # the workload's dims, small and odd where the program allows
    "matvec": "M=37,N=53", "vecmat": "M=37,N=53", "row_sum": "M=9,N=70", "dot": "L=1001", "maxpool": "N=2,H=6,W=10,C=7",
    "softmax": "M=5,N=33", "softmax_masked": "M=5,N=33", "elementwise_chain": "N=999", "min_plus": "M=7,K=9,N=11",
    "row_max": "M=9,N=70", "min_reduce": "M=9,N=70", "transpose": "M=9,N=70", "matmul_abt": "M=37,N=53,K=29",
    "global_avgpool": "N=2,H=5,W=7,C=9", "conv2d_same": "N=2,H=7,W=9,CI=3,CO=5",
    "matmul_narrow": "M=37,N=8,K=29", "batched_small": "NB=5,M=8,N=8,K=11", "logits": "M=37,N=10,K=41", "batch8_linear": "M=8,N=53,K=29",
    "cumsum": "N=41", "conv2d_nchw": "N=2,CI=3,L0=7,L1=9,CO=5", "conv2d_nchw_small": "N=2,CI=3,L0=5,L1=6,CO=40",
}


@pytest.fixture(scope="module")
def bench_ops():
    with bench_module("bench_ops") as mod:
        yield mod


@pytest.mark.parametrize("name", sorted(SMALL))
def test_baseline_computes_the_program(bench_ops, name):
    program = ROOT / "examples" / f"{bench_ops.PROGRAMS.get(name, name)}.tile"
    prog = polytile.load_program(program)
    if name == "elementwise_chain":  # X has no declared dimensions: it takes Y's
        shapes = [(999,), (999,)]
    else:
        shapes = polytile.shapes_from_dims(prog, polytile.parse_dims(SMALL[name]))
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(s) for s in shapes]
    if name in bench_ops.INPUTS:  # the row's own inputs (an attention mask's -1e9)
        ins = [a.astype(np.float64) for a in bench_ops.INPUTS[name]([a.astype(np.float32) for a in ins])]
    want = polytile.reference(program, *ins)
    got = bench_ops.BASELINES[name](*ins)
    np.testing.assert_allclose(got, np.asarray(want).reshape(np.shape(got)), rtol=1e-12, atol=1e-12)


def test_every_baseline_has_a_workload(bench_ops):
    class Args:
        only = None
    assert sorted(w.family for w in bench_ops.workloads(Args())) == sorted(bench_ops.BASELINES) == sorted(SMALL)
