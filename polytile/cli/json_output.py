"""``--json`` of ``run``, ``show``, ``deps``, ``hw`` and ``opt``: one JSON document on stdout, errors included.

Every document starts with ``"schema"`` (``"polytile.<command>/<version>"``, :data:`SCHEMAS`) and
``"polytile_version"``; what follows is the command's own (docs/json-output.md lists every key, and
tests/test_json_output.py holds the code to that list).  The commands build their documents next to
their text output, from the same data; this module is what they share:

* :func:`document` -- the envelope;
* :class:`Session` -- one command line's run: with ``--json`` everything a command prints goes to
  stderr while it runs, so stdout carries the one document :func:`emit` writes and nothing else;
* :func:`error_document` -- a failure as ``{"schema": "polytile.error/1", ..., "error": {...}}``,
  printed on stdout by :meth:`Session.finish` when a ``--json`` command fails without a document of
  its own (the message still goes to stderr and the exit code is the usual one).

    >>> document("hw.list", presets=[])["schema"]
    'polytile.hw.list/1'
"""
from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import PurePath
from typing import Any, Dict, Iterator, Optional, Sequence

from ..errors import PolytileError
from ..version import __version__

#: Where the documents are described (named in every --json help text).
DOC = "docs/json-output.md"

#: Schema of each document.  A version changes when a key is removed or changes meaning; adding keys
#: keeps it (scripts should ignore keys they do not know).
SCHEMAS = {
    "run": "polytile.run/1",
    "show": "polytile.show/1",
    "deps": "polytile.deps/1",
    "hw.show": "polytile.hw.show/1",
    "hw.list": "polytile.hw.list/1",
    "opt": "polytile.opt/1",
    "error": "polytile.error/1",
}

#: The commands that take --json (for reading it off a command line argparse rejected).
JSON_COMMANDS = ("run", "show", "deps", "hw", "opt")

#: Exit code -> the error document's "kind" (the error contract of polytile.cli).
KINDS = {1: "user", 2: "usage", 3: "environment", 70: "internal", 130: "interrupted"}


def add_json_option(p, what: str) -> None:
    """``--json`` on a command's parser; ``what`` says in a few words what the document holds.

    >>> import argparse; p = argparse.ArgumentParser(); add_json_option(p, "the timings")
    >>> p.parse_args(["--json"]).json
    True
    """
    p.add_argument("--json", action="store_true",
                   help=f"print one JSON document on stdout instead of the text: {what}.  Keys and types: "
                        f"{DOC}; notes stay on stderr; a failure prints a JSON error document (schema "
                        f"{SCHEMAS['error']}) and exits with the usual code")


def document(command: str, /, **body: Any) -> Dict[str, Any]:
    """The document of ``command`` (a key of :data:`SCHEMAS`): the envelope, then ``body``.

    >>> sorted(document("run", file="m.tile"))
    ['file', 'polytile_version', 'schema']
    """
    return {"schema": SCHEMAS[command], "polytile_version": __version__, **body}


def plain(value: Any) -> Any:
    """``value`` as JSON data: tuples and sets as lists, paths as text, numpy scalars as Python numbers, and
    numbers that are not finite as the strings "inf", "-inf" and "nan" (JSON has none; compare's files
    write them the same way).

    >>> plain({"t": (1, 2.5), "e": float("inf")})
    {'t': [1, 2.5], 'e': 'inf'}
    """
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if hasattr(value, "item") and not isinstance(value, (int, float)):  # a numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def dumps(doc: Dict[str, Any]) -> str:
    """The JSON text of ``doc`` (indented; strictly JSON: no NaN or Infinity literals).

    >>> dumps({"a": float("nan")})
    '{\\n  "a": "nan"\\n}'
    """
    return json.dumps(plain(doc), indent=2, allow_nan=False)


# ---------------------------------------------------------------------------
# Errors as documents
# ---------------------------------------------------------------------------


def error_document(command: Optional[str], exit_code: int, error: Optional[BaseException] = None,
                   message: Optional[str] = None, type_name: Optional[str] = None) -> Dict[str, Any]:
    """The document of a failed command: its kind (by exit code), the error's class, message and place.

    >>> d = error_document("run", 1, PolytileError("no such Tile file: x.tile"))
    >>> d["error"]["kind"], d["error"]["type"], d["error"]["message"], d["exit_code"]
    ('user', 'PolytileError', 'no such Tile file: x.tile', 1)
    """
    location = None
    if isinstance(error, PolytileError):
        text = error.message
        if error.loc is not None:
            location = {"file": error.loc.file, "line": error.loc.line, "column": error.loc.col,
                        "source_line": error.loc.text.rstrip("\n") or None}
    elif error is not None:
        text = str(error)
    else:
        text = ""
    if message is not None:
        text = message
    kind = KINDS.get(exit_code, "user" if exit_code else "none")
    return document("error", command=command, exit_code=exit_code,
                    error={"kind": kind, "type": type_name or (type(error).__name__ if error is not None else None),
                           "message": text.strip() or kind, "location": location})


def command_of(argv: Sequence[str]) -> Optional[str]:
    """The --json command of a command line (its first word that is not an option), or None without --json.

    Used when argparse rejected the line, so nothing parsed it.  ``tune --json`` names a file and
    does not count.

    >>> command_of(["-v", "run", "x.tile", "--json", "--bad"]), command_of(["tune", "x", "--json", "o.json"])
    ('run', None)
    """
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] not in JSON_COMMANDS:
        return None
    rest = list(argv)[list(argv).index(words[0]) + 1:]
    rest = rest[:rest.index("--")] if "--" in rest else rest
    return words[0] if "--json" in rest else None


# ---------------------------------------------------------------------------
# One command line's run
# ---------------------------------------------------------------------------


class Session:
    """What ``polytile.cli.main`` knows about the JSON output of one command line.

    ``enabled`` once the arguments ask for --json; then :meth:`capturing` sends whatever the command
    prints to stderr, :func:`emit` writes the document to the real stdout, and :meth:`finish` writes
    an error document when the command failed without writing one.
    """

    def __init__(self) -> None:
        self.enabled = False
        self.command: Optional[str] = None
        self.stdout = None  # the stream the document goes to (sys.stdout when the command started)
        self.emitted = False
        self.error: Optional[BaseException] = None
        self.message: Optional[str] = None
        self.type_name: Optional[str] = None

    def enable(self, command: str) -> None:
        self.enabled, self.command = True, command
        if self.stdout is None:
            self.stdout = sys.stdout

    def failed(self, error: Optional[BaseException] = None, message: Optional[str] = None,
               type_name: Optional[str] = None) -> None:
        """Record why the command failed (the last call wins: the one nearest the exit); ``message`` and
        ``type_name`` replace the error's own."""
        self.error, self.message, self.type_name = error, message, type_name

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """While the command runs: this session is the one :func:`emit` writes to, and with --json
        anything printed to stdout goes to stderr instead."""
        global _active
        previous, _active = _active, self
        try:
            if self.enabled:
                self.stdout = sys.stdout
                with contextlib.redirect_stdout(sys.stderr):
                    yield
            else:
                yield
        finally:
            _active = previous

    def write(self, doc: Dict[str, Any]) -> None:
        out = self.stdout if self.stdout is not None else sys.stdout
        out.write(dumps(doc) + "\n")
        out.flush()
        self.emitted = True

    def finish(self, code: int) -> None:
        """After the command: a failure without a document of its own gets the error document."""
        if not self.enabled or self.emitted or code == 0:
            return
        if code == 130:  # whatever error followed a Ctrl-C, the user interrupted the run
            doc = error_document(self.command, code, KeyboardInterrupt(), "interrupted")
        else:
            doc = error_document(self.command, code, self.error, self.message, self.type_name)
        try:
            self.write(doc)
        except (OSError, ValueError):  # stdout closed (a reader that left): the exit code still says it
            pass


_active: Optional[Session] = None


def emit(doc: Dict[str, Any]) -> None:
    """Print a command's document: to the stdout of the running command line (stderr has the rest), or
    to ``sys.stdout`` when a handler is called outside ``polytile.cli.main``.

    >>> emit({"schema": "polytile.hw.list/1", "presets": []})
    {
      "schema": "polytile.hw.list/1",
      "presets": []
    }
    """
    if _active is not None:
        _active.write(doc)
    else:
        sys.stdout.write(dumps(doc) + "\n")
        sys.stdout.flush()
