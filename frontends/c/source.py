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

Integer macros defined elsewhere -- an included header (PolyBench's
``#define N 120`` in ``heat-3d.h``) or ``-D`` -- are expanded by cpp, so their
value ends up in the optimised code.  Their definitions and where they come
from are read with ``cpp -dD`` (:attr:`Source.defines`), so that the
optimiser can guard its output against a build with another value
(:meth:`polytile.frontends.c.scop_build._ScopBuilder.macro_guards`).

``cpp_args`` (``-I DIR``, ``-D NAME[=VALUE]``, ``-U NAME``, ``-std=...``, as
``polytile opt`` passes them) reach the preprocessor like gcc's; a file is
preprocessed whenever they are given.
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import os
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


#: How messages name options: ``"python"`` (``assume_no_alias=True``), else command-line flags
#: (``--assume-no-alias``), given as a tuple of per-command overrides.
#: The command line sets it (:func:`cli_spelling`) so that a message names the flag the user can pass.
_SPELLING: contextvars.ContextVar = contextvars.ContextVar("polytile_c_option_spelling", default="python")

#: option -> (Python spelling, command-line spelling)
_OPTIONS = {
    "assume_no_alias": ("assume_no_alias=True", "--assume-no-alias"),
    "params": ("params={{{name!r}: ...}}", "--param {name}=<int>"),
    "pure": ("pure=[{name!r}]", "--pure {name}"),
    "skip_nonaffine": ("skip_nonaffine=True", "--skip-nonaffine"),
    "cpp_args": ("cpp_args=['-I', DIR]", "-I DIR"),
}


def option(key: str, **fmt) -> str:
    """How to spell option ``key`` in a message: its Python keyword, or its flag on the command line."""
    py, cli = _OPTIONS[key]
    spelling = _SPELLING.get()
    if spelling == "python":
        return py.format(**fmt)
    return dict(spelling).get(key, cli).format(**fmt)


@contextlib.contextmanager
def cli_spelling(**flags: str):
    """Within this block, frontend messages name command-line flags instead of Python keywords
    (``flags`` overrides a flag for one command: ``params="--dims {name}=<int>"``)."""
    token = _SPELLING.set(tuple(flags.items()))
    try:
        yield
    finally:
        _SPELLING.reset(token)


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
    # every macro defined when the file ends: name -> (parameter list or None, body, where it was defined:
    # "main", "header" (a header of the user's), "command-line", or "system" (built-in, our fake libc))
    defines: Dict[str, Tuple[Optional[str], str, str]] = field(default_factory=dict)
    pure: frozenset = frozenset()  # functions the file declares __attribute__((const)) or ((pure))
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


def load(path: str, cpp_args: Sequence[str] = ()) -> Source:
    """Read ``path`` and produce the text pycparser will parse (see module docstring).

    ``cpp_args`` are preprocessor options (``-I``, ``-D``, ``-U``, ``-std=``; see :func:`check_cpp_args`).
    """
    p = Path(path)
    if p.is_dir():
        raise CFrontendError(f"{path} is a directory, not a C file")
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
    src.pure = pure_declarations(clean)
    cpp_args = check_cpp_args(cpp_args)
    if directives or "\\\n" in text or _GNU_WORD.search(clean) or cpp_args:
        _preprocess(src, p, clean, cpp_args)
    return src


_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((.*?)\)\)", re.S)
_PURE_WORDS = {"const", "pure", "__const__", "__pure__"}


def pure_declarations(text: str) -> frozenset:
    """Functions declared (or defined) in ``text`` with ``__attribute__((const))`` or ``((pure))``.

    The attribute may stand before the declaration or after its parameter
    list; the function is the first identifier followed by ``(`` in the
    declaration (between the previous ``;``/``}``/``{`` and the next ``;``/``{``).
    """
    out = set()
    for m in _ATTRIBUTE.finditer(text):
        words = {w.strip().split("(")[0].strip() for w in m.group(1).split(",")}
        if not words & _PURE_WORDS:
            continue
        start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
        ends = [e for e in (text.find(";", m.end()), text.find("{", m.end())) if e >= 0]
        decl = text[start:min(ends) if ends else len(text)]
        decl = _ATTRIBUTE.sub(" ", decl)
        name = re.search(r"([A-Za-z_]\w*)\s*\(", decl)
        if name:
            out.add(name.group(1))
    return frozenset(out)


_CPP_ARG = re.compile(r"^-(?:([IDU])(.*)|std=([\w+]+))$")


def check_cpp_args(args: Sequence[str]) -> List[str]:
    """Preprocessor options as gcc takes them, one option per item (``-I``, ``-D``, ``-U`` with their value
    attached or as the next item; ``-std=c99``); include directories made absolute (cpp runs in the file's
    directory).  Anything else is refused: these options only choose headers and macros."""
    out: List[str] = []
    items = list(args)
    k = 0
    while k < len(items):
        a = str(items[k])
        m = _CPP_ARG.match(a)
        if not m:
            raise CFrontendError(f"preprocessor option {a!r} not understood: use -I DIR, -D NAME[=VALUE], "
                                 "-U NAME or -std=STANDARD")
        if m.group(3):
            out.append(a)
            k += 1
            continue
        flag, value = m.group(1), m.group(2)
        if not value:
            if k + 1 >= len(items):
                raise CFrontendError(f"preprocessor option -{flag} needs a value")
            value = str(items[k + 1])
            k += 1
        k += 1
        if flag == "I":
            out += ["-I", os.path.abspath(value)]
            continue
        name = value.split("=", 1)[0]
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise CFrontendError(f"-{flag} {value}: {name!r} is not a macro name")
        out += [f"-{flag}", value]
    return out


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
        hint = ""
        if "No such file" in msg:
            hint = (f"\n(headers of other directories need {option('cpp_args')}; system headers the frontend "
                    f"does not emulate can be added to {FAKE_LIBC})")
        raise CFrontendError(f"the C preprocessor rejected {what}:\n{msg}{hint}")
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


def _macro_definitions(cmd: List[str], text: str, cwd: Path, path: str
                       ) -> Dict[str, Tuple[Optional[str], str, str]]:
    """Every macro defined at the end of the file, with where it was defined (``cpp -dD``'s line markers)."""
    out: Dict[str, Tuple[Optional[str], str, str]] = {}
    where = "main"
    marker = re.compile(r'^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"')
    fake = str(FAKE_LIBC)
    for line in _run_cpp(cmd + ["-dD", "-"], text, cwd, path).splitlines():
        m = marker.match(line)
        if m:
            f = m.group(2)
            where = ("main" if f == Source.MAIN else "command-line" if f == "<command-line>"
                     else "system" if f.startswith("<") or f.startswith(fake) else "header")
            continue
        d = re.match(r"#define ([A-Za-z_]\w*)(\([^)]*\))? ?(.*)$", line)
        if d:
            out[d.group(1)] = (d.group(2), d.group(3).strip(), where)
            continue
        u = re.match(r"#undef ([A-Za-z_]\w*)", line)
        if u:
            out.pop(u.group(1), None)
    return out


def _preprocess(src: Source, path: Path, clean: str, cpp_args: Sequence[str] = ()) -> None:
    cwd = path.resolve().parent
    std = [a for a in cpp_args if a.startswith("-std=")] or ["-std=c11"]
    rest = [a for a in cpp_args if not a.startswith("-std=")]
    # The user's -I directories come before our fake libc, as gcc searches -I before the system headers.
    cmd = _preprocessor() + ["-nostdinc", *rest, "-I", str(FAKE_LIBC), "-iquote", str(cwd), std[-1]]
    for d in GNU_DEFINES:
        cmd += ["-D", d]
    src.defines = _macro_definitions(cmd, clean, cwd, str(path))
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
