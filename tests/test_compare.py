"""Tests of polytile.compare: candidates, legality rows, oracle checks, timing stats, CSV/JSON with provenance.

Small sizes and one or two timed calls: these check what is measured and
recorded, not how fast anything is.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from polytile import compare as cmp
from polytile import pipeline
from polytile.errors import PolytileError
from polytile.scheduling import Step

ROOT = Path(__file__).resolve().parents[1]
MATMUL = ROOT / "examples" / "matmul.tile"
MBR = ROOT / "examples" / "matmul_bias_relu.tile"
FAST = dict(repeat=2, warmup=0)


def test_candidates_and_rows():
    kpar = [{"op": "parallel", "stmt": "C", "loop": "k"}]
    res = cmp.compare(MATMUL, {"M": 12, "N": 10, "K": 6}, "float32",
                      [cmp.default(), cmp.fusion("none"), cmp.tiled(4), ("kpar", kpar),
                       ("steps", [Step.make("interchange", stmt="C", a="j", b="k")])], **FAST)
    names = [r.name for r in res.rows]
    assert names == ["default", "isl-none", "tile4", "kpar", "steps"]
    for n in ("default", "isl-none", "tile4", "steps"):
        r = res.row(n)
        assert r.legal and r.check == "ok" and r.max_abs_err == 0.0
        assert len(r.times) == 2 and r.min <= r.median <= r.max
        assert r.flops == 2 * 12 * 10 * 6 and r.gflops > 0
    assert res.row("default").speedup == 1.0
    assert res.row("tile4").speedup == pytest.approx(res.row("default").median / res.row("tile4").median)
    bad = res.row("kpar")
    assert not bad.legal and bad.check == "illegal" and not bad.times and bad.speedup is None
    assert "is illegal" in bad.reason and "S0 -> S0" in bad.reason
    assert [s["op"] for s in bad.steps] == ["base", "auto_parallel", "parallel"]  # what was attempted
    # a bare step list goes on top of program order + auto_parallel
    assert [s["op"] for s in res.row("steps").steps] == ["base", "auto_parallel", "interchange"]
    assert "for k in [0, 5]" in res.row("steps").schedule.splitlines()[-3]
    assert res.ok


def test_tiled_candidate_tiles_only_contractions_and_parallelises_the_tile_loop():
    s = pipeline.schedule(MBR, dims="M=16,K=8,N=12")
    t = cmp.tile_contractions(s, 4)
    assert [st.op for st in t.steps][-2:] == ["tile", "parallel"]
    assert t.steps[-2].kwargs() == {"stmt": "C", "sizes": {"i": 4, "j": 4}}
    assert t.steps[-1].kwargs() == {"stmt": "C", "loop": "i_t", "reduction": False}
    assert t.loop_names("S0")[:2] == ["i_t", "j_t"]
    assert t.loop_names("E1") == s.loop_names("E1")  # the elementwise tail is left alone


def test_a_scalar_reduction_has_no_parallel_tile_loop():
    # dot: the only loop is the reduction, so "parallelise the outermost tile loop" is illegal
    res = cmp.compare(ROOT / "examples" / "dot.tile", "L=64", "float32", [cmp.default(), cmp.tiled(16)], **FAST)
    assert res.row("default").check == "ok"
    r = res.row("tile16")
    assert r.check == "illegal" and "carries a dependence" in r.reason


def test_a_step_that_does_not_apply_is_an_error_row():
    res = cmp.compare(MATMUL, "M=4,N=4,K=4", None, [("typo", [{"op": "tile", "stmt": "C", "sizes": {"q": 2}}]),
                                                      cmp.default()], **FAST)
    typo = res.row("typo")
    assert typo.check == "error" and "no loop 'q'" in typo.reason
    assert res.rows[1].speedup == 1.0  # the baseline is the first candidate that ran
    assert res.provenance["baseline"] == "default"
    assert not res.ok


def test_integer_dtype_is_exact_and_float_tolerance_is_stated():
    res = cmp.compare(MBR, "M=9,K=5,N=14", "int32", [cmp.default(), cmp.fusion("smart")], **FAST)
    assert all(r.check == "ok" and r.max_abs_err == 0.0 for r in res.rows)
    assert res.row("isl-smart").contracted_bytes == {"C": 9 * 14 * 4}
    assert res.row("isl-smart").traffic_saved == 2 * 9 * 14 * 4
    assert res.row("default").traffic_saved == 0


def test_mismatch_is_reported(monkeypatch):
    from polytile import interpreter as reference

    real = reference.run
    monkeypatch.setattr(reference, "run", lambda p, *a: real(p, *a) * 2 + 1)
    res = cmp.compare(MATMUL, "M=3,N=2,K=2", "float64", None, **FAST)
    (row,) = res.rows
    assert row.check == "MISMATCH" and "6 of 6 elements differ" in row.reason
    assert not res.ok


def test_shapes_as_tuples_dims_or_named(rng):
    A = rng.integers(-3, 4, (5, 3)).astype(np.float64)
    B = rng.integers(-3, 4, (3, 4)).astype(np.float64)
    for shapes in ([(5, 3), (3, 4)], {"M": 5, "K": 3, "N": 4}, "M=5,K=3,N=4", {"A": (5, 3), "B": (3, 4)}):
        res = cmp.compare(MATMUL, shapes, ["float64", "float64"], None, arrays=[A, B], repeat=1, warmup=0)
        assert res.provenance["shapes"] == [[5, 3], [3, 4]] and res.rows[0].check == "ok"
        assert res.provenance["inputs"] == "given by the caller"
    with pytest.raises(PolytileError, match="1 shape"):
        cmp.compare(MATMUL, [(5, 3)], None, None)
    with pytest.raises(PolytileError, match="repeat must be"):
        cmp.compare(MATMUL, "M=2,N=2,K=2", None, None, repeat=0)


def test_schedule_objects_and_files_as_candidates(tmp_path):
    s = pipeline.schedule(MATMUL, dims="M=8,N=8,K=8").tile("C", i=4, j=4)
    path = tmp_path / "t4.json"
    s.save(path)
    res = cmp.compare(MATMUL, "M=16,N=8,K=8", None, [("obj", s), cmp.from_file(path), cmp.from_file(path)], **FAST)
    assert [r.name for r in res.rows] == ["obj", "t4", "t4#2"]  # repeated names made distinct
    assert all(r.check == "ok" for r in res.rows)
    # the schedule was made for M=8 and replayed (and re-checked) for M=16
    assert "for i_t in [0, 3]" in res.row("t4").schedule
    assert res.row("obj").steps == res.row("t4").steps == [st.to_json() for st in s.steps]


def test_recipe_and_base_steps():
    bare = cmp.recipe([{"op": "parallel", "stmt": "C", "loop": "i"}])
    assert [s.op for s in bare] == ["base", "auto_parallel", "parallel"]
    assert [s.op for s in cmp.recipe([], fusion="max", parallel=False)] == ["base"]
    assert cmp.recipe([], fusion="max", parallel=False)[0].kwargs() == {"kind": "isl", "fusion": "max"}
    full = [{"op": "base", "kind": "original"}, {"op": "tile", "stmt": "C", "sizes": {"i": 2}}]
    assert [s.op for s in cmp.recipe(full, fusion="smart")] == ["base", "tile"]  # complete: kept as is
    assert cmp.recipe(json.dumps({"steps": full})) == cmp.recipe(full)


def test_csv_json_and_table(tmp_path):
    res = cmp.compare(MATMUL, "M=8,N=8,K=8", None, [cmp.default(), cmp.tiled(4),
                                                    ("kpar", [{"op": "parallel", "stmt": "C", "loop": "k"}])],
                      **FAST)
    table = res.table()
    assert table.splitlines()[0].split() == ["candidate", "legal", "check", "median", "ms", "min", "ms", "max",
                                             "ms", "GFLOP/s", "speedup"]
    assert "kpar: parallel(stmt='C', loop='k', reduction=False) is illegal" in table

    p = res.save(tmp_path / "r.csv")
    text = p.read_text()
    head = [ln for ln in text.splitlines() if ln.startswith("# ")]
    prov = {ln[2:].split(": ", 1)[0]: json.loads(ln[2:].split(": ", 1)[1]) for ln in head}
    assert prov["dims"] == {"M": 8, "K": 8, "N": 8} and prov["compiler"]["version"]
    rows = list(csv.DictReader([ln for ln in text.splitlines(keepends=True) if not ln.startswith("#")]))
    assert [r["name"] for r in rows] == ["default", "tile4", "kpar"]
    assert list(rows[0]) == list(cmp.CSV_FIELDS)
    assert rows[2]["legal"] == "no" and rows[2]["median_ms"] == "" and rows[2]["check"] == "illegal"
    assert rows[1]["schedule"].startswith("schedule of matmul") and "\n" in rows[1]["schedule"]

    doc = json.loads(res.save(tmp_path / "r.json").read_text())
    assert doc == json.loads(json.dumps(res.to_json()))
    assert doc["rows"][1]["times_s"] and doc["rows"][2]["times_s"] == []
    with pytest.raises(PolytileError, match=r"\.csv or \.json"):
        res.save(tmp_path / "r.xlsx")


def test_provenance_fields():
    prov = cmp.provenance(extra="x")
    assert prov["machine"]["cpu_count"] == __import__("os").cpu_count()
    assert prov["machine"]["processor"] and prov["machine"]["node"] is not None
    assert prov["compiler"]["path"] and prov["compiler"]["version"]
    assert isinstance(prov["flags"], list) and prov["numpy"] == np.__version__
    assert prov["polytile"] and prov["date"].endswith("+00:00") and prov["extra"] == "x"


def test_shared_helpers():
    (a,) = cmp.random_inputs([(100,)], ["float32"], "int", seed=3, positive=True)
    assert a.min() >= 1 and a.max() <= 4 and a.dtype == np.float32
    (s,) = cmp.random_inputs([()], ["int64"], "normal", seed=3)
    assert s.shape == () and s.dtype == np.int64
    with pytest.raises(PolytileError):
        cmp.random_inputs([(2,)], ["float32"], "uniform")
    c = cmp.check_output("X", np.array([1.0, np.inf]), np.array([1.0, np.inf]))
    assert c.ok and c.err == 0.0
    bad = cmp.check_output("X", np.array([1.0]), np.array([1.0, 2.0]))
    assert not bad.ok and math.isinf(bad.err)
    assert cmp.time_calls(lambda: None, 3, 1) and len(cmp.time_calls(lambda: None, 3, 1)) == 3
