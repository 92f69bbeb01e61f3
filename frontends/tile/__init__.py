"""The Tile language frontend: text in, :class:`polytile.ir.Program` out.

>>> from polytile.frontends.tile import parse
>>> print(parse("function (I[M, N]) -> (O) { O[n : N] = +(I[m, n]); }"))
function (I[M, N]) -> (O) {
  O[n : N] = +(I[m, n]);
}
"""
from polytile.errors import TileSyntaxError

from .lexer import KEYWORDS, Token, tokenize
from .parser import parse, parse_expression, parse_file

__all__ = ["parse", "parse_file", "parse_expression", "tokenize", "Token", "KEYWORDS", "TileSyntaxError"]
