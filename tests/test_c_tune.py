"""``polytile opt --tune``'s choice (c_runner.tune_variants): measured variants, the original kept unless beaten."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from polytile import c_runner
from polytile import compare as compare_mod

KERNELS = Path(__file__).resolve().parent / "c_kernels"
needs_cc = pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler")


def test_tuning_variants_keep_the_users_options():
    vs = c_runner.tuning_variants({"parallel": False, "reassociate": True})
    assert [v.name for v in vs] == ["original", "opt", "fusion-none", "fusion-max", "no-tile"]
    assert vs[0].options is None
    assert all(v.options["parallel"] is False and v.options["reassociate"] is True for v in vs[1:])
    assert vs[2].options["fusion"] == "none" and vs[4].options["tile"] is False


def _fake(monkeypatch, medians, checks=None):
    checks = checks or ["ok"] * len(medians)

    def compare_c(call, cands, **kw):
        rows = []
        for v, m, c in zip(cands, medians, checks):
            r = compare_mod.Row(v.name, v.origin, legal=True, check=c)
            r.times = [m] if m is not None else []
            rows.append(r)
        return compare_mod.CompareResult(rows, {})
    monkeypatch.setattr(c_runner, "compare_c", compare_c)


@pytest.mark.parametrize("medians, checks, winner", [
    ([1.0, 0.98, 0.99, 2.0, 1.5], None, "original"),           # within the margin: the original stays
    ([1.0, 0.50, 0.40, 2.0, 0.49], None, "fusion-none"),       # the fastest beyond the margin
    ([1.0, 0.50, 0.49, 2.0, 0.30], ["ok", "ok", "ok", "ok", "MISMATCH"], "opt"),  # a wrong result never wins
    ([1.0, None, 0.90, 2.0, 0.89], ["ok", "error", "ok", "ok", "ok"], "fusion-none"),  # later within margin: earlier kept
])
def test_choice_rule(monkeypatch, medians, checks, winner):
    _fake(monkeypatch, medians, checks)
    best, res = c_runner.tune_variants(object(), c_runner.tuning_variants())
    assert best.name == winner


@needs_cc
def test_tuned_choice_is_checked_and_measured():
    call = c_runner.prepare(KERNELS / "gemver.c", sizes={"n": 40}, scalars={"alpha": 1.5, "beta": 1.2})
    best, res = c_runner.tune_variants(call, repeat=2, warmup=0)
    rows = {r.name: r for r in res.rows}
    assert set(rows) == {"original", "opt", "fusion-none", "fusion-max", "no-tile"}
    assert all(r.check == "ok" for r in rows.values())  # every variant bitwise the original's
    assert best.name == "original" or rows[best.name].median < rows["original"].median


@needs_cc
def test_opt_tune_cli(tmp_path, capsys):
    from polytile.cli import main

    out = tmp_path / "gemver.opt.c"
    rc = main(["opt", str(KERNELS / "gemver.c"), "--tune", "--tune-dims", "n=40", "--tune-repeat", "2", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0 and out.is_file()
    assert "fusion-none" in err and "--tune chose" in err
    chosen = err.split("--tune chose ")[1].split()[0]
    text = out.read_bytes()
    if chosen == "original":
        assert text == (KERNELS / "gemver.c").read_bytes()
    else:
        assert b"polytile opt:" in text


def test_opt_tune_needs_its_sizes(capsys):
    from polytile.cli import main

    rc = main(["opt", str(KERNELS / "gemver.c"), "--tune"])
    err = capsys.readouterr().err
    assert rc != 0 and "--tune-dims n=<int>" in err and "Traceback" not in err


def test_replayed_schedule_code_generation_is_bounded(monkeypatch):
    """A schedule given with --schedule gets a bounded code-generation budget and a located error past it."""
    from polytile.c_optimiser import region
    from polytile.errors import ScheduleError

    _, results = c_runner.optimise(KERNELS / "jacobi-2d.c")
    steps = [s.to_json() for s in results[0].schedule.steps]
    monkeypatch.setattr(region, "REPLAY_CODEGEN_SECONDS", 1e-4)
    with pytest.raises(ScheduleError, match=r"jacobi-2d.c:\d+: code generation of the given schedule took over"):
        c_runner.optimise(KERNELS / "jacobi-2d.c", schedule=steps)
    monkeypatch.undo()
    text, _ = c_runner.optimise(KERNELS / "jacobi-2d.c", schedule=steps)  # the same steps, with time enough
    assert b"polytile opt:" in text
