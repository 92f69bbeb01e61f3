"""Figures (polytile.plots and the commands that draw them): every kind is rendered to a file and checked.

Each figure is written as PNG (the signature, not a blank image) and where it matters SVG (XML); what
it shows is read back from the returned Figure by the ids polytile gives its artists (``gid``): one
bar per compared candidate, one best-so-far point per tuning trial, one dot per domain point and one
outline per tile, one marker per kernel on the roofline.  matplotlib renders without a display
(PNG through Agg).  Without matplotlib, drawing is an environment error that says how to install it
(CLI exit 3, no traceback), and nothing outside polytile.plots ever imports it.
"""
from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import polytile
from polytile import cli, plots
from polytile import compare as cmp
from polytile import tune as T
from polytile.errors import MatplotlibMissingError, PlotError

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
C_KERNELS = ROOT / "tests" / "c_kernels"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TILE4 = [{"op": "tile", "stmt": "C", "sizes": {"i": 4, "j": 4}}]


def run_cli(capsys, *argv):
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_png(path: Path) -> None:
    """A PNG file that shows something: the signature, and more than a sliver of non-white pixels."""
    from matplotlib.image import imread

    assert path.is_file(), path
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    img = imread(path)
    inked = (img[..., :3] < 0.9).any(axis=-1).mean()
    assert inked > 0.01, f"{path} is (nearly) blank: {inked:.2%} of its pixels are not white"


def assert_svg(path: Path) -> None:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")


def gids(fig, gid: str):
    """The artists of every axes of ``fig`` whose gid is ``gid``."""
    found = []
    for ax in fig.axes:
        for art in list(ax.patches) + list(ax.collections) + list(ax.lines):
            if art.get_gid() == gid:
                found.append(art)
    return found


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def comparison():
    kpar = [{"op": "parallel", "stmt": "C", "loop": "k"}]
    return cmp.compare(EX / "matmul.tile", {"M": 16, "N": 12, "K": 8}, "float32",
                       [cmp.default(), cmp.tiled(4), cmp.fusion("none"), ("kpar", kpar)], repeat=3, warmup=0)


def test_compare_bars_one_bar_and_whisker_per_candidate_that_ran(comparison, tmp_path):
    ran = [r for r in comparison.rows if r.times]
    assert len(ran) == 3 and comparison.row("kpar").check == "illegal"
    fig = plots.compare_bars(comparison, path=tmp_path / "cmp.png")
    assert len(gids(fig, "bar")) == len(ran)
    assert len(gids(fig, "whisker")) == len(ran)
    heights = [b.get_height() for b in gids(fig, "bar")]
    scale = heights[0] / ran[0].median  # the unit (s, ms or µs) follows the times
    assert scale in (1.0, 1e3, 1e6) and heights == pytest.approx([r.median * scale for r in ran])
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert "baseline" in labels and "illegal" in labels
    assert any(t.endswith("x") for t in labels)  # the speedups
    assert_png(tmp_path / "cmp.png")
    # The saved JSON draws the same figure; SVG is XML.
    again = plots.compare_bars(json.loads(comparison.dumps()), path=tmp_path / "cmp.svg")
    assert len(gids(again, "bar")) == len(ran)
    assert_svg(tmp_path / "cmp.svg")


def test_compare_bars_from_a_results_file_every_candidate_ran(tmp_path):
    rows = [{"name": n, "median_s": m, "min_s": m * 0.9, "max_s": m * 1.2, "speedup": 2e-3 / m, "check": "ok"}
            for n, m in (("default", 2e-3), ("a", 1e-3), ("b", 4e-3), ("c", 3e-3))]
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"provenance": {"baseline": "default", "file": "x.tile"}, "rows": rows}))
    fig = plots.compare_bars(path)
    assert len(gids(fig, "bar")) == 4
    with pytest.raises(PlotError, match="CompareResult"):
        plots.compare_bars({"nothing": 1})


def test_compare_plot_command(capsys, tmp_path):
    fig = tmp_path / "mm.png"
    code, out, err = run_cli(capsys, "compare", EX / "matmul.tile", "--dims", "M=16,N=16,K=16", "--tile", "4",
                             "--repeat", "2", "--warmup", "0", "-q", "--plot", fig)
    assert code == 0, err
    assert f"wrote {fig} (figure)" in out
    assert_png(fig)


def test_compare_plot_on_a_c_file(capsys, tmp_path):
    fig = tmp_path / "gemm.png"
    code, out, err = run_cli(capsys, "compare", C_KERNELS / "gemm.c", "--dims", "ni=16,nj=16,nk=16", "--repeat", "1",
                             "--warmup", "0", "-q", "--plot", fig)
    assert code == 0, err
    assert_png(fig)


def test_a_figure_name_is_checked_before_any_work(capsys, tmp_path):
    code, _, err = run_cli(capsys, "compare", EX / "matmul.tile", "--plot", tmp_path / "mm.jpg")
    assert code == 2 and "--plot" in err and ".png, .svg or .pdf" in err
    code, _, err = run_cli(capsys, "compare", EX / "matmul.tile", "--plot", tmp_path / "no" / "dir" / "mm.png")
    assert code == 1 and "does not exist" in err


# ---------------------------------------------------------------------------
# tune
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tuning():
    return T.tune(EX / "matmul.tile", "M=32,N=32,K=32", budget_s=120, max_trials=5, top_k=2, repeat=2,
                  progress=False, cache=False)


def test_tuning_curve_one_point_per_trial(tuning, tmp_path):
    n = len(tuning.trials)
    fig = plots.tuning_curve(tuning, path=tmp_path / "tune.png")
    best, = gids(fig, "best-so-far")
    assert list(best.get_xdata()) == [t.index for t in tuning.trials] and len(best.get_ydata()) == n
    seconds, = gids(fig, "best-so-far-seconds")
    assert list(seconds.get_xdata()) == [t.at_s for t in tuning.trials]
    measured = [t for t in tuning.trials if t.measured and t.ok is not False]
    assert len(gids(fig, "trials")[0].get_offsets()) == len(measured)
    both = [t for t in measured if t.predicted_s]
    assert len(gids(fig, "prediction")[0].get_offsets()) == len(both)
    # The best so far never rises and ends at the best trial's time.
    ys = [y for y in best.get_ydata() if y == y]
    assert ys == sorted(ys, reverse=True) and ys[-1] == pytest.approx(min(t.median_s for t in measured) * 1e3)
    assert_png(tmp_path / "tune.png")


def test_tuning_curve_of_a_format_2_result_has_no_seconds_panel(tuning, tmp_path):
    doc = json.loads(tuning.dumps())
    doc["polytile_tune"] = 2
    for t in doc["trials"]:
        del t["at_s"]
    fig = plots.tuning_curve(doc, path=tmp_path / "old.svg")
    assert len(gids(fig, "best-so-far")[0].get_xdata()) == len(tuning.trials)
    assert not gids(fig, "best-so-far-seconds")
    assert any("no time stamps" in t.get_text() for t in fig.axes[1].texts)
    assert_svg(tmp_path / "old.svg")


def test_tune_plot_command(capsys, tmp_path):
    fig = tmp_path / "tune.png"
    code, out, err = run_cli(capsys, "tune", EX / "matmul.tile", "--dims", "M=16,N=16,K=16", "--trials", "3",
                             "--top-k", "2", "--repeat", "2", "--no-progress", "--no-cache", "--plot", fig)
    assert code == 0, err
    assert f"wrote {fig} (figure)" in err
    assert_png(fig)


# ---------------------------------------------------------------------------
# draw
# ---------------------------------------------------------------------------


def _tiled_matmul():
    return polytile.schedule(EX / "matmul.tile", dims="M=8,N=8,K=8").tile("C", i=4, j=4)


def test_statement_space_of_matmul_8x8_tiled_4x4():
    sp = plots.statement_space(_tiled_matmul())
    assert sp.statement == "S0" and sp.axes == ("i", "j") and sp.fixed == {"k": 0}
    assert len(sp.points) == 64 and sorted(sp.order) == list(range(64))
    assert len(sp.tiles) == 4 and sorted(len(t) for t in sp.tiles) == [16] * 4
    assert sp.tile_loops == ["i_t", "j_t"] and sp.parallel_loop == "i_t"
    # Tiles run in order i_t, j_t: the first is the corner at the origin.
    assert {sp.points[k] for k in sp.tiles[0]} == {(i, j) for i in range(4) for j in range(4)}
    # i_t is parallel: tiles 0 and 2 (i_t = 0 and 1, j_t = 0) run at the same time, as do 1 and 3;
    # point (i, j) of the first runs with (i + 4, j) of the other.
    assert sp.tile_together == [0, 1, 0, 1]
    assert len(sp.wavefronts) == 32
    assert all(len(w) == 2 and sp.points[w[1]] == (sp.points[w[0]][0] + 4, sp.points[w[0]][1]) for w in sp.wavefronts)
    assert sp.arrows_total == 0  # every dependence of S0 is along k, fixed here
    # Along (i, k) at j = 2 the reduction's chain k -> k + 1 shows, once per i.
    ik = plots.statement_space(_tiled_matmul(), axes=["i", "k"], fixed={"j": 2})
    assert ik.fixed == {"j": 2} and ik.arrows_total == 8 * 7
    assert all(ik.points[b] == (ik.points[a][0], ik.points[a][1] + 1) for a, b in ik.arrows)


def test_iteration_space_figure_counts(tmp_path):
    fig = plots.iteration_space(_tiled_matmul(), path=tmp_path / "mm.png")
    assert len(gids(fig, "tile")) == 4
    points, = gids(fig, "points")
    assert len(points.get_offsets()) == 64
    wavefronts, = gids(fig, "wavefronts")
    assert len(wavefronts.get_segments()) == 16  # 32 wavefronts, every second one drawn
    assert_png(tmp_path / "mm.png")
    fig = plots.iteration_space(_tiled_matmul(), axes=["i", "k"], path=tmp_path / "mm-ik.svg")
    arrows, = gids(fig, "dependences")
    assert arrows.N == 56
    assert_svg(tmp_path / "mm-ik.svg")


def test_one_dimensional_statement_and_slices(tmp_path):
    s = polytile.schedule("function (A[N]) -> (B) { B = A * 2; }", dims="N=10")
    sp = plots.statement_space(s)
    assert len(sp.axes) == 1 and len(sp.points) == 10 and sp.fixed == {}
    plots.draw_space(sp, path=tmp_path / "one.png")
    assert_png(tmp_path / "one.png")
    s = polytile.schedule(EX / "matmul.tile", dims="M=8,N=8,K=8")
    assert plots.statement_space(s, fixed={"k": 3}).fixed == {"k": 3}
    with pytest.raises(PlotError, match="holds no point"):
        plots.statement_space(s, fixed={"k": 99})
    with pytest.raises(PlotError, match="has no iterator 'q'"):
        plots.statement_space(s, axes=["q"])
    with pytest.raises(PlotError, match="more than 50"):
        plots.statement_space(s, max_points=50)


def test_draw_command_with_a_saved_schedule(capsys, tmp_path):
    steps = tmp_path / "tile4.json"
    steps.write_text(json.dumps(TILE4))
    fig = tmp_path / "mm.png"
    code, out, err = run_cli(capsys, "draw", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--schedule", steps,
                             "-o", fig)
    assert code == 0, err
    assert "64 points of S0 over (i, j) at k=0; 4 tile(s) (i_t, j_t); parallel loop i_t" in out
    assert f"wrote {fig}" in out
    assert_png(fig)


def test_draw_command_with_fusion_and_a_chosen_statement(capsys, tmp_path):
    fig = tmp_path / "fused.png"
    code, out, err = run_cli(capsys, "draw", EX / "matmul_bias_relu.tile", "--dims", "M=8,N=6,K=4", "--fusion", "max",
                             "--stmt", "S0", "--axes", "j,k", "--slice", "i=1", "-o", fig)
    assert code == 0, err
    assert "24 points of S0 over (j, k) at i=1" in out
    assert_png(fig)


def test_draw_command_on_a_c_file(capsys, tmp_path):
    fig = tmp_path / "jacobi.png"
    code, out, err = run_cli(capsys, "draw", C_KERNELS / "jacobi-2d.c", "--dims", "tsteps=4,n=10", "-o", fig)
    assert code == 0, err
    assert "32 points of S0 over (t, i) at j=1" in out and "dependence" in out
    assert_png(fig)
    # The file's own order: no tiles, no parallel loop; the sweeps' dependences through S1 still show.
    svg = tmp_path / "jacobi.svg"
    code, out, err = run_cli(capsys, "draw", C_KERNELS / "jacobi-2d.c", "--dims", "tsteps=4,n=10", "--original",
                             "-o", svg)
    assert code == 0, err
    assert "0 tile(s)" in out and "no parallel loop" in out
    assert_svg(svg)


@pytest.mark.parametrize("argv, code, message", [
    (["draw", EX / "matmul.tile", "--dims", "M=100,N=100,K=4"], 1, "10000 points of S0 to draw, more than 4096"),
    (["draw", C_KERNELS / "jacobi-2d.c"], 1, "--dims n=8,tsteps=8"),
    (["draw", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--axes", "i,q"], 1, "has no iterator 'q'"),
    (["draw", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--original", "--fusion", "max"], 2, "drop --fusion"),
    (["draw", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--slice", "k"], 2, "expected NAME=INTEGER"),
])
def test_draw_errors_are_messages(argv, code, message, capsys, tmp_path):
    got, _, err = run_cli(capsys, *argv, "-o", tmp_path / "x.png")
    assert got == code and message in err and "Traceback" not in err
    assert not (tmp_path / "x.png").exists()


# ---------------------------------------------------------------------------
# roofline
# ---------------------------------------------------------------------------


def test_roofline_places_every_kernel(tmp_path):
    hw = polytile.hardware.load("x86-avx512")
    ks = [plots.KernelPoint("stream", 2e6, 12e6, predicted_s=1e-3, measured_s=2e-3),
          plots.KernelPoint("gemm", 2e9, 1.2e7, predicted_s=1e-2),
          plots.KernelPoint("dgemm", 2e9, 2.4e7, predicted_s=2e-2, dtype="float64")]
    fig = plots.roofline(hw, ks, peak=1000.0, path=tmp_path / "roof.png")
    assert len(gids(fig, "kernel")[0].get_offsets()) == 3
    assert len(gids(fig, "measured")[0].get_offsets()) == 1
    assert len(gids(fig, "slope")) == len([lv for lv in hw.memory if lv.bandwidth_gbs])
    assert len(gids(fig, "ceiling")) == 3  # float32, float64 (dgemm) and the measured peak
    assert_png(tmp_path / "roof.png")
    rows = plots.kernel_rows(hw, ks)
    assert rows[0]["intensity"] == pytest.approx(2e6 / 12e6)
    # (plots.roofline is the function; its module is polytile.plots.roofline)
    roof = sys.modules["polytile.plots.roofline"].roof(hw, 2e6 / 12e6)
    assert rows[0]["roof_gflops"] == pytest.approx(roof) and rows[0]["fraction_of_roof"] == pytest.approx(1.0 / roof)


def test_kernel_point_from_the_cost_model():
    s = polytile.schedule(EX / "matmul.tile", dims="M=64,N=64,K=64", hardware="x86-avx512")
    k = plots.kernel_point(s, "x86-avx512", name="mm")
    assert k.flops == 2 * 64 ** 3 and k.dram_bytes > 0 and k.predicted_s > 0 and k.dtype == "float32"
    assert k.intensity == pytest.approx(k.flops / k.dram_bytes)


def test_roofline_command(capsys, tmp_path):
    fig, out_json = tmp_path / "roof.png", tmp_path / "roof.json"
    code, out, err = run_cli(capsys, "roofline", f"{EX / 'matmul.tile'}:M=32,N=32,K=32", EX / "softmax.tile",
                             "--dims", "M=64,N=64", "--run", "--repeat", "2", "--warmup", "0", "--peak", "400",
                             "-o", fig, "--json", out_json)
    assert code == 0, err
    assert "matmul 32x32x32" in out and "softmax 64x64" in out and "of roof" in out
    doc = json.loads(out_json.read_text())
    assert [k["name"] for k in doc["kernels"]] == ["matmul 32x32x32", "softmax 64x64"]
    assert all(k["measured_gflops"] > 0 and k["intensity"] > 0 for k in doc["kernels"])
    assert doc["measured_peak_gflops"] == 400
    assert_png(fig)


def test_roofline_command_places_measured_results(capsys, tmp_path, comparison):
    results = tmp_path / "mm.json"
    comparison.save(results)
    code, out, err = run_cli(capsys, "roofline", "--measured", results, "--hardware", "x86-avx512",
                             "-o", tmp_path / "m.svg")
    assert code == 0, err
    for name in ("default", "tile4", "isl-none"):
        assert f"mm: {name}" in out  # named after the results file (the API's provenance names no program file)
    assert "kpar" not in out  # illegal: never measured
    assert_svg(tmp_path / "m.svg")
    # A GPU descriptor has a roofline but no cost model to place kernels with.
    code, _, err = run_cli(capsys, "roofline", "--hardware", "nvidia-h100", "-o", tmp_path / "gpu.png")
    assert code == 0, err
    assert_png(tmp_path / "gpu.png")


# ---------------------------------------------------------------------------
# without matplotlib
# ---------------------------------------------------------------------------


@pytest.fixture
def no_matplotlib(monkeypatch):
    """Every `import matplotlib...` fails, as in an environment without the extra."""
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_missing_matplotlib_says_how_to_install_it(no_matplotlib, comparison):
    with pytest.raises(MatplotlibMissingError, match=r"pip install -e '\.\[plots\]'") as info:
        plots.compare_bars(comparison)
    assert isinstance(info.value, ImportError) and isinstance(info.value, polytile.PolytileError)
    # The numbers of a figure need no matplotlib.
    assert len(plots.statement_space(_tiled_matmul()).tiles) == 4


def test_missing_matplotlib_on_the_command_line(no_matplotlib, capsys, tmp_path):
    code, out, err = run_cli(capsys, "draw", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "-o", tmp_path / "x.png")
    assert code == 3 and "pip install -e '.[plots]'" in err and "Traceback" not in err
    # compare checks before measuring: nothing is printed but the error.
    code, out, err = run_cli(capsys, "compare", EX / "matmul.tile", "--plot", tmp_path / "x.png")
    assert code == 3 and out == "" and "matplotlib" in err
    # The roofline's table needs no figure, so no matplotlib.
    code, out, err = run_cli(capsys, "roofline", "--hardware", "x86-avx512")
    assert code == 0 and "DRAM" in out


def test_the_core_never_imports_matplotlib(tmp_path):
    code = (
        "import sys, numpy as np, polytile\n"
        "from polytile import cli, plots\n"  # the plots package too: matplotlib only when drawing
        f"k = polytile.compile({str(EX / 'matmul.tile')!r})\n"
        "a = np.ones((4, 3), np.float32); b = np.ones((3, 5), np.float32)\n"
        "assert (k(a, b) == 3).all()\n"
        f"assert cli.main(['run', {str(EX / 'matmul.tile')!r}, '--dims', 'M=8,N=8,K=8', '--repeat', '1']) == 0\n"
        "assert not [m for m in sys.modules if m.startswith('matplotlib')], 'matplotlib was imported'\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert res.returncode == 0, res.stderr


# ---------------------------------------------------------------------------
# help and doctests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["draw", "roofline"])
def test_help_teaches_with_examples(command, capsys):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0 and "examples:" in out and f"polytile {command} " in out


def test_plots_doctests(monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name examples/matmul.tile
    modules = [plots] + [sys.modules[f"polytile.plots.{m}"] for m in ("_mpl", "draw", "roofline")]
    for module in modules:
        assert doctest.testmod(module).failed == 0, module.__name__
