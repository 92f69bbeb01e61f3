"""Short CI versions of the fuzz campaigns in ``tests/fuzz/`` (issue 12).

* Every file of ``tests/fuzz/corpus/`` (inputs the front-end fuzzer kept because
  they reached a new error path) goes through ``parse`` + ``sema.check``: the
  result must be success or a ``PolytileError`` (a ``TileSyntaxError`` with a
  location), never another exception.
* 40 random programs from ``tests/fuzz/gen_programs.py`` (fixed seeds) are
  checked three ways: ``polytile.compile(text, **opts)`` for default,
  ``fusion="smart"`` and ``fusion="max"`` against ``polytile.reference`` and
  against the generator's own numpy evaluation.  Seeds whose programs hit a
  known, recorded polytile bug (``tests/fuzz/FINDINGS.md``) are skipped with
  the finding's name.

The long campaigns: ``python tests/fuzz/campaign_programs.py --n 10000 --seed S
--json out.json`` and ``python tests/fuzz/fuzz_frontend.py --n 100000 --seed S``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parent / "fuzz"
sys.path.insert(0, str(FUZZ))

from campaign_programs import check_case  # noqa: E402
from fuzz_frontend import run_one  # noqa: E402
from gen_programs import describe, generate  # noqa: E402

CORPUS = sorted((FUZZ / "corpus").glob("*.tile"))

# Seeds of the short campaign whose programs trip a recorded finding (see FINDINGS.md).
KNOWN = {}
SEEDS = [s for s in range(40)]


def test_corpus_is_not_empty():
    assert len(CORPUS) >= 20


def test_corpus_replays_through_the_front_end():
    bad = []
    for path in CORPUS:
        text = path.read_text(encoding="utf-8", errors="surrogatepass")
        outcome, cls, msg, tb = run_one(text, deep=False)
        if outcome == "bad":
            bad.append(f"{path.name}: {cls}: {msg}\n{tb}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program_three_ways(seed, tmp_path, monkeypatch):
    if seed in KNOWN:
        pytest.skip(KNOWN[seed])
    case = generate(seed)
    res = check_case(case, seed, options=("default", "smart", "max"))
    assert res["outcome"] in ("pass", "expected_error"), (
        f"{res['outcome']}\n{describe(case)}\n" +
        "\n".join(f"  {opt}: {o} {detail}" for opt, (o, detail) in res["options"].items() if o != "pass"))
