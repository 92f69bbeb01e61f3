"""Compile cost grows linearly with program size (issue 12: 300 statements took 261 s).

Structural checks, not timings (those are in ``benchmarks/bench_compile_time.py``): the generated C
text grows linearly, isl schedules long programs in legal pieces, and the pieces' schedules give the
oracle's values.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import polytile
from polytile.frontends.c import extract
from polytile.scheduling import auto

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_compile_time import program  # noqa: E402

SHAPES = [(8, 8), (8, 8), (8,)]


def c_text(n: int, **opts) -> str:
    k = polytile.compile(program(n), **opts)
    return k.specialize_shapes(SHAPES, ["float32"] * 3, build=False).source.text


def test_generated_c_grows_linearly_with_statements():
    # Every parallel region became a function taking every array: statements x regions.
    small, big = len(c_text(40)), len(c_text(120))
    assert big < 3.6 * small, (small, big)


def test_outlined_regions_take_only_the_arrays_they_name():
    text = c_text(12)
    for m in re.finditer(r"void (pt_par\d+)\(([^)]*)\)\s*\{(.*?)\n\}", text, re.S):
        params = re.findall(r"\(\*restrict (\w+)\)|\*restrict (\w+)", m.group(2))
        for name in {a or b for a, b in params}:
            assert re.search(rf"\b{name}\b", m.group(3)), f"{m.group(1)} takes {name} but never uses it"


@pytest.mark.parametrize("fusion", ["smart", "max"])
def test_long_programs_are_scheduled_in_pieces_that_agree_with_the_oracle(fusion, monkeypatch):
    monkeypatch.setattr(auto, "CHUNK_STATEMENTS", 7)
    src = program(40)
    rng = np.random.default_rng(1)
    A, B = (rng.integers(-2, 3, (8, 8)).astype(np.float64) for _ in range(2))
    V = rng.integers(-2, 3, 8).astype(np.float64)
    got = polytile.compile(src, fusion=fusion)(A, B, V)
    want = polytile.reference(src, A, B, V)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_no_piece_boundary_where_a_dependence_points_back(tmp_path):
    # All statements sit in one loop over t whose iterations depend on each other: S9 (last) feeds
    # S0 (first) of the next t, so no cut is legal and isl gets the whole region.
    body = "\n".join(f"      A[{k}][i] = A[{(k - 1) % 10}][i] + 1.0;" for k in range(10))
    src = tmp_path / "loop.c"
    src.write_text("void f(int n, double A[10][n]) {\n#pragma scop\n  for (int t = 0; t < 4; t++)\n"
                   "    for (int i = 0; i < n; i++) {\n" + body + "\n    }\n#pragma endscop\n}\n")
    (cs,) = extract(src, params={"n": 6})
    from polytile import deps as D

    scop = cs.scop
    runs = auto._runs(scop, D.compute(scop).all(include_reductions=True), 3)
    assert runs == [[s.name for s in scop.statements]]


def test_pieces_are_cut_where_dependences_only_point_forward():
    from polytile import deps as D

    bound = polytile.compile(program(30)).specialize_shapes(SHAPES, ["float32"] * 3, build=False)
    runs = auto._runs(bound.scop, D.compute(bound.scop).all(include_reductions=True), 8)
    assert len(runs) > 2 and [n for r in runs for n in r] == [s.name for s in bound.scop.statements]
    assert all(len(r) <= 9 for r in runs)
