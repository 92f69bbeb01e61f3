"""The autotuner: every trial legal and checked, the best is the fastest, seeds reproduce, results cache."""
from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

import polytile
from polytile import autotile, hardware, pipeline, runtime
from polytile import tune as T
from polytile.tune import bench as tune_bench
from polytile.errors import IllegalSchedule, PolytileError

MATMUL = "examples/matmul.tile"
CONV = "examples/conv2d.tile"
CONV_DIMS = "N=1,H=10,W=10,CI=8,KH=3,KW=3,CO=16"
# Search settings every test shares: a trial budget (so runs are reproducible), a big time budget.
QUICK = dict(budget_s=120, max_trials=6, top_k=3, repeat=3, progress=False)


def _check_result(r: T.TuneResult, dims: str, rng, source=MATMUL):
    """Every trial ok and replayable, best <= every ok trial, and the best schedule computes the right thing."""
    assert r.trials, "nothing was tried"
    assert [t.index for t in r.trials] == list(range(len(r.trials)))
    for t in r.trials:
        assert t.error is None, t.error
        assert t.ok is True
        assert t.median_s is not None and t.min_s is not None and 0 < t.min_s <= t.median_s
        assert t.source in T.SOURCES
        # Legal: replaying the steps re-checks every one against the dependences.
        pipeline.schedule(source, dims=dims, steps=t.steps)
        assert r.best_time_s <= t.median_s
    assert r.best_time_s <= r.baseline_time_s
    assert r.trials[0].source == "model-top-k"
    if r.best_trial is not None:
        assert r.best_time_s == r.trials[r.best_trial].median_s
        assert [s.to_json() for s in r.best.steps] == r.trials[r.best_trial].steps
    # The best schedule, compiled on its own, agrees with the oracle on fresh inputs.
    prog = pipeline.load_program(source)
    shapes = pipeline.shapes_from_dims(prog, pipeline.parse_dims(dims))
    arrays = [rng.integers(-3, 4, size=s).astype(np.float32) for s in shapes]
    got = polytile.compile(source, schedule=r.best)(*arrays)
    np.testing.assert_array_equal(got, polytile.reference(source, *arrays))


def test_matmul_64(rng):
    dims = "M=64,N=64,K=64"
    r = T.tune(MATMUL, dims, cache=False, **QUICK)
    assert len(r.trials) == 6 and not r.from_cache
    assert [t.source for t in r.trials[:3]] == ["model-top-k"] * 3
    assert all(t.source in ("anneal", "seed") for t in r.trials[3:])
    assert len({t.configs for t in r.trials}) == len(r.trials), "a configuration was measured twice"
    _check_result(r, dims, rng)
    if r.trials[0].predicted_s is None:
        # No cost model yet: the stand-in ranking is autotile.candidates' own order.
        base = pipeline.schedule(MATMUL, dims=dims, steps=T.DEFAULT_STEPS)
        first = autotile.candidates(base, "S0", hardware.load("host"))[0]
        assert r.trials[0].configs == (first,)
    else:
        assert all(t.predicted_s > 0 for t in r.trials)
    assert r.flops == 2 * 64 ** 3
    text = r.table()
    assert "model-top-k" in text and "best:" in text and "baseline" in text


def test_conv2d_small(rng):
    r = T.tune(CONV, CONV_DIMS, cache=False, **QUICK)
    assert len(r.trials) == 6
    assert r.trials[0].configs[0].j == "co"
    _check_result(r, CONV_DIMS, rng, source=CONV)


@pytest.mark.parametrize("dims", ["M=37,N=41,K=43", "M=5,N=3,K=7"])
def test_prime_and_smaller_than_a_tile(dims, rng):
    r = T.tune(MATMUL, dims, cache=False, **{**QUICK, "max_trials": 4, "top_k": 2})
    _check_result(r, dims, rng)
    # Tiles never exceed the extents (bigger ones are the same schedule, so they are clamped).
    for t in r.trials:
        c = t.configs[0]
        ext = pipeline.parse_dims(dims)
        assert c.mc <= max(c.mr, ext["M"]) and c.nc <= max(c.nr, ext["N"]) and c.kc <= ext["K"]


def _fake_clock(monkeypatch):
    """Deterministic "times" (a fixed sequence), so the annealer's decisions depend only on the seed."""
    state = {"n": 0}

    def fake(call, n):
        out = []
        for _ in range(n):
            state["n"] += 1
            out.append(1e-3 * (1.0 + ((state["n"] * 7919) % 17) / 17.0))
        return out

    monkeypatch.setattr(tune_bench, "_time_runs", fake)
    return state


def test_same_seed_same_search(monkeypatch):
    dims = "M=48,N=48,K=48"
    settings = dict(QUICK, max_trials=9, top_k=2, cache=False)
    runs = {}
    for label, seed in (("a", 5), ("b", 5), ("c", 6)):
        state = _fake_clock(monkeypatch)
        r = T.tune(MATMUL, dims, seed=seed, **settings)
        runs[label] = [t.configs for t in r.trials]
        assert len(r.trials) == 9 and state["n"] > 0
    assert runs["a"] == runs["b"]
    assert runs["a"][:2] == runs["c"][:2]  # the model's picks do not depend on the seed
    assert runs["a"] != runs["c"]  # the annealing does


def test_same_seed_real_clock_same_model_picks():
    dims = "M=32,N=32,K=32"
    a = T.tune(MATMUL, dims, cache=False, seed=1, **QUICK)
    b = T.tune(MATMUL, dims, cache=False, seed=1, **QUICK)
    assert [t.configs for t in a.trials[:3]] == [t.configs for t in b.trials[:3]]


def test_cache_hit_measures_and_compiles_nothing():
    dims = "M=40,N=40,K=40"
    settings = dict(QUICK, max_trials=3, top_k=2)
    first = T.tune(MATMUL, dims, **settings)
    assert not first.from_cache and T.cache_path(first.key).is_file()
    before = (T.stats.measurements, runtime.stats.compiles, runtime.stats.cache_hits)
    second = T.tune(MATMUL, dims, **settings)
    assert (T.stats.measurements, runtime.stats.compiles, runtime.stats.cache_hits) == before
    assert second.from_cache and second.key == first.key
    assert second.best.steps == first.best.steps
    assert second.best_time_s == first.best_time_s and second.baseline_time_s == first.baseline_time_s
    assert [t.to_json() for t in second.trials] == [t.to_json() for t in first.trials]
    # A search setting that changes the answer is a different key.
    third = T.tune(MATMUL, dims, **dict(settings, seed=1, max_trials=1, top_k=1))
    assert third.key != first.key and not third.from_cache


def test_cache_ignores_a_corrupt_file():
    dims = "M=24,N=24,K=24"
    settings = dict(QUICK, max_trials=1, top_k=1)
    r = T.tune(MATMUL, dims, **settings)
    T.cache_path(r.key).write_text("{ not json")
    again = T.tune(MATMUL, dims, **settings)
    assert not again.from_cache
    assert json.loads(T.cache_path(r.key).read_text())["key"] == r.key


def test_json_round_trip():
    r = T.tune(MATMUL, "M=32,N=16,K=24", cache=False, **dict(QUICK, max_trials=3, top_k=2))
    data = json.loads(json.dumps(r.to_json()))
    back = T.TuneResult.from_json(data)
    assert back.to_json() == r.to_json()
    assert back.best.steps == r.best.steps and back.best_configs == r.best_configs
    assert back.trials == r.trials
    assert math.isclose(back.speedup, r.speedup)


def test_trials_carry_time_stamps_and_older_formats_still_read():
    r = T.tune(MATMUL, "M=16,N=16,K=16", cache=False, **dict(QUICK, max_trials=3, top_k=2))
    stamps = [t.at_s for t in r.trials]
    assert all(s is not None and s >= 0 for s in stamps) and stamps == sorted(stamps)
    data = json.loads(json.dumps(r.to_json()))
    assert data["polytile_tune"] == T.FORMAT_VERSION == 4
    # A result saved before configurations carried the register blocks' order (format 3) reads with
    # the only order there was; one saved before trials carried time stamps (format 2), without them.
    for c in data["best"]["configs"] + [c for t in data["trials"] for c in t["configs"]]:
        assert c.pop("inner") in ("ji", "ij")
    data["polytile_tune"] = 3
    assert all(c.inner == "ji" for c in T.TuneResult.from_json(data).best_configs)
    data["polytile_tune"] = 2
    for t in data["trials"]:
        del t["at_s"]
    old = T.TuneResult.from_json(data)
    assert [t.at_s for t in old.trials] == [None] * 3 and old.best.steps == r.best.steps
    data["polytile_tune"] = 1
    with pytest.raises(PolytileError, match="format 2 or 3 or 4"):
        T.TuneResult.from_json(data)


def test_failed_candidates_are_logged_and_never_chosen(monkeypatch):
    real_apply = autotile.apply
    # The loop order of the model's first candidate: make every candidate with it fail.
    first = T.tune(MATMUL, "M=32,N=32,K=32", cache=False, **dict(QUICK, max_trials=1, top_k=1))
    bad = first.trials[0].configs[0].order

    def picky_apply(s, cfg):
        if cfg.order == bad:
            raise IllegalSchedule(f"pretend {cfg.order} breaks a dependence")
        return real_apply(s, cfg)

    monkeypatch.setattr(autotile, "apply", picky_apply)
    r = T.tune(MATMUL, "M=32,N=32,K=32", cache=False, **QUICK)
    failed = [t for t in r.trials if t.configs[0].order == bad]
    assert failed, f"the top candidate uses order {bad}: it must have failed"
    for t in failed:
        assert t.error.startswith("IllegalSchedule:") and t.median_s is None and t.ok is None
    assert r.best_trial is None or r.trials[r.best_trial].configs[0].order != bad


def test_mismatch_is_never_chosen(monkeypatch):
    calls = {"n": 0}
    real = T._Bench._compare

    def wrong_after_baseline(self, outs):
        calls["n"] += 1
        if calls["n"] == 1:
            return real(self, outs)  # the baseline
        return "mismatch with the oracle: C: pretend"

    monkeypatch.setattr(T._Bench, "_compare", wrong_after_baseline)
    r = T.tune(MATMUL, "M=32,N=32,K=32", cache=False, **dict(QUICK, max_trials=3, top_k=2))
    assert all(t.ok is False and t.error.startswith("mismatch") for t in r.trials)
    assert r.best_trial is None and r.best_configs == ()
    # Nothing beat the baseline, so the answer is what `polytile compile` runs by default for this hardware.
    compiled = polytile.compile(MATMUL).specialize_shapes([(32, 32), (32, 32)], ["float32", "float32"], build=False)
    assert r.best.steps == compiled.schedule.steps
    assert r.best.steps != pipeline.schedule(MATMUL, dims="M=32,N=32,K=32", steps=T.DEFAULT_STEPS).steps
    assert r.best_time_s == r.baseline_time_s and r.speedup == 1.0


def test_nothing_to_tune_returns_the_default():
    r = T.tune("examples/softmax.tile", "M=4,N=5", cache=False, **QUICK)
    assert r.trials == [] and r.best_trial is None and r.speedup == 1.0


def test_progress_bar_when_forced(capsys):
    T.tune(MATMUL, "M=16,N=16,K=16", cache=False, **dict(QUICK, max_trials=1, top_k=1, progress="force"))
    err = capsys.readouterr().err
    assert "tune" in err and "1/1" in err and "best" in err


def test_bad_arguments():
    with pytest.raises(PolytileError, match="budget"):
        T.tune(MATMUL, "M=8,N=8,K=8", budget_s=0)
    with pytest.raises(PolytileError, match="CPU"):
        T.tune(MATMUL, "M=8,N=8,K=8", hardware="nvidia-h100", cache=False, progress=False)


def test_parse_budget():
    assert T.parse_budget("60s") == 60 and T.parse_budget("2m") == 120 and T.parse_budget("90") == 90
    assert T.parse_budget("1.5m") == 90 and T.parse_budget("1h") == 3600
    for bad in ("", "soon", "-5", "0", "5x"):
        with pytest.raises(PolytileError):
            T.parse_budget(bad)


def test_cli_helper(tmp_path, capsys, rng):
    parser = argparse.ArgumentParser(prog="polytile tune")
    T.add_arguments(parser)
    best = tmp_path / "best.json"
    out_json = tmp_path / "result.json"
    args = parser.parse_args([MATMUL, "--dims", "M=32,N=24,K=16", "--budget", "1m", "--trials", "3",
                              "--top-k", "2", "--seed", "4", "--repeat", "2", "--no-cache", "--no-progress",
                              "-o", str(best), "--json", str(out_json)])
    assert args.budget == 60.0
    assert T.main_tune(args) == 0
    out = capsys.readouterr().out
    assert "model-top-k" in out and "best schedule:" in out and "schedule of matmul" in out
    data = json.loads(best.read_text())
    assert data["steps"][0]["op"] == "base"
    A = rng.integers(-3, 4, size=(32, 16)).astype(np.float32)
    B = rng.integers(-3, 4, size=(16, 24)).astype(np.float32)
    np.testing.assert_array_equal(polytile.compile(MATMUL, schedule=str(best))(A, B), A @ B)
    assert json.loads(out_json.read_text())["search"]["seed"] == 4
    with pytest.raises(SystemExit):
        parser.parse_args([MATMUL, "--budget", "soon"])


def test_oracle_of_a_plain_contraction_takes_the_einsum_path(monkeypatch):
    # The enumeration took ~170 s of a 2048^3 tune; a plain matmul must not reach it, and the
    # check against the fast path's answer still passes correct kernels and fails wrong ones.
    from polytile import interpreter as reference

    def no_enumeration(*args):
        raise AssertionError("the oracle enumerated a plain contraction")

    monkeypatch.setattr(reference, "_enumerate_contraction", no_enumeration)
    r = T.tune(MATMUL, "M=48,N=40,K=56", cache=False, **dict(QUICK, max_trials=2, top_k=2))
    assert [t.ok for t in r.trials] == [True, True]
    assert r.info["setup_s"]["oracle"] < r.info["setup_s"]["total"]
    bench = T._Bench(pipeline.load_program(MATMUL), [(48, 56), (56, 40)], ("float32", "float32"),
                     repeat=1, warmup=1, check=True, cap_s=2.0)
    A, B = bench.arrays
    np.testing.assert_array_equal(bench.expected[0], A @ B)
    off = (A @ B).copy()
    off[3, 4] += 1
    assert "mismatch" in bench._compare((off,))


def test_first_trial_is_the_compile_default():
    """The search starts from what `polytile compile` would run (same model order and tie-break)."""
    dims = "M=96,N=96,K=96"
    r = T.tune(MATMUL, dims, cache=False, **dict(QUICK, max_trials=1, top_k=1))
    _, chosen = autotile.autotile(polytile.schedule(MATMUL, dims=dims), polytile.options.load_hardware("host"))
    assert r.trials[0].source == "model-top-k"
    assert list(r.trials[0].configs) == chosen


def test_interrupt_keeps_the_best_so_far_and_caches_nothing(monkeypatch):
    """Ctrl-C during the search: TuneInterrupted (a KeyboardInterrupt) carrying the trials measured so far."""
    real = T._Bench.measure
    calls = []

    def measure(self, steps):
        calls.append(1)
        if len(calls) == 4:  # the baseline, two trials, then Ctrl-C
            raise KeyboardInterrupt
        return real(self, steps)

    monkeypatch.setattr(T._Bench, "measure", measure)
    dims = "M=32,N=32,K=32"
    with pytest.raises(T.TuneInterrupted) as info:
        T.tune(MATMUL, dims, cache=True, **QUICK)
    assert isinstance(info.value, KeyboardInterrupt)
    r = info.value.result
    assert len(r.trials) == 2 and r.info["interrupted"] is True
    assert r.best_time_s <= r.baseline_time_s
    assert not T.cache_path(r.key).exists(), "a partial search must not be served as a cached result"


def test_inputs_drawn_in_their_dtype():
    a, b = T._make_inputs([(3, 4), ()], ["float32", "int32"], 0, positive=False)
    assert a.dtype == np.float32 and a.shape == (3, 4) and b.dtype == np.int32 and b.shape == ()
    assert set(a.ravel().tolist()) <= set(range(-4, 5))


def test_the_search_starts_no_batch_that_would_end_past_its_budget():
    """A batch started just before the deadline ran a 120 s budget 1.5 s over (bench_all --tune 120s):
    the search stops when the next batch, as long as the last one, would end past the deadline."""
    import time

    from polytile.tune.search import _Search

    s = _Search.__new__(_Search)  # the rule alone: no program, no executor
    s.trials, s.max_trials = [], 100
    s.deadline, s.last_batch_s = time.perf_counter() + 10.0, 0.0
    assert not s.stop()            # nothing measured yet: the first batch always runs
    s.last_batch_s = 2.0
    assert not s.stop()            # 10 s left, batches of 2 s
    s.last_batch_s = 30.0
    assert s.stop()                # the next batch would end 20 s late
    s.deadline, s.last_batch_s = time.perf_counter() - 1.0, 0.0
    assert s.stop()                # past the deadline
    s.deadline, s.trials, s.max_trials = time.perf_counter() + 10.0, [object()], 1
    assert s.stop()                # out of trials


def test_a_program_with_a_size_input_tunes_at_its_value(rng):
    # D sizes the output's rows (C[i, j : D, N]); its value comes with the dims and is part of what is tuned.
    src = "function (A[M, K], B[K, N], D) -> (C) { C[i, j : D, N] = +(A[i, k] * B[k, j]); }"
    r = T.tune(src, "M=40,K=16,N=24,D=20", cache=False, **QUICK)
    assert r.trials and all(t.ok for t in r.trials), [t.error for t in r.trials]
    assert r.flops == 2 * 20 * 24 * 16
    doc = r.to_json()
    assert doc["inputs"]["D"] == {"shape": [], "dtype": "int32", "value": 20}
    again = T.TuneResult.from_json(doc)  # replays the best steps at D = 20
    assert [s.to_json() for s in again.best.steps] == [s.to_json() for s in r.best.steps]
    A = rng.integers(-3, 4, size=(40, 16)).astype(np.float32)
    B = rng.integers(-3, 4, size=(16, 24)).astype(np.float32)
    got = polytile.compile(src, schedule=r.best)(A, B, 20)
    np.testing.assert_array_equal(got, polytile.reference(src, A, B, 20))
