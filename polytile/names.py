"""Identifier hygiene: every name that reaches isl text or C/CUDA source passes here.

User names are never trusted to be valid in the languages we emit: a tensor
called ``#int`` or an index called ``exp`` would break C, and ``mod`` or
``floor`` would break isl's parser.  :class:`NameTable` hands out unique,
safe identifiers and keeps the user's spelling when it can.

    >>> t = NameTable()
    >>> t.claim("A"), t.claim("int"), t.claim("A"), t.claim("c0"), t.claim("M_PI")
    ('A', 'v_int', 'A_1', 'v_c0', 'v_M_PI')
"""
from __future__ import annotations

import re

_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

# Our own generated names live in these shapes; user names must stay out of them.
_GENERATED = re.compile(r"^(c\d+|a\d+|pt_.*|__.*)$")

C_KEYWORDS = frozenset(
    """auto break case char const continue default do double else enum extern float for goto if inline
    int long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while _Bool _Complex _Imaginary bool true false NULL main asm typeof __global__ __device__
    __shared__ __host__ threadIdx blockIdx blockDim gridDim warpSize dim3 half nullptr new delete class
    template this namespace using operator private public protected virtual""".split()
)
# isl's parser matches its keywords case-insensitively ("Floor" is floor), so
# these are compared in lower case.
ISL_KEYWORDS = frozenset(
    """and or not mod floor ceil floord ceild min max exists infty infinity nan rat true false domain implies xor
    cond lexmin lexmax sum""".split()
)
LIBM = frozenset(
    """exp log sqrt pow tanh sin cos tan floor ceil round rint fabs abs labs llabs fmax fmin fmod exp2 log2
    log10 expf logf sqrtf powf tanhf sinf cosf tanf floorf ceilf rintf fabsf fmaxf fminf INFINITY NAN
    int8_t int16_t int32_t int64_t uint8_t size_t printf malloc free memcpy memset omp_get_num_threads
    floord min max errno""".split()
)
# Macros of the headers generated code includes (math.h, stdint.h, stdlib.h, omp.h, cuda_runtime.h)
# that are no single upper-case word with an underscore (those are all refused, see is_safe).
LIBC_MACROS = frozenset(
    """NAN INFINITY EOF NULL BUFSIZ assert errno isnan isinf isfinite isnormal signbit fpclassify
    isgreater isless islessgreater isunordered stdin stdout stderr offsetof alloca unix linux""".split()
)
RESERVED = C_KEYWORDS | ISL_KEYWORDS | LIBM | LIBC_MACROS
# M_PI, RAND_MAX, INT64_MAX, EXIT_SUCCESS, FP_NAN, ...: the C headers' macro namespace.
_MACRO_LIKE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]*)+$")


def is_safe(name: str) -> bool:
    """True if ``name`` can be used verbatim in both isl text and C."""
    return (bool(_IDENT.match(name)) and name not in RESERVED and name.lower() not in ISL_KEYWORDS
            and not _GENERATED.match(name) and not _MACRO_LIKE.match(name))


class NameTable:
    """Allocates unique safe identifiers for one generated unit (one kernel)."""

    def __init__(self, taken=()):
        self._taken = set(taken)

    def claim(self, name: str) -> str:
        """A fresh safe identifier close to ``name`` (mutates this table only)."""
        base = name if is_safe(name) else "v_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
        cand, n = base, 0
        while cand in self._taken or not is_safe(cand):
            n += 1
            cand = f"{base}_{n}"
        self._taken.add(cand)
        return cand
