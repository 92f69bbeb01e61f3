"""The documentation names real files and shows commands polytile accepts.

README.md and docs/*.md are checked the cheap way, without running anything:

* every repository path in backticks (a token with a ``/`` that ends in ``/`` or
  in a file extension, such as ``polytile/cost/`` or ``tests/c_kernels/gemm.c``)
  exists, and every relative Markdown link points at an existing file (and
  heading);
* every line of a ```` ```bash ```` block that starts with ``polytile `` and names
  only files that exist (output files of ``-o`` and friends aside) parses with
  the command's own argument parser.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from polytile.cli.parser import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^\s*```(\w*)\s*$")
_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
# A relative path: name characters and slashes, no spaces, globs, placeholders or options.
_PATHLIKE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/]*$")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]+$")
#: Paths inside other projects that the documents cite (PlaidML's Python package).
_EXTERNAL_PREFIXES = ("plaidml/",)
#: Options whose value is a file the command writes (or a directory it creates).
_OUTPUT_OPTIONS = {"-o", "--output", "--json", "--copy"}


def _rel(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def _split(doc: Path) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The prose lines of ``doc`` (outside fenced blocks) and its fenced lines as (language, line)."""
    prose, fenced = [], []
    lang = None
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = _FENCE.match(line)
        if m:
            lang = m.group(1) if lang is None else None
            continue
        if lang is None:
            prose.append(line)
        else:
            fenced.append((lang, line))
    return prose, fenced


def _is_repo_path(token: str) -> bool:
    if "/" not in token or not _PATHLIKE.match(token) or token.startswith(("../", "./") + _EXTERNAL_PREFIXES):
        return False
    if "//" in token:
        return False
    return token.endswith("/") or bool(_EXTENSION.search(token.rsplit("/", 1)[-1]))


def _named_paths() -> Iterator[Tuple[str, str]]:
    for doc in DOCS:
        prose, _ = _split(doc)
        for line in prose:
            for span in _SPAN.findall(line):
                for token in span.split():
                    token = token.rstrip(",;:")
                    if _is_repo_path(token):
                        yield _rel(doc), token


def _links() -> Iterator[Tuple[str, str]]:
    for doc in DOCS:
        prose, _ = _split(doc)
        for line in prose:
            for target in _LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # a URL
                yield _rel(doc), target


def _polytile_lines() -> Iterator[Tuple[str, str]]:
    for doc in DOCS:
        _, fenced = _split(doc)
        for lang, line in fenced:
            if lang == "bash" and line.startswith("polytile "):
                yield _rel(doc), line


def _files_named(argv: List[str]) -> List[str]:
    """The files a command line reads: arguments that look like files, except the values of output options."""
    out = []
    for prev, arg in zip([""] + argv, argv):
        if prev in _OUTPUT_OPTIONS or arg.startswith("-"):
            continue
        if "/" in arg or _EXTENSION.search(arg):
            out.append(arg)
    return out


def test_docs_exist():
    names = {p.name for p in DOCS}
    assert {"README.md", "architecture.md", "c-optimiser.md", "cost-model.md", "cuda.md",
            "tile-language.md"} <= names


def test_named_paths_exist():
    named = list(_named_paths())
    assert len(named) > 50, "the path pattern no longer finds the documents' paths"
    missing = [f"{doc}: `{path}`" for doc, path in named if not (ROOT / path).exists()]
    assert not missing, "paths named in the documentation do not exist:\n" + "\n".join(missing)


def _anchors(doc: Path) -> set:
    """The anchors GitHub makes of ``doc``'s headings: lower case, punctuation dropped, spaces to hyphens."""
    prose, _ = _split(doc)
    out = set()
    for line in prose:
        m = re.match(r"^#+\s+(.*?)\s*$", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-"))
    return out


def test_links_resolve():
    links = list(_links())
    assert links
    missing = []
    for doc, target in links:
        path, _, anchor = target.partition("#")
        dest = (ROOT / doc).parent / path if path else ROOT / doc
        if not dest.exists():
            missing.append(f"{doc}: ({target}): no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            missing.append(f"{doc}: ({target}): no such heading")
    assert not missing, "broken links:\n" + "\n".join(missing)


@pytest.mark.parametrize("doc,line", list(_polytile_lines()))
def test_polytile_commands_parse(doc, line):
    # Parsing does not open files, so a line that uses a file an earlier line makes is checked too.
    argv = shlex.split(line, comments=True)[1:]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            build_parser().parse_args(argv)
        except SystemExit as e:  # --help exits 0; a usage error exits 2
            assert e.code == 0, f"{doc}: {line!r} does not parse: {err.getvalue().strip()}"


def test_readme_commands_are_checked():
    """Most of the README's polytile lines name only repository files (or files an earlier line writes)."""
    lines = [line for doc, line in _polytile_lines() if doc == "README.md"]
    in_repo = [line for line in lines
               if all((ROOT / f).exists() for f in _files_named(shlex.split(line, comments=True)[1:]))]
    assert len(lines) >= 10 and len(in_repo) >= 10


def test_ci_runs_the_readme_test_command():
    """CI runs the README's test command as written there."""
    _, fenced = _split(ROOT / "README.md")
    assert ("bash", "python -m pytest -q -n auto") in fenced
    assert "\npython -m pytest -q -n auto\n" in (ROOT / ".ci" / "run").read_text()
