"""The C frontend: affine regions of C programs (``#pragma scop`` ... ``#pragma endscop``) as Scops.

>>> from polytile.frontends.c import extract, show
>>> # [region] = extract("gemm.c", params={"ni": 64, "nj": 64, "nk": 64})
>>> # print(show(region)); region.scop is a polytile Scop whose statements keep their C text

See :mod:`.extract` for what is modelled and what is refused.
"""
from .cscop import CParam, CScop, show, splice
from .extract import extract, file_globals
from .source import CFrontendError

__all__ = ["extract", "file_globals", "show", "splice", "CScop", "CParam", "CFrontendError"]
