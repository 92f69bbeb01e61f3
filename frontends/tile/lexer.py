"""Hand-written lexer for the Tile language.

The lexer is a generator: the parser pulls tokens one at a time, so a lexical
error (a stray ``@``) is reported only when parsing reaches it and errors come
out in source order.

Name classes follow the reference: an uppercase initial makes a *tensor or
dimension* name (``UPPER``), anything else (lowercase or ``_``) an *index or
function* name (``LOWER``).  ``#name`` forces ``UPPER`` and ``$Name`` forces
``LOWER``; the sigil is not part of the stored name, and a forced name is never
a keyword (``$default`` is an index called ``default``).

Brackets are always single tokens: ``[[``/``]]`` of attributes are recognised
by the parser as two consecutive brackets, so ``O[i, j]]`` is reported as a
stray ``]`` instead of being mistaken for an attribute close.

Example::

    >>> [t.value for t in tokenize("O[i : N] = +(A[i]);")][:6]
    ['O', '[', 'i', ':', 'N', ']']
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterator, List, Union

from polytile.errors import SourceLocation, TileSyntaxError

KEYWORDS = frozenset({"function", "default", "no_defract"})

# Token kinds.
UPPER = "UPPER"  # tensor / dimension name
LOWER = "LOWER"  # index variable / function name
KEYWORD = "KEYWORD"
INT = "INT"
FLOAT = "FLOAT"
OP = "OP"  # punctuation and operators; value is the operator text
EOF = "EOF"

# Longest match first: every two-character operator is tried before its prefix.
_TWO_CHAR_OPS = ("->", "==", "!=", "<=", ">=", "<<", ">>")
_ONE_CHAR_OPS = frozenset("()[]{},;:+-*/<>=?&|^~")


def _is_digit(ch: str) -> bool:
    # str.isdigit() accepts superscripts and other scripts' digits; Tile is ASCII.
    return "0" <= ch <= "9"


def _is_name_start(ch: str) -> bool:
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z") or ch == "_"


def _is_name_char(ch: str) -> bool:
    return _is_name_start(ch) or _is_digit(ch)


@dataclass(frozen=True)
class Token:
    """One token: its kind, value, 1-based line/column and source offsets.

    ``value`` is the name without any ``#``/``$`` sigil, the operator text,
    or the numeric value; ``text`` is the exact source spelling.

    >>> t = next(tokenize("  #out"))
    >>> (t.kind, t.value, t.text, t.line, t.col)
    ('UPPER', 'out', '#out', 1, 3)
    """

    kind: str
    value: Union[str, int, float]
    text: str
    line: int
    col: int
    start: int
    end: int

    def is_op(self, *ops: str) -> bool:
        """True if this is an operator token spelled as one of ``ops``."""
        return self.kind == OP and self.value in ops

    def is_keyword(self, word: str) -> bool:
        return self.kind == KEYWORD and self.value == word

    def describe(self) -> str:
        """How error messages name this token: ``';'``, ``keyword 'default'``, ``end of input``."""
        if self.kind == EOF:
            return "end of input"
        if self.kind == KEYWORD:
            return f"keyword '{self.text}'"
        return f"'{self.text}'"


class Source:
    """Source text plus a file name; turns offsets and line/col pairs into locations.

    >>> Source("a\\nbc", "f.tile").location(2, 2)
    SourceLocation(file='f.tile', line=2, col=2, text='bc')
    """

    def __init__(self, text: str, filename: str = "<string>"):
        self.text = text
        self.filename = filename
        # Lines are split on '\n' only, matching how the lexer counts them; a
        # trailing '\r' (CRLF files) is dropped from the displayed text.
        self.lines: List[str] = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
        self._line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self._line_starts.append(i + 1)

    def line_col(self, offset: int) -> tuple:
        """1-based (line, column) of a character offset."""
        idx = bisect.bisect_right(self._line_starts, offset) - 1
        return idx + 1, offset - self._line_starts[idx] + 1

    def location(self, line: int, col: int) -> SourceLocation:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return SourceLocation(self.filename, line, col, text)

    def location_at(self, offset: int) -> SourceLocation:
        return self.location(*self.line_col(offset))


class Lexer:
    """Tokenizer over a :class:`Source`; iterate :meth:`tokens` for the token stream.

    >>> [t.kind for t in Lexer(Source("x2 1.5 ->")).tokens()]
    ['LOWER', 'FLOAT', 'OP', 'EOF']
    """

    def __init__(self, source: Source):
        self.source = source

    def _error(self, message: str, offset: int) -> TileSyntaxError:
        return TileSyntaxError(message, self.source.location_at(offset))

    def _make(self, kind: str, value, start: int, end: int) -> Token:
        line, col = self.source.line_col(start)
        return Token(kind, value, self.source.text[start:end], line, col, start, end)

    def _skip_space_and_comments(self, i: int) -> int:
        s = self.source.text
        n = len(s)
        while i < n:
            ch = s[i]
            if ch in " \t\r\n\f\v":
                i += 1
            elif s.startswith("//", i):
                nl = s.find("\n", i)
                i = n if nl < 0 else nl + 1
            elif s.startswith("/*", i):
                close = s.find("*/", i + 2)
                if close < 0:
                    raise self._error("unterminated comment", i)
                i = close + 2
            else:
                break
        return i

    def _number(self, i: int) -> Token:
        s = self.source.text
        n = len(s)
        start = i
        while i < n and _is_digit(s[i]):
            i += 1
        is_float = False
        if i < n and s[i] == ".":
            if i + 1 < n and _is_digit(s[i + 1]):
                i += 1
                while i < n and _is_digit(s[i]):
                    i += 1
                is_float = True
            else:
                raise self._error(
                    f"malformed number '{s[start:i + 1]}': a '.' must be followed by digits", start
                )
        # An exponent needs digits; otherwise '2e' is the integer 2 followed by
        # the name 'e' (which a poly like '2e' would read as 2 * e).
        if i < n and s[i] in "eE":
            j = i + 1
            if j < n and s[j] in "+-":
                j += 1
            if j < n and _is_digit(s[j]):
                while j < n and _is_digit(s[j]):
                    j += 1
                i = j
                is_float = True
        text = s[start:i]
        if is_float:
            return self._make(FLOAT, float(text), start, i)
        return self._make(INT, int(text), start, i)

    def _name(self, i: int) -> Token:
        s = self.source.text
        n = len(s)
        start = i
        sigil = s[i] if s[i] in "#$" else ""
        if sigil:
            i += 1
            if i >= n or not _is_name_start(s[i]):
                cls = "tensor" if sigil == "#" else "index"
                raise self._error(f"expected a name after '{sigil}' (it forces the {cls} name class)", start)
        name_start = i
        while i < n and _is_name_char(s[i]):
            i += 1
        name = s[name_start:i]
        if sigil == "#":
            kind = UPPER
        elif sigil == "$":
            kind = LOWER
        elif name in KEYWORDS:
            kind = KEYWORD
        elif "A" <= name[0] <= "Z":
            kind = UPPER
        else:
            kind = LOWER
        return self._make(kind, name, start, i)

    def tokens(self) -> Iterator[Token]:
        """Yield every token, ending with one ``EOF`` token."""
        s = self.source.text
        n = len(s)
        i = 0
        while True:
            i = self._skip_space_and_comments(i)
            if i >= n:
                # Place EOF just after the last visible character, not on the
                # empty line after a final newline, so "found end of input"
                # errors show a source line with a caret.
                end = len(s.rstrip())
                yield self._make(EOF, "", end, end)
                return
            ch = s[i]
            if _is_digit(ch):
                tok = self._number(i)
            elif _is_name_start(ch) or ch in "#$":
                tok = self._name(i)
            elif s[i:i + 2] in _TWO_CHAR_OPS:
                tok = self._make(OP, s[i:i + 2], i, i + 2)
            elif ch in _ONE_CHAR_OPS:
                tok = self._make(OP, ch, i, i + 1)
            elif ch == "." and i + 1 < n and _is_digit(s[i + 1]):
                raise self._error("a number cannot start with '.'; write a leading 0 (0.5)", i)
            else:
                raise self._error(f"unexpected character {ch!r}", i)
            i = tok.end
            yield tok


def tokenize(text: str, filename: str = "<string>") -> Iterator[Token]:
    """Tokens of ``text`` (a generator; lexical errors raise when reached).

    >>> [t.text for t in tokenize("C[i, j : M, N] // done")]
    ['C', '[', 'i', ',', 'j', ':', 'M', ',', 'N', ']', '']
    """
    return Lexer(Source(text, filename)).tokens()
