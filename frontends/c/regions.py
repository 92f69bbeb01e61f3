"""The regions of a C file: :class:`_File` parses it, reads its file-scope symbols and finds its regions.

A :class:`_Region` is the statements between ``#pragma scop`` and
``#pragma endscop`` in one block, or the body of a function after its
leading declarations (``function=NAME``), with the names in scope there,
the ``if`` conditions enclosing it, and its byte range in the original file
(which the driver replaces).
"""
from __future__ import annotations

import re
import types
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from pycparser import c_ast, c_parser

from . import affine as A
from .cscop import CParam
from .source import CFrontendError, Source, find_matching_brace
from .symbols import _is_integer, _Sym, _sym_from_decl
from .syntax import _c, _pragma_word, _walk_nodes


@dataclass
class _Region:
    func: c_ast.FuncDef
    items: List[c_ast.Node]
    scope: Dict[str, _Sym]
    guards: List[Tuple[c_ast.Node, bool]]
    start: int
    end: int
    lines: Tuple[int, int]
    anchor: c_ast.Node  # where region-level errors point


_SCOP_LINE = re.compile(r"^\s*#\s*pragma\s+scop\b")
_ENDSCOP_LINE = re.compile(r"^\s*#\s*pragma\s+endscop\b")


#: A pycparser message that says where: ``file:line[:column]: text``.
_LOCATED = re.compile(r"^(.*?):(\d+)(?::(\d+))?: (.*)$", re.S)


def _brace_depth(text: bytes) -> int:
    """``{`` minus ``}`` in C ``text``, outside comments, string and character literals.

    >>> _brace_depth(b"void f(void) { /* } */ g(); // }")
    1
    """
    code = re.sub(rb'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', b" ", text, flags=re.S)
    return code.count(b"{") - code.count(b"}")


def _stopped_at(parser) -> Optional[str]:
    """``file:line:column`` of the token a pycparser parser stopped at, or None if it does not say
    (its token stream is not a public interface: any failure here means "unknown")."""
    try:
        tok = parser._peek()
        return None if tok is None else str(parser._tok_coord(tok))
    except Exception:  # noqa: BLE001 - another pycparser version: the message stays unlocated
        return None


class _File:
    """A parsed file: symbols at file scope and the regions of its functions."""

    def __init__(self, src: Source):
        self.src = src
        parser = c_parser.CParser()
        name = src.MAIN if src.used_cpp else src.path
        try:
            self.ast = parser.parse(src.parse_text, filename=name)
        except c_parser.ParseError as e:
            raise self._parse_error(str(e), parser) from None
        self.typedefs: Dict[str, Sequence[str]] = {}
        self.globals: Dict[str, _Sym] = {}
        self.enums: Dict[str, int] = {}
        for ext in self.ast.ext:
            if isinstance(ext, c_ast.Typedef):
                t = ext.type
                if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
                    self.typedefs[ext.name] = list(t.type.names)
            elif isinstance(ext, c_ast.Decl) and ext.name:
                self.globals[ext.name] = _sym_from_decl(ext, "global", self.typedefs)
        self._collect_enums()
        self.functions = {ext.decl.name: ext for ext in self.ast.ext if isinstance(ext, c_ast.FuncDef)}
        # Every identifier of the file and of what it includes, and every macro name: names generated
        # code introduces must differ from all of them.
        self.taken = frozenset(re.findall(r"[A-Za-z_]\w*", src.parse_text)) | frozenset(
            re.findall(r"[A-Za-z_]\w*", src.raw.decode("utf-8", "replace"))) | frozenset(src.defines)

    def _parse_error(self, msg: str, parser=None) -> CFrontendError:
        m = _LOCATED.match(msg)
        if not m and parser is not None:
            # Some of pycparser's messages ("Invalid expression") name only the file; its token stream
            # still knows where it stopped (pycparser 3; older ones say where in the message itself).
            at = _stopped_at(parser)
            if at is not None:
                m = _LOCATED.match(f"{at}: {msg.split(': ', 1)[-1]}")
        if not m:
            detail = msg.split(": ", 1)[-1]
            return CFrontendError(f"{self.src.path}: cannot parse C: {detail}", construct="syntax")
        coord = types.SimpleNamespace(file=m.group(1), line=int(m.group(2)), column=int(m.group(3) or 1))
        detail = m.group(4)
        if re.fullmatch(r"before: (for|while|if|do|switch|return)", detail.strip()) and self.src.is_main(coord.file) \
                and _brace_depth(self.src.raw[:self.src.offset(coord.line, coord.column)]) <= 0:
            # A loop nest pasted into a file of its own (Pluto's test fragments): C has no statements
            # outside a function, and polytile needs the declarations that give arrays types and sizes.
            detail += (" (a statement outside any function: polytile reads a whole C file, so put the loops in "
                       "a function, with the arrays and sizes they use declared as its parameters or at file "
                       "scope)")
        return self.src.error(coord, f"cannot parse C: {detail}", "syntax")

    def _collect_enums(self) -> None:
        """Enumeration constants are integer constants, substituted like literals."""
        enums = self.enums

        def resolve(name, node):
            if name in enums:
                return A.Lin.constant(enums[name])
            raise A.NotAffine(node, "not a constant")

        class V(c_ast.NodeVisitor):
            def visit_Enumerator(self, n):
                if n.value is None:
                    enums[n.name] = V.next
                else:
                    try:
                        v = A.pw_const(A.to_pw(n.value, resolve))
                    except A.NotAffine:
                        v = None
                    if v is None:
                        return
                    enums[n.name] = v
                V.next = enums[n.name] + 1

            def visit_EnumeratorList(self, n):
                V.next = 0
                self.generic_visit(n)

        V.next = 0
        V().visit(self.ast)

    def signature(self, func: c_ast.FuncDef) -> Tuple[CParam, ...]:
        out = []
        args = func.decl.type.args
        for p in (args.params if args is not None else []):
            if not isinstance(p, c_ast.Decl) or not p.name:
                continue
            s = _sym_from_decl(p, "param", self.typedefs)
            if s.kind == "array":
                out.append(CParam(s.name, "array", s.dtype, tuple(None if d is None else _c(d) for d in s.dims),
                                  s.restrict))
            elif s.kind == "scalar":
                out.append(CParam(s.name, "int" if _is_integer(s.dtype) else "float", s.dtype))
            else:
                out.append(CParam(s.name, "other", None))
        return tuple(out)

    def base_scope(self, func: c_ast.FuncDef) -> Dict[str, _Sym]:
        scope = dict(self.globals)
        args = func.decl.type.args
        for p in (args.params if args is not None else []):
            if isinstance(p, c_ast.Decl) and p.name:
                scope[p.name] = _sym_from_decl(p, "param", self.typedefs)
        return scope

    # -- regions ---------------------------------------------------------------
    def pragma_regions(self) -> List[_Region]:
        out: List[_Region] = []
        for func in self.functions.values():
            self._walk_block(func, func.body.block_items or [], self.base_scope(func), [], out)
        return out

    def _walk_block(self, func, items, scope, guards, out) -> None:
        scope = dict(scope)
        k = 0
        while k < len(items):
            it = items[k]
            if isinstance(it, c_ast.Pragma) and _pragma_word(it) == "endscop":
                raise self.src.error(it.coord, "#pragma endscop without a #pragma scop before it in the same block",
                                     "#pragma endscop")
            if isinstance(it, c_ast.Pragma) and _pragma_word(it) == "scop":
                j = next((m for m in range(k + 1, len(items)) if isinstance(items[m], c_ast.Pragma)
                          and _pragma_word(items[m]) == "endscop"), None)
                if j is None:
                    raise self.src.error(it.coord, "#pragma scop without a matching #pragma endscop in the same block",
                                         "#pragma scop")
                out.append(self._pragma_region(func, it, items[j], items[k + 1:j], scope, guards))
                k = j + 1
                continue
            if isinstance(it, c_ast.Decl) and it.name:
                scope[it.name] = _sym_from_decl(it, "local", self.typedefs)
            else:
                self._walk_stmt(func, it, scope, guards, out)
            k += 1

    def _walk_stmt(self, func, node, scope, guards, out) -> None:
        if node is None:
            return
        if isinstance(node, c_ast.Compound):
            self._walk_block(func, node.block_items or [], scope, guards, out)
        elif isinstance(node, c_ast.If):
            self._walk_stmt(func, node.iftrue, scope, guards + [(node.cond, True)], out)
            self._walk_stmt(func, node.iffalse, scope, guards + [(node.cond, False)], out)
        elif isinstance(node, c_ast.For):
            inner = dict(scope)
            if isinstance(node.init, c_ast.DeclList):
                for d in node.init.decls:
                    inner[d.name] = _sym_from_decl(d, "local", self.typedefs)
            self._walk_stmt(func, node.stmt, inner, guards, out)
        elif isinstance(node, (c_ast.While, c_ast.DoWhile, c_ast.Switch, c_ast.Label)):
            self._walk_stmt(func, node.stmt, scope, guards, out)
        elif isinstance(node, (c_ast.Case, c_ast.Default)):
            for s in node.stmts or []:
                self._walk_stmt(func, s, scope, guards, out)
        elif isinstance(node, c_ast.Pragma) and _pragma_word(node) in ("scop", "endscop"):
            raise self.src.error(node.coord, f"#pragma {_pragma_word(node)} must stand in a block ({{ ... }})",
                                 f"#pragma {_pragma_word(node)}")

    def _pragma_region(self, func, open_p, close_p, items, scope, guards) -> _Region:
        src = self.src
        lines = []
        for p, rx in ((open_p, _SCOP_LINE), (close_p, _ENDSCOP_LINE)):
            if not src.is_main(p.coord.file) or not rx.match(src.line_text(p.coord.line)):
                raise src.error(p.coord, f"#pragma {_pragma_word(p)} must be written in the file itself, on its own "
                                         "line (not produced by a macro or an included file)", "#pragma")
            lines.append(p.coord.line)
        for it in items:
            for sub in _walk_nodes(it):
                if isinstance(sub, c_ast.Pragma) and _pragma_word(sub) in ("scop", "endscop"):
                    raise src.error(sub.coord, "nested #pragma scop regions", "#pragma scop")
        return _Region(func, list(items), scope, guards, src.line_starts[lines[0] - 1], src.line_end(lines[1]),
                       (lines[0], lines[1]), open_p)

    def function_region(self, name: str) -> _Region:
        src = self.src
        func = self.functions.get(name)
        if func is None:
            known = ", ".join(sorted(self.functions)) or "none"
            raise CFrontendError(f"{src.path}: no function named {name!r} (functions defined: {known})")
        items = list(func.body.block_items or [])
        scope = self.base_scope(func)
        lead = 0
        while lead < len(items) and isinstance(items[lead], c_ast.Decl):
            if items[lead].name:
                scope[items[lead].name] = _sym_from_decl(items[lead], "local", self.typedefs)
            lead += 1
        body = items[lead:]
        trailing_return = bool(body) and isinstance(body[-1], c_ast.Return)
        if trailing_return:
            body = body[:-1]
        # Marker pragmas mean nothing when the whole body is the region.
        body_items = [it for it in body if not (isinstance(it, c_ast.Pragma) and _pragma_word(it) in ("scop", "endscop"))]
        open_loc = src.location(func.body.coord)
        brace = src.offset(open_loc.line, open_loc.col)
        if src.raw[brace:brace + 1] != b"{":
            raise src.error(func.body.coord, f"cannot find the body of {name} in the original text", "function body")
        close = find_matching_brace(src.raw, brace)
        if close < 0:
            raise src.error(func.body.coord, f"unbalanced braces in the body of {name}", "function body")
        # The region ends at a final 'return' (which stays), else at the closing brace.
        end = self._line_aware_offset(items[-1], None) if trailing_return else self._line_aware_offset(None, close)
        start = self._line_aware_offset(body[0], None) if body else end
        first_line = src.location(body[0].coord).line if body else open_loc.line
        last_line = src.raw[:end].count(b"\n") + (0 if end and src.raw[end - 1:end] == b"\n" else 1)
        return _Region(func, body_items, scope, [], start, end, (first_line, last_line), func.body)

    def _line_aware_offset(self, node: Optional[c_ast.Node], fallback: Optional[int]) -> int:
        """Byte offset where ``node`` starts (its line's start if only blanks precede it); ``fallback`` if None."""
        src = self.src
        if node is None:
            off = fallback
            line_start = src.raw.rfind(b"\n", 0, off) + 1
            return line_start if not src.raw[line_start:off].strip() else off
        loc = src.location(node.coord)
        line_start = src.line_starts[loc.line - 1]
        if isinstance(node, c_ast.Pragma):
            return line_start  # a directive owns its line (pycparser's column is past '#pragma')
        off = src.offset(loc.line, loc.col)
        return line_start if not src.raw[line_start:off].strip() else off
