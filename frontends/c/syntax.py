"""Helpers over pycparser syntax trees: a node's C text, its identifiers, the names it assigns, renaming."""
from __future__ import annotations

from typing import List, Mapping, Set

from pycparser import c_ast, c_generator


_GEN = c_generator.CGenerator(reduce_parentheses=True)


def _c(node: c_ast.Node) -> str:
    return _GEN.visit(node)


def _pragma_word(p: c_ast.Pragma) -> str:
    words = (p.string or "").split()
    return words[0] if words else ""


class _Renamer(c_ast.NodeVisitor):
    def __init__(self, mapping: Mapping[str, str]):
        self.mapping = mapping

    def visit_ID(self, node: c_ast.ID) -> None:
        if node.name in self.mapping:
            node.name = self.mapping[node.name]


def _nodes(*roots: c_ast.Node):
    """Every node of the trees ``roots``, roots included."""
    stack = list(roots)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for _, child in node.children())


def _ids(node: c_ast.Node) -> List[c_ast.ID]:
    out: List[c_ast.ID] = []

    class V(c_ast.NodeVisitor):
        def visit_ID(self, n):
            out.append(n)

    V().visit(node)
    return out


def _assigned_names(node: c_ast.Node) -> Set[str]:
    """Names assigned (``=``, ``op=``, ``++``, ``--``) anywhere in ``node``."""
    out: Set[str] = set()

    class V(c_ast.NodeVisitor):
        def visit_Assignment(self, n):
            if isinstance(n.lvalue, c_ast.ID):
                out.add(n.lvalue.name)
            self.generic_visit(n)

        def visit_UnaryOp(self, n):
            if n.op in ("p++", "p--", "++", "--") and isinstance(n.expr, c_ast.ID):
                out.add(n.expr.name)
            self.generic_visit(n)

    V().visit(node)
    return out


def _address_taken(node: c_ast.Node) -> Set[str]:
    """Names whose address is taken (``&n``) anywhere in ``node``: anything may change them later."""
    return {n.expr.name for n in _walk_nodes(node)
            if isinstance(n, c_ast.UnaryOp) and n.op == "&" and isinstance(n.expr, c_ast.ID)}


def _walk_nodes(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk_nodes(child)
