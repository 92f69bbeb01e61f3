"""papers/: every reproduction runs (``run_all.py --quick``), and every committed README quotes its JSON.

The quick run writes into a temporary folder (never over the committed results); its figures are real
PNGs with something drawn.  For the committed results, each paper's README block must be exactly what
its script's ``render`` makes of the committed ``results.json``, so no quoted number can drift from
the data that produced it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAPERS_DIR = ROOT / "papers"
PAPERS = sorted(p.name for p in PAPERS_DIR.iterdir() if (p / "run.py").is_file())
PNG = b"\x89PNG\r\n\x1a\n"

sys.path.insert(0, str(PAPERS_DIR))
import paperlib  # noqa: E402
import run_all  # noqa: E402  (papers/run_all.py: the index and paper_module)

_module = run_all.paper_module


def _drawn(path: Path) -> bool:
    """A PNG whose pixels are not all one colour."""
    import matplotlib.image

    img = matplotlib.image.imread(path)
    return img.reshape(-1, img.shape[-1]).std(axis=0).max() > 0.01


def test_at_least_four_reproductions_listed_with_their_committed_headlines():
    assert len(PAPERS) >= 4
    block = paperlib.readme_block(PAPERS_DIR / "README.md")
    assert block == run_all.index(), "papers/README.md's table is stale: python papers/run_all.py --index"
    for name in PAPERS:
        assert f"({name}/)" in block


def test_quick_run_of_every_paper(tmp_path):
    r = subprocess.run([sys.executable, str(PAPERS_DIR / "run_all.py"), "--quick", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    for name in PAPERS:
        out = tmp_path / name
        data = json.loads((out / "results.json").read_text())
        assert data["quick"] is True and data["provenance"]["machine"]["cpu_count"] >= 1
        assert data["figures"], name
        for fig in data["figures"]:
            raw = (out / fig).read_bytes()
            assert raw.startswith(PNG), fig
            assert _drawn(out / fig), f"{name}/{fig} is blank"
        # The quick run left the committed files alone.
        assert not (PAPERS_DIR / name / "results.json").exists() or \
            json.loads((PAPERS_DIR / name / "results.json").read_text())["quick"] is False


@pytest.mark.parametrize("name", PAPERS)
def test_readme_quotes_the_committed_results(name):
    folder = PAPERS_DIR / name
    readme = folder / "README.md"
    block = paperlib.readme_block(readme)
    assert block is not None, f"{readme} has no generated results block"
    committed = folder / "results.json"
    assert committed.is_file(), f"{name}: no committed results.json (run python papers/{name}/run.py)"
    data = json.loads(committed.read_text())
    assert data["quick"] is False
    assert block == _module(name).render(data), f"{readme}: the results block differs from render(results.json)"
    for fig in data["figures"]:
        assert (folder / fig).read_bytes().startswith(PNG), f"{name}/{fig} missing"
        assert f"({fig})" in readme.read_text(), f"{readme} does not show {fig}"


def test_quick_refuses_to_write_into_the_paper_folder():
    r = subprocess.run([sys.executable, str(PAPERS_DIR / "roofline" / "run.py"), "--quick"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--out" in r.stderr


def test_a_paper_on_dask_workers(tmp_path):
    """--workers runs a script's Tile measurements on Dask workers (issue 17: papers use the executor too)."""
    out = tmp_path / "roofline"
    r = subprocess.run([sys.executable, str(PAPERS_DIR / "roofline" / "run.py"), "--quick", "--out", str(out),
                        "--workers", "local:2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    assert data["provenance"]["executor"] == "local:2"
    assert all(k["check"] == "ok" for k in data["kernels"])
