"""A C file as the frontend sees it: preprocessed text for pycparser, and a way back to the original.

pycparser parses preprocessed C only (no comments, no directives but
``#pragma`` and line markers).  :func:`load` produces that text:

* When the file has no preprocessor directive besides ``#pragma`` (and no
  GNU keyword or line continuation), comments are blanked out in place --
  replaced by spaces, newlines kept -- so every line and column of the parsed
  text *is* the original's.
* Otherwise the system preprocessor runs (``cpp``, else ``gcc -E``/``cc -E``/
  ``clang -E``; a list-argument subprocess, never a shell) with
  ``-nostdinc`` and our fake libc headers (``fake_libc/``: declarations
  pycparser can read, unlike glibc's), reading the file on stdin from the
  file's directory so quoted includes resolve.  ``#pragma scop`` survives
  preprocessing; line markers (``# 12 "<stdin>"``) give original line numbers
  (pycparser itself follows them), and columns are recovered by aligning the
  tokens of the preprocessed line with the original line's.

Integer-constant macros (``#define N 1024``) are problem sizes: they must stay
*names* so that a Scop can keep them as parameters.  Their final values are
read with ``cpp -dM``; before the real preprocessing run every use of such a
macro (outside ``#if``-family lines) is renamed to ``__pt_m_<NAME>`` so cpp
leaves it alone, and renamed back in cpp's output.  Derived macros
(``#define N2 (N*2)``) then expand to expressions over the name ``N``.
"""
from __future__ import annotations

import difflib
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from polytile.errors import PolytileError, SourceLocation

from .affine import c_int_literal

FAKE_LIBC = Path(__file__).resolve().with_name("fake_libc")

# GNU spellings pycparser does not know, neutralised during preprocessing.
GNU_DEFINES = ("__attribute__(x)=", "__restrict=restrict", "__restrict__=restrict", "__inline=inline",
               "__inline__=inline", "__extension__=", "__asm__(x)=", "__asm(x)=", "__volatile__=volatile",
               "__const=const", "__signed__=signed")
_GNU_WORD = re.compile(r"\b__(attribute__|restrict|restrict__|inline|inline__|extension__|asm__|asm|volatile__|"
                       r"const|signed__)\b")
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z_]\w*)", re.M)
_MACRO_PREFIX = "__pt_m_"


class CFrontendError(PolytileError):
    """The C frontend cannot model (or cannot read) a construct; ``construct`` names it.

    The message carries ``file:line:col``, and the rendered error shows the
    source line with a caret under the construct.
    """

    def __init__(self, message: str, loc: Optional[SourceLocation] = None, construct: str = ""):
        self.construct = construct
        super().__init__(message, loc)


@dataclass
class Source:
    """One C file: the original (for locations and byte ranges) and the text pycparser parses."""

    path: str
    raw: bytes
    lines: List[str]  # original lines, without line terminators
    line_starts: List[int]  # byte offset of each original line
    parse_text: str
    used_cpp: bool
    macros: Dict[str, int] = field(default_factory=dict)  # integer macros kept as names, with their values
    # cpp path only: preprocessed lines and (file, original line) -> preprocessed line index
    pp_lines: List[str] = field(default_factory=list)
    line_map: Dict[Tuple[str, int], int] = field(default_factory=dict)

    MAIN = "<stdin>"  # the file name cpp gives the main file (it reads it from stdin)

    def is_main(self, file: Optional[str]) -> bool:
        return file in (None, "", self.path, self.MAIN)

    # -- locations -------------------------------------------------------------
    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""

    def location(self, coord) -> Optional[SourceLocation]:
        """A :class:`SourceLocation` in the original file for a pycparser coordinate."""
        if coord is None:
            return None
        file, line, col = getattr(coord, "file", None), int(coord.line or 0), int(coord.column or 1)
        if not self.is_main(file):
            text = ""
            try:
                text = Path(file).read_text(errors="replace").splitlines()[line - 1]
            except (OSError, IndexError):
                pass
            return SourceLocation(file, line, col, text)
        return SourceLocation(self.path, line, self.original_column(line, col, file), self.line_text(line))

    def original_column(self, line: int, col: int, file: Optional[str] = None) -> int:
        """The original column of preprocessed column ``col`` on original line ``line``."""
        if not self.used_cpp:
            return col
        k = self.line_map.get((file or self.MAIN, line))
        if k is None:
            return col
        return align_column(self.pp_lines[k], self.line_text(line), col)

    def offset(self, line: int, col: int) -> int:
        """Byte offset in the original file of 1-based ``line``/``col`` (columns count characters)."""
        if line > len(self.line_starts):
            return len(self.raw)
        return self.line_starts[line - 1] + len(self.line_text(line)[: col - 1].encode("utf-8"))

    def line_end(self, line: int) -> int:
        """Byte offset just past line ``line`` (its newline included)."""
        return self.line_starts[line] if line < len(self.line_starts) else len(self.raw)

    def error(self, coord, message: str, construct: str = "") -> CFrontendError:
        return CFrontendError(message, self.location(coord), construct)


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def load(path: str) -> Source:
    """Read ``path`` and produce the text pycparser will parse (see module docstring)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise CFrontendError(f"no such C file: {path}") from None
    except OSError as e:
        raise CFrontendError(f"cannot read {path}: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CFrontendError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    lines = text.split("\n")
    starts, pos = [], 0
    for ln in lines:
        starts.append(pos)
        pos += len(ln.encode("utf-8")) + 1
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    # A carriage return becomes a space: same columns, and pycparser's lexer accepts it.
    clean = blank_comments(text.replace("\r", " "))
    directives = {m.group(1) for m in _DIRECTIVE.finditer(clean)} - {"pragma"}
    src = Source(str(path), raw, lines, starts, clean, False)
    if directives or "\\\n" in text or _GNU_WORD.search(clean):
        _preprocess(src, p, clean)
    return src


def blank_comments(text: str) -> str:
    """``text`` with every comment replaced by spaces (newlines kept); string and char literals untouched."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        else:
            i += 1
    return "".join(out)


def _preprocessor() -> List[str]:
    exe = shutil.which("cpp")
    if exe:
        return [exe]
    for cc in ("gcc", "cc", "clang"):
        exe = shutil.which(cc)
        if exe:
            return [exe, "-E"]
    raise CFrontendError("the file needs preprocessing (#include/#define) but no C preprocessor was found "
                         "(install cpp, gcc or clang)")


def _run_cpp(cmd: List[str], text: str, cwd: Path, what: str) -> str:
    try:
        r = subprocess.run(cmd, input=text, capture_output=True, text=True, cwd=str(cwd), timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CFrontendError(f"running the C preprocessor failed: {e}") from None
    if r.returncode != 0:
        msg = r.stderr.strip().replace("<stdin>", what)
        raise CFrontendError(f"the C preprocessor rejected {what}:\n{msg}")
    return r.stdout


_TOKEN_IN_TEXT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[A-Za-z_]\w*|\d[\w.]*|\S')
_INT_BODY = re.compile(r"^\(*\s*([-+]?\s*(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*)\s*\)*$")


def _integer_macros(cmd: List[str], text: str, cwd: Path, path: str) -> Dict[str, int]:
    """Macros defined in the main file whose final value is an integer literal (via ``cpp -dM``)."""
    defined_here = set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])", text, re.M))
    if not defined_here:
        return {}
    out = {}
    for line in _run_cpp(cmd + ["-dM", "-"], text, cwd, path).splitlines():
        m = re.match(r"#define ([A-Za-z_]\w*) (.*)$", line)
        if not m or m.group(1) not in defined_here:
            continue
        body = _INT_BODY.match(m.group(2).strip())
        if body:
            lit = body.group(1).replace(" ", "")
            sign = -1 if lit.startswith("-") else 1
            v = c_int_literal(lit.lstrip("+-"))
            if v is not None:
                out[m.group(1)] = sign * v
    return out


def _rename_macro_uses(text: str, names: Sequence[str]) -> str:
    """Rename uses of ``names`` so cpp does not expand them (see the module docstring).

    Lines of ``#if``/``#ifdef``/``#elif``/``#undef``/... directives keep the
    real names (they must see the macros), as does the name a ``#define``
    line defines; continuation lines belong to their directive.
    """
    names = set(names)
    out: List[str] = []
    kind: Optional[str] = None  # directive of the current logical line (None: ordinary code)
    for ln in text.split("\n"):
        first = False
        if kind is None:
            m = _DIRECTIVE.match(ln)
            if m:
                kind, first = m.group(1), True
        if kind is None or kind == "define":
            skip = 3 if (kind == "define" and first) else 0  # '#', 'define', and the defined name
            pieces, last = [], 0
            for idx, m in enumerate(_TOKEN_IN_TEXT.finditer(ln)):
                if idx >= skip and m.group(0) in names:
                    pieces.append(ln[last:m.start()] + _MACRO_PREFIX + m.group(0))
                    last = m.end()
            pieces.append(ln[last:])
            out.append("".join(pieces))
        else:
            out.append(ln)
        if not (kind is not None and ln.endswith("\\")):
            kind = None
    return "\n".join(out)


def _preprocess(src: Source, path: Path, clean: str) -> None:
    cwd = path.resolve().parent
    cmd = _preprocessor() + ["-nostdinc", "-I", str(FAKE_LIBC), "-iquote", str(cwd), "-std=c11"]
    for d in GNU_DEFINES:
        cmd += ["-D", d]
    src.macros = _integer_macros(cmd, clean, cwd, str(path))
    text = _rename_macro_uses(clean, sorted(src.macros)) if src.macros else clean
    out = _run_cpp(cmd + ["-"], text, cwd, str(path))
    if src.macros:
        out = re.sub(re.escape(_MACRO_PREFIX) + r"([A-Za-z_]\w*)", r"\1", out)
    src.parse_text = out
    src.used_cpp = True
    src.pp_lines = out.split("\n")
    marker = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"((?:\\.|[^"\\])*)"')
    file, line = src.MAIN, 1
    for k, ln in enumerate(src.pp_lines):
        m = marker.match(ln)
        if m:
            line, file = int(m.group(1)), m.group(2)
            continue
        src.line_map.setdefault((file, line), k)
        line += 1


def align_column(pp_line: str, orig_line: str, col: int) -> int:
    """Map column ``col`` of a preprocessed line to the original line by aligning their tokens.

    Equal tokens map one to one; a token that came from a macro expansion maps
    to the start of the macro use it replaced.
    """
    if pp_line == orig_line:
        return col
    pp = [(m.start(), m.group(0)) for m in _TOKEN_IN_TEXT.finditer(pp_line)]
    orig = [(m.start(), m.group(0)) for m in _TOKEN_IN_TEXT.finditer(orig_line)]
    if not pp or not orig:
        return col
    k = 0
    for idx, (start, tok) in enumerate(pp):
        if start <= col - 1:
            k = idx
    sm = difflib.SequenceMatcher(None, [t for _, t in pp], [t for _, t in orig], autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if i1 <= k < i2:
            if tag == "equal":
                return orig[j1 + k - i1][0] + 1
            return (orig[j1][0] if j1 < len(orig) else len(orig_line)) + 1
    return col


def find_matching_brace(raw: bytes, start: int) -> int:
    """Offset of the ``}`` closing the ``{`` at ``start`` (comments and literals skipped), or -1."""
    depth, i, n = 0, start, len(raw)
    while i < n:
        c = raw[i:i + 1]
        if c in (b'"', b"'"):
            j = i + 1
            while j < n and raw[j:j + 1] not in (c, b"\n"):
                j += 2 if raw[j:j + 1] == b"\\" else 1
            i = j + 1
            continue
        if raw.startswith(b"/*", i):
            j = raw.find(b"*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if raw.startswith(b"//", i):
            j = raw.find(b"\n", i)
            i = n if j < 0 else j
            continue
        if c == b"{":
            depth += 1
        elif c == b"}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1
