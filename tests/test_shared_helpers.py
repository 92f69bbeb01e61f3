"""The helpers every measuring path shares (issue 13, "one of each helper"): random inputs, the timing
loop and its median/min/max and cap, text tables (all in ``polytile.compare``), and the schedule file
reader (``polytile.scheduling.saved``) -- and that their users go through them."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import polytile.cli as cli
import polytile.compare as cmp
import polytile.tune as T
from polytile.errors import PolytileError
from polytile.scheduling.saved import read_schedule_file, schedule_steps


# ---------------------------------------------------------------------------
# random_inputs
# ---------------------------------------------------------------------------


def test_random_inputs_are_seeded_and_drawn_in_their_dtype():
    shapes, dtypes = [(3, 4), (), (5,)], ["float32", "int32", "float64"]
    for kind in ("int", "normal"):
        a = cmp.random_inputs(shapes, dtypes, kind, seed=7)
        b = cmp.random_inputs(shapes, dtypes, kind, seed=7)
        assert [x.dtype.name for x in a] == dtypes and [x.shape for x in a] == shapes
        assert all(x.flags.c_contiguous for x in a)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    # int: integers in [-4, 4], drawn as int8 (the stream the command line and tune always used)
    (x,) = cmp.random_inputs([(1000,)], ["float64"], "int", seed=1)
    want = np.random.default_rng(1).integers(-4, 5, size=(1000,), dtype=np.int8)
    assert np.array_equal(x, want.astype(np.float64))
    # normal: standard normals in the float dtype itself; integers get them rounded
    (f,) = cmp.random_inputs([(100,)], ["float32"], "normal", seed=2)
    assert np.array_equal(f, np.random.default_rng(2).standard_normal(size=(100,), dtype=np.float32))
    (i,) = cmp.random_inputs([(100,)], ["int64"], "normal", seed=2)
    assert i.dtype == np.int64 and np.abs(i).max() > 0


def test_random_inputs_positive_and_bad_kind():
    for kind in ("int", "normal"):
        (a, b) = cmp.random_inputs([(500,), (500,)], ["float32", "int32"], kind, seed=3, positive=True)
        assert a.min() >= 1 and a.max() <= 4 and b.min() >= 1 and b.max() <= 4
    with pytest.raises(PolytileError, match="unknown input kind 'uniform'"):
        cmp.random_inputs([(2,)], ["float32"], "uniform")


def test_run_and_tune_draw_through_random_inputs():
    hints = cli.FileHints(positive=True)
    target = cli.Target(Path("x.tile"), None, hints, {}, ((6, 2), ()), ("float32", "int64"), "")
    for kind in ("int", "normal"):
        got = cli.make_inputs(target, kind, seed=4)
        want = cmp.random_inputs(target.shapes, target.dtypes, kind, 4, positive=True)
        assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))
    got = T._make_inputs([(3, 3)], ["float64"], 0, positive=False)
    assert np.array_equal(got[0], cmp.random_inputs([(3, 3)], ["float64"], "int", 0)[0])


# ---------------------------------------------------------------------------
# time_calls, spread, capped_calls
# ---------------------------------------------------------------------------


def test_time_calls_counts_warmup_and_timed_calls():
    calls = []
    times = cmp.time_calls(lambda: calls.append(1), 4, 2)
    assert len(calls) == 6 and len(times) == 4 and all(t >= 0 for t in times)
    assert len(cmp.time_calls(lambda: None, 3)) == 3  # no warm-up unless asked


def test_spread():
    assert cmp.spread([]) == (None, None, None)
    s = cmp.spread([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.min, s.max) == (2.5, 1.0, 10.0)
    row = cmp.Row("x", times=[3.0, 1.0, 2.0])
    assert (row.median, row.min, row.max) == (2.0, 1.0, 3.0)


def test_capped_calls():
    # fits: the other warm-ups and every timed call
    assert cmp.capped_calls(0.01, 5, 3, cap_s=2.0) == (2, 5)
    assert cmp.capped_calls(0.01, 5, 0, cap_s=2.0) == (0, 5)
    # too slow for all of them: no more warm-up, as many timed calls as fit, at least one
    assert cmp.capped_calls(0.5, 10, 2, cap_s=2.0) == (0, 4)
    assert cmp.capped_calls(1.5, 10, 2, cap_s=2.0) == (0, 1)
    # the first call alone reached the cap: it is the measurement
    assert cmp.capped_calls(2.0, 10, 2, cap_s=2.0) == (0, 0)


# ---------------------------------------------------------------------------
# format_table
# ---------------------------------------------------------------------------


def test_format_table():
    text = cmp.format_table([["matmul", 1.5, None], ["conv", 10, "x"]], ["kernel", "ms", ""])
    assert text.split("\n") == ["kernel  ms", "matmul  1.5  None", "conv    10   x"]
    assert cmp.format_table([["a", "b"]]) == "a  b"
    assert cmp.format_table([]) == ""


# ---------------------------------------------------------------------------
# read_schedule_file
# ---------------------------------------------------------------------------


def test_read_schedule_file_names_the_file(tmp_path):
    with pytest.raises(PolytileError, match="no such schedule file"):
        read_schedule_file(tmp_path / "missing.json")
    with pytest.raises(PolytileError, match="not a file"):
        read_schedule_file(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("[1,\n")
    with pytest.raises(PolytileError, match=r"bad\.json: not valid JSON \(.* at line 2, column 1\)"):
        read_schedule_file(bad)
    with pytest.raises(PolytileError, match=r"bad\.json: not valid JSON"):
        schedule_steps(str(bad))  # the API reads a path with the same reader
    good = tmp_path / "good.json"
    doc = {"steps": [{"op": "base", "kind": "original"}], "meta": {"shapes": [[2, 3]], "dtypes": ["float64"]}}
    good.write_text(json.dumps(doc))
    assert read_schedule_file(good) == doc
    assert schedule_steps(good)[0].op == "base"


def test_cli_schedule_file_builds_on_the_reader(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"steps": [{"op": "base", "kind": "original"}],
                                "meta": {"shapes": [[2, 3]], "dtypes": ["float64"]}}))
    saved = cli.load_schedule_file(good)
    assert saved.complete and saved.shapes == [(2, 3)] and saved.dtypes == ["float64"]
    nosteps = tmp_path / "nosteps.json"
    nosteps.write_text("{}")
    with pytest.raises(PolytileError, match=r"nosteps\.json: schedule JSON has no 'steps' list; expected a "
                                            r"schedule saved by `polytile schedule -o`"):
        cli.load_schedule_file(nosteps)
    with pytest.raises(PolytileError, match="no such schedule file"):
        cli.load_schedule_file(tmp_path / "missing.json")


def test_random_inputs_of_unsigned_and_bool_types_hold_small_exact_values():
    for kind in ("int", "normal"):
        u, b = cmp.random_inputs([(400,), (400,)], ["uint16", "bool"], kind, seed=5)
        assert u.dtype == np.uint16 and 0 <= u.min() and u.max() <= 4 and u.min() == 0 and u.max() > 0
        assert b.dtype == np.bool_ and b.any() and not b.all()
