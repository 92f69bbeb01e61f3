"""Tuning and compare on Dask workers: a real ``distributed.LocalCluster`` (2 worker processes, 1 thread each).

What is checked: the executors give the same search and the same checked rows
as in-process (fake timer, fixed seed, equal batch); every trial records its
worker and its machine's fingerprint, and trials of another kind are kept but
never ranked; a worker killed mid-run loses no finished trial and the run
finishes; an interrupted run resumes from the cache without measuring again;
the command-line options; the errors when Dask is missing or unreachable.
Tiny programs (matmul 32^3 and so on), so the whole file takes well under a minute.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys

import pytest

from polytile import compare as cmp
from polytile import executor as E
from polytile import hardware
from polytile.cli import main as cli_main
from polytile.errors import PolytileError
from polytile.runtime.json_cache import json_get
from polytile.tune import remote, search
from polytile import tune as T

distributed = pytest.importorskip("distributed")  # in the test extra: CI always has it

MATMUL = "examples/matmul.tile"
# Trial budgets, never the clock: a big time budget keeps the annealing temperature a function of the trial count.
SMALL = dict(budget_s=100000, top_k=3, repeat=2, progress=False)


@pytest.fixture(scope="module")
def cluster():
    """Two local worker processes (the executor `--workers local:2` makes), shared by this module's tests."""
    with E.DaskExecutor(n_workers=2) as ex:
        yield ex


def _partial(key: str) -> dict:
    """The partial document of the run with ``key``: its trials as they arrived."""
    return json_get(search.CACHE_NAMESPACE, key + search.PARTIAL_SUFFIX)


def _search(r: T.TuneResult):
    """What a search decided, without where or how long it took to run."""
    return [(t.index, t.configs, t.steps, t.source, t.predicted_s, t.median_s, t.ok, t.error) for t in r.trials]


# ---------------------------------------------------------------------------
# The executors themselves
# ---------------------------------------------------------------------------


def test_in_process_executor_runs_tasks_when_asked_and_keeps_their_errors():
    ran = []
    ex = E.executor_from()
    ok = ex.submit(lambda x: ran.append(x) or x * 2, 21)
    bad = ex.submit(lambda: 1 / 0)
    assert ran == [] and not ok.done()  # lazy: Ctrl-C between two tasks stops before the next
    assert [f for f in ex.as_completed([ok, bad])] == [ok, bad]
    assert ok.result() == 42 and ran == [21]
    with pytest.raises(ZeroDivisionError):
        bad.result()
    dropped = ex.submit(ran.append, 1)
    ex.cancel([dropped])
    assert list(ex.as_completed([dropped])) == [] and ran == [21]
    assert ex.describe()["executor"] == "in-process" and ex.workers == 1
    assert ex.worker_kinds() == {"in-process": hardware.host_fingerprint()}


def test_choosing_an_executor():
    assert E.local_workers("local:3") == 3 and E.local_workers(" LOCAL : 2 ") == 2
    for bad in ("3", "local:0", "remote:2", "local:x"):
        with pytest.raises(PolytileError, match="local:N|at least one"):
            E.local_workers(bad)
    with pytest.raises(PolytileError, match="not both"):
        E.executor_from("local:2", "tcp://127.0.0.1:8786")
    assert isinstance(E.as_executor(None)[0], E.InProcess)
    with pytest.raises(PolytileError, match="executor"):
        E.as_executor(42)


def test_missing_dask_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` now fails
    with pytest.raises(PolytileError, match=r"pip install -e '\.\[distributed\]'"):
        E.executor_from(workers="local:2")


def test_unreachable_scheduler_is_a_clear_error():
    with pytest.raises(PolytileError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9.*dask scheduler"):
        E.DaskExecutor("tcp://127.0.0.1:9", timeout=1)


def test_cluster_workers_time_one_kernel_at_a_time(cluster):
    d = cluster.describe()
    assert d["executor"] == "dask" and d["mode"] == "local" and d["workers"] == 2 == cluster.workers
    assert set(d["worker_threads"].values()) == {1} and d["timer_resource"]
    assert d["threads_per_kernel"] == max(1, (os.cpu_count() or 1) // 2)
    kinds = cluster.worker_kinds()
    assert len(kinds) == 2 and set(kinds.values()) == {hardware.host_fingerprint()}


def test_machine_kind_ignores_the_clock_but_not_the_cores():
    hw = hardware.load("x86-avx512")
    assert hardware.fingerprint(dataclasses.replace(hw, clock_ghz=hw.clock_ghz * 1.01, notes=("x",))) == \
        hardware.fingerprint(hw)
    assert hardware.fingerprint(dataclasses.replace(hw, cores=hw.cores + 1)) != hardware.fingerprint(hw)


# ---------------------------------------------------------------------------
# tune
# ---------------------------------------------------------------------------


def test_tune_on_workers_is_the_in_process_search(cluster):
    """Same seed, same batch, fake timer: the same trials in the same order, whoever finished first."""
    settings = dict(SMALL, max_trials=7, seed=3, fake_timer=11, cache=False)
    here = T.tune(MATMUL, "M=32,N=32,K=32", batch=2, **settings)
    there = T.tune(MATMUL, "M=32,N=32,K=32", executor=cluster, **settings)
    assert len(there.trials) == 7 and _search(there) == _search(here)
    assert there.best_trial == here.best_trial and there.best.steps == here.best.steps
    assert there.baseline_time_s == here.baseline_time_s  # the baseline is fake-timed too
    assert all(t.ok is True for t in there.trials)  # checked for real against each worker's oracle
    assert {t.worker for t in there.trials} <= set(cluster.worker_kinds())
    assert {t.kind for t in there.trials} == {hardware.host_fingerprint()} == {there.ranking_kind}
    assert there.info["executor"]["executor"] == "dask" and there.info["search"]["batch"] == 2
    assert {t.worker for t in here.trials} == {"in-process"}
    # batch 1 is a different search (and cache key) than batch 2
    one = T.tune(MATMUL, "M=32,N=32,K=32", **settings)
    assert one.key != here.key and "batch" not in one.info["search"]


def test_tune_cli_with_local_workers(tmp_path, capsys):
    out = tmp_path / "best.json"
    code = cli_main(["tune", MATMUL, "--dims", "M=24,N=24,K=24", "--trials", "4", "--top-k", "2", "--repeat", "2",
                     "--workers", "local:2", "--no-cache", "--no-progress", "-o", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    assert "on 2 Dask worker(s)" in captured.err and "on 2 Dask worker(s) (local" in captured.out
    assert json.loads(out.read_text())["steps"][0]["op"] == "base"


def test_killed_worker_loses_no_finished_trial(monkeypatch):
    """SIGKILL one worker while the other's trial is in flight: every finished trial is in the cache at that
    moment, none is measured again, and the run finishes all its trials."""
    real = search._Search._write_partial
    seen = {}

    def kill_after_first(self):
        real(self)
        if seen or len(self.arrived) != 1:
            return
        seen["doc"] = _partial(self.key)
        pids = self.ex.client.run(os.getpid)
        busy = [a for a, tasks in self.ex.client.processing().items() if tasks]
        victim = next((a for a in busy if a != self.arrived[0].worker), None) or \
            next(a for a in pids if a != self.arrived[0].worker)
        seen["victim"], seen["was_busy"] = victim, victim in busy
        os.kill(pids[victim], signal.SIGKILL)

    monkeypatch.setattr(search._Search, "_write_partial", kill_after_first)
    with E.DaskExecutor(n_workers=2) as ex:
        r = T.tune(MATMUL, "M=48,N=40,K=32", executor=ex, cache=True, **dict(SMALL, max_trials=6, top_k=4))
    assert seen, "no trial arrived"
    stored = [t["index"] for t in seen["doc"]["trials"]]
    assert len(stored) == 1, "the finished trial was in the cache when the worker died"
    assert len(r.trials) == 6
    first = r.trials[stored[0]]
    kept = seen["doc"]["trials"][0]
    assert (first.median_s, first.worker) == (kept["median_s"], kept["worker"])  # not measured again
    for t in r.trials:  # the killed worker's trial was retried elsewhere, or failed saying why
        assert t.ok is True or (t.error or "").startswith("worker lost"), t.error
    assert T.cache_path(r.key).is_file() and not T.partial_path(r.key).exists()


def test_a_trial_whose_workers_all_died_is_a_failed_trial(monkeypatch):
    """Dask gives up on a task after its workers died ``allowed_failures`` times (KilledWorker): the trial is
    recorded as failed, saying so, and the search goes on."""
    class Dead:
        def result(self):
            last = type("WorkerState", (), {"address": "tcp://127.0.0.1:1"})()
            raise distributed.KilledWorker("task-1", last, allowed_failures=3)

    with pytest.raises(E.WorkerLost, match="worker lost"):
        E._DaskFuture(Dead()).result()

    real, calls = remote.measure_trial, []

    def second_trial_lost(job, steps):
        calls.append(1)
        if len(calls) == 3:  # the baseline, trial 0, then trial 1
            raise E.WorkerLost("worker lost: pretend")
        return real(job, steps)

    monkeypatch.setattr(remote, "measure_trial", second_trial_lost)
    r = T.tune(MATMUL, "M=16,N=16,K=16", cache=False, fake_timer=1, **dict(SMALL, max_trials=4))
    assert r.trials[1].error == "worker lost: pretend" and r.trials[1].median_s is None
    assert len(r.trials) == 4 and all(t.ok for k, t in enumerate(r.trials) if k != 1)


def test_interrupted_run_resumes_from_the_cache(cluster, monkeypatch):
    real = search._Search._write_partial
    dims, settings = "M=40,N=32,K=24", dict(SMALL, max_trials=6, seed=2)

    def interrupt_after_three(self):
        real(self)
        if len(self.arrived) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(search._Search, "_write_partial", interrupt_after_three)
    with pytest.raises(T.TuneInterrupted) as stopped:
        T.tune(MATMUL, dims, executor=cluster, **settings)
    partial = stopped.value.result
    assert len(partial.trials) >= 3 and partial.info["partial_cache"] == str(T.partial_path(partial.key))
    assert not T.cache_path(partial.key).exists()
    kept = _partial(partial.key)["trials"]
    monkeypatch.setattr(search._Search, "_write_partial", real)

    again = T.tune(MATMUL, dims, executor=cluster, **settings)
    assert again.key == partial.key and len(again.trials) == 6 and again.info["resumed_trials"] == 3
    by_config = {json.dumps(t.to_json()["configs"]): t for t in again.trials}
    for old in kept:  # real timings: equal to the last bit only because they were reused
        t = by_config[json.dumps(old["configs"])]
        assert (t.median_s, t.worker) == (old["median_s"], old["worker"])
    assert not T.partial_path(again.key).exists() and T.cache_path(again.key).is_file()
    assert "3 trials resumed" in again.table()


def test_trials_of_another_kind_are_kept_but_not_ranked(monkeypatch):
    here = hardware.host_fingerprint()
    calls = []

    def odd_ones_elsewhere():  # the baseline (call 0) here; trials 1, 3, 5 "on another machine"
        calls.append(1)
        return "0ther0ther0ther0" if len(calls) % 2 == 0 else here

    monkeypatch.setattr(remote, "host_fingerprint", odd_ones_elsewhere)
    r = T.tune(MATMUL, "M=32,N=32,K=32", cache=False, fake_timer=5, **dict(SMALL, max_trials=5))
    other = [t.index for t in r.trials if t.kind != here]
    assert other and r.info["kinds"] == {"ranking": here, "other_kind_trials": other}
    assert r.best_trial not in other
    assert r.best_time_s == min([t.median_s for t in r.trials if t.kind == here] + [r.baseline_time_s])
    assert "not ranked" in r.table() and "(other kind)" in r.table()


def test_workers_of_another_kind_cannot_tune_for_this_host(monkeypatch):
    monkeypatch.setattr(remote, "host_fingerprint", lambda: "0ther0ther0ther0")
    with pytest.raises(PolytileError, match="another kind of machine.*--hardware FILE"):
        T.tune(MATMUL, "M=16,N=16,K=16", cache=False, **dict(SMALL, max_trials=1, top_k=1))


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------


def _rows(res):
    return [(r.name, r.legal, r.check, r.reason, r.max_abs_err, r.steps, r.schedule, len(r.times)) for r in res.rows]


def test_compare_on_workers_gives_the_in_process_rows(cluster):
    cands = [cmp.default(), cmp.fusion("smart"), cmp.tiled(8),
             ("kpar", [{"op": "parallel", "stmt": "C", "loop": "k"}])]
    here = cmp.compare(MATMUL, "M=32,N=24,K=16", "float32", cands, repeat=2, warmup=0)
    there = cmp.compare(MATMUL, "M=32,N=24,K=16", "float32", cands, repeat=2, warmup=0, executor=cluster)
    assert _rows(there) == _rows(here)
    assert [r.check for r in there.rows] == ["ok", "ok", "ok", "illegal"]
    assert all(r.speedup for r in there.rows[:3]) and there.row("default").speedup == 1.0
    where = there.provenance["measured_on"]
    assert set(where) == {"default", "isl-smart", "tile8"}  # the illegal one never left this process
    assert {w["kind"] for w in where.values()} == {hardware.host_fingerprint()}
    assert "executor" not in here.provenance


def test_compare_cli_with_local_workers(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = cli_main(["compare", MATMUL, "--dims", "M=16,N=16,K=16", "--tile", "4,8", "--repeat", "2",
                     "--workers", "local:2", "-q", "-o", str(out)])
    assert code == 0
    assert "2 Dask worker(s)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert [r["check"] for r in doc["rows"]] == ["ok", "ok", "ok"]
    assert set(doc["provenance"]["measured_on"]) == {"default", "tile4", "tile8"}
    # A C file's builds are compared in this process: a usage error, before anything starts.
    assert cli_main(["compare", "tests/c_kernels/gemm.c", "--dims", "ni=8,nj=8,nk=8", "--workers", "local:2"]) == 2
    assert "Tile programs only" in capsys.readouterr().err
