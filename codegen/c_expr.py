"""Statement bodies as C: the C type of each dtype, exact literals, the prelude of helper functions
generated C calls, and :class:`BodyPrinter`, which renders :mod:`polytile.poly.body` nodes with them.

The helpers give C the meaning the oracle (numpy, PlaidML) has where C differs: NaN-propagating
max/min, integer division pinned down at zero and overflow, float -> integer conversion, selects that
evaluate both operands.  Both back ends print statement bodies through this module, the OpenMP one
(:mod:`.c`) and the CUDA one (:mod:`.cuda`), so a statement is the same C expression in each.

    >>> BodyPrinter({}).expr(B.Bin("+", B.Iter("i"), B.Const(1, "int64"), "int64"))
    '(i + 1)'
"""
from __future__ import annotations

import math
import re
from typing import Dict, Optional

from polytile import dtypes as D
from polytile.errors import InternalError
from polytile.poly import body as B
from polytile.poly.scop import Array

# The element types of polytile.dtypes the generated C computes in: float16 is not among them (binding
# rejects it; _helper_dtype sends it through float32 should it appear).
_FLOAT = tuple(d for d in D.FLOATS if d != "float16")
_INTS = D.INTEGERS
_SELECTABLE = ("bool",) + _INTS + _FLOAT


def _typed_helpers() -> str:
    """The prelude's per-dtype helpers, one template each (C types from :mod:`polytile.dtypes`)."""
    t = D.C_TYPES
    out = []
    for n in _INTS:
        out.append(f"static inline {t[n]} pt_max_{n}({t[n]} a, {t[n]} b) {{ return a > b ? a : b; }}")
        out.append(f"static inline {t[n]} pt_min_{n}({t[n]} a, {t[n]} b) {{ return a < b ? a : b; }}")
    out.append("static inline _Bool pt_max_bool(_Bool a, _Bool b) { return a || b; }")
    out.append("static inline _Bool pt_min_bool(_Bool a, _Bool b) { return a && b; }")
    out.append("/* C's integer division (toward zero), pinned down where C leaves it undefined: x / 0 == 0 and "
               "MIN / -1 wraps. */")
    for n in _INTS:
        c = t[n]
        if D.is_unsigned(n):
            out.append(f"static inline {c} pt_div_{n}({c} a, {c} b) {{ return b ? ({c})(a / b) : 0; }}")
        else:
            out.append(f"static inline {c} pt_div_{n}({c} a, {c} b) {{ return b == 0 ? 0 : (b == -1 ? "
                       f"({c})(0 - (u{c})a) : ({c})(a / b)); }}")
    out.append("static inline _Bool pt_div_bool(_Bool a, _Bool b) { return a && b; }")
    out.append("/* float -> integer as PlaidML's kernels convert: truncate to 64 bits, keep the low bits; NaN and "
               "|x| >= 2^63 give 0. */")
    for n in _INTS:
        out.append(f"static inline {t[n]} pt_cvt_{n}(double x) {{ return (x > -9223372036854775808.0 && "
                   f"x < 9223372036854775808.0) ? ({t[n]})(uint64_t)(int64_t)x : 0; }}")
    out.append("static inline _Bool pt_cvt_bool(double x) { return x - x == 0 && (x >= 1.0 || x <= -1.0); }")
    out.append("static inline long pt_clamp(long x, long lo, long hi) { return x < lo ? lo : (x > hi ? hi : x); }")
    out.append("/* Selects as functions: both operands are evaluated (always safe here), so gcc never\n"
               "   if-converts the branch into masked loads -- gcc 12 at -O3 vectorises `c ? A[i] : X[i]`\n"
               "   over short inner loops wrongly (tests/test_codegen_select.py). */")
    for n in _SELECTABLE:
        c = t[n]
        out.append(f"static inline {c} pt_sel_{n}(int k, {c} t, {c} e) {{ return k ? t : e; }}")
        out.append(f"static inline {c} pt_pmax_{n}({c} a, {c} b) {{ return a < b ? b : a; }}")
        out.append(f"static inline {c} pt_pmin_{n}({c} a, {c} b) {{ return a < b ? a : b; }}")
        out.append(f"static inline {c} pt_relu_{n}({c} a) {{ return a < 0 ? 0 : a; }}")
        if n == "bool" or D.is_unsigned(n):
            out.append(f"static inline {c} pt_abs_{n}({c} a) {{ return a; }}")
        else:
            out.append(f"static inline {c} pt_abs_{n}({c} a) {{ return a < 0 ? ({c})(-a) : a; }}")
    return "\n".join(out) + "\n"


_TYPED_HELPERS = _typed_helpers()


#: glibc's vector math library (libmvec) by the glibc release that added the AVX-512 variants: with
#: ``#pragma omp declare simd`` on these declarations gcc calls a function's vector variant
#: (``_ZGVeN16v_expf``) in a vectorised loop, where it called ``expf`` once per element (a chain of
#: tanhf and expf over 2^20 floats: 10.7 ms -> 0.52 ms, one thread, Zen 5).  glibc's math.h declares
#: them so only under ``-ffast-math``; a Tile kernel's errno is not observable, and the build passes
#: ``-fno-math-errno`` (``config.DEFAULT_CFLAGS``), which the vectoriser needs for calls.  The
#: variants are within 4 ulp (glibc's manual), inside the oracle's float tolerance.  ``-DPT_NO_LIBMVEC``
#: turns them off; C sources never get them (their results stay bitwise those of the original build).
LIBMVEC = {(2, 22): ("exp", "log", "sin", "cos", "pow"),
           (2, 35): ("tanh", "tan", "sinh", "cosh", "asin", "acos", "atan", "erf")}


def vector_math_prelude(used) -> str:
    """The ``declare simd`` declarations of the libmvec functions among ``used`` (C function names).

    >>> "float expf(float);" in vector_math_prelude({"expf"})
    True
    """
    out = []
    for (major, minor), names in LIBMVEC.items():
        decls = []
        for name in names:
            arity = 2 if name == "pow" else 1
            for c, fn in (("float", name + "f"), ("double", name)):
                if fn in used:
                    decls += ["#pragma omp declare simd notinbranch", f"{c} {fn}({', '.join([c] * arity)});"]
                    if name in GUARDED:
                        decls.append(f"#define PT_VECTOR_{fn.upper()} 1")
        if decls:
            out += [f"#if __GLIBC_PREREQ({major}, {minor})"] + decls + ["#endif"]
    if not out:
        return ""
    guard = ("#if defined(__x86_64__) && defined(__GLIBC__) && defined(_OPENMP) && defined(__GNUC__) "
             "&& !defined(__clang__) && !defined(PT_NO_LIBMVEC)")
    text = "\n".join([guard] + out + ["#endif"]) + "\n"
    for fn, guard in _GUARDED.items():
        if fn in used:
            text += guard
    return text


#: The libm functions whose vector variants take a scalar callout on some lanes, wrapped by the prelude.
GUARDED = ("exp", "log")

#: ``pt_expf``/``pt_exp`` and ``pt_logf``/``pt_log``: glibc's vector exp and log send every lane whose
#: result is not a normal number (exp: ``x < -87.3`` or ``x > 88.7`` in float, NaN, inf; log: zero,
#: negative, inf, NaN, subnormal) through a scalar callout, about 16 ns a lane: a masked softmax's
#: ``exp(-1e9)`` (30% of 2^20 floats masked: 0.13 -> 2.6 ms) or a log of probabilities with exact
#: zeros (30% zeros: 0.12 -> 2.3 ms).  Lanes whose result is exact and known (exp: 0 for ``x < -104``,
#: inf for ``x > 89``, the asymmetric test one add, abs and compare; log: -inf at zero, the default NaN
#: below it, inf at inf) take exp(0) or log(1) and get their value by a bit mask; the rest, subnormal
#: results and NaN inputs included, are the function's own: bitwise the same results, 10-20% more time
#: where no lane is special.  The selects are integer masks, not ``far ? s : r``: gcc if-converts a
#: select between floats only under ``-fno-trapping-math``, and that flag lets it duplicate a call
#: into both arms of an earlier ``a < 0 ? -a : a`` instead (``exp(-abs(x))``: 0.14 -> 3.4 ms, not
#: vectorised).  ``-DPT_NO_GUARDED_MATH`` calls the functions directly.
# The guards, written once for float and double: {t} the type, {u} its bits, {f} the libm suffix, {n}
# its size; exp's far test x + {shift} beyond +-{half} (x < -104 / -746 or x > 89 / 710), log's specials.
_EXP_GUARD = """#if defined(PT_VECTOR_EXP{F}) && !defined(PT_NO_GUARDED_MATH)
static inline {t} pt_exp{f}({t} x) {{
  const {u} far = -({u})(__builtin_fabs{f}(x + {shift}) > {half});  /* exactly 0 or inf */
  const {u} edge = -({u})(x > 0) & {inf};
  {u} u; __builtin_memcpy(&u, &x, {n}); u &= ~far;
  {t} c; __builtin_memcpy(&c, &u, {n});
  const {t} r = exp{f}(c);
  __builtin_memcpy(&u, &r, {n}); u = (u & ~far) | (edge & far);
  __builtin_memcpy(&c, &u, {n});
  return c;
}}
#else
#define pt_exp{f} exp{f}
#endif
"""
_LOG_GUARD = """#if defined(PT_VECTOR_LOG{F}) && !defined(PT_NO_GUARDED_MATH)
static inline {t} pt_log{f}({t} x) {{
  const {u} zero = -({u})(x == 0), neg = -({u})(x < 0);
  const {u} far = zero | neg | -({u})(x == __builtin_inf{f}());  /* not NaN: log's own */
  const {u} edge = (zero & {ninf}) | (neg & ~zero & {nan}) | (~zero & ~neg & {inf});
  {u} u; __builtin_memcpy(&u, &x, {n}); u = (u & ~far) | ({one} & far);
  {t} c; __builtin_memcpy(&c, &u, {n});
  const {t} r = log{f}(c);
  __builtin_memcpy(&u, &r, {n}); u = (u & ~far) | (edge & far);
  __builtin_memcpy(&c, &u, {n});
  return c;
}}
#else
#define pt_log{f} log{f}
#endif
"""
_GUARD_TYPES = {
    "f": dict(t="float", u="unsigned int", f="f", F="F", n=4, shift="7.5f", half="96.5f", inf="0x7f800000u",
              ninf="0xff800000u", nan="0xffc00000u", one="0x3f800000u"),
    "": dict(t="double", u="unsigned long long", f="", F="", n=8, shift="18.0", half="728.0",
             inf="0x7ff0000000000000ull", ninf="0xfff0000000000000ull", nan="0xfff8000000000000ull",
             one="0x3ff0000000000000ull"),
}
_GUARDED = {name + f: text.format(**kw) for f, kw in _GUARD_TYPES.items()
            for name, text in (("exp", _EXP_GUARD), ("log", _LOG_GUARD))}


PRELUDE = r"""#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* isl AST helpers: floord(n, d) rounds toward -infinity (d > 0). */
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))

static inline long pt_floordiv(long a, long b) { return floord(a, b); }
/* numpy semantics: maximum/minimum propagate NaN. */
static inline float pt_max_float32(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float pt_min_float32(float a, float b) { return (a != a || a < b) ? a : b; }
static inline double pt_max_float64(double a, double b) { return (a != a || a > b) ? a : b; }
static inline double pt_min_float64(double a, double b) { return (a != a || a < b) ? a : b; }
""" + _TYPED_HELPERS + r"""/* PlaidML's round(): half away from zero, exactly (C's round()).  floor(x + 0.5) was not: 0.49999997f + 0.5f
   rounds to 1.  Adding the largest value below one half, signed like x, rounds a half up (the tie goes
   to the even, larger magnitude) and anything less down; trunc then drops the fraction.  No branch. */
static inline double pt_round(double x) { return trunc(x + copysign(0.49999999999999994, x)); }
static inline float pt_roundf(float x) { return truncf(x + copysignf(0.49999997f, x)); }
/* numpy integer power (non-negative exponents; negative ones give 0 like C truncation). */
static inline int64_t pt_ipow(int64_t b, int64_t e) {
  int64_t r = 1;
  if (e < 0) return (b == 1) ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
  while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
  return r;
}
"""


def ctype(dtype: str) -> str:
    try:
        return D.C_TYPES[dtype]
    except KeyError:
        raise InternalError(f"no C type for dtype {dtype}") from None


def c_const(value, dtype: str) -> str:
    """A C literal of ``dtype`` with the exact value numpy would hold."""
    if dtype == "bool":
        return "1" if value else "0"
    if D.is_float(dtype):  # float16 too: its values (inf for a max's start) are doubles exactly
        v = float(value)
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "-INFINITY"
        else:
            text = repr(v)
        return f"(({ctype(dtype)}){text})"
    v = int(value)
    if dtype.startswith("uint"):
        return f"(({ctype(dtype)}){v}ULL)" if v >= 2 ** 31 else str(v)
    if v == -(2 ** 63):
        return "INT64_MIN"
    if v < 0:
        # Parenthesised: '-(-2)' must never print as '--2'.
        return f"({v})" if -(2 ** 31) < v else f"({v}LL)"
    return str(v) if v < 2 ** 31 else f"{v}LL"


class BodyPrinter:
    """Renders :mod:`polytile.poly.body` nodes as C expressions."""

    def __init__(self, arrays: Dict[str, Array], guarded: bool = False):
        self.arrays = arrays
        # exp and log through the prelude's pt_expf/pt_logf (vector_math_prelude): a Tile kernel's C only.
        self.guarded = guarded
        self.locals: Dict[str, str] = {}  # array -> scalar replacing it (array contraction)
        self.libm: set = set()  # the libm functions the rendered code calls (expf, tanh, ...: vector_math_prelude)

    def _math(self, name: str) -> str:
        """The C name a libm call goes through: the prelude's guard for :data:`GUARDED` functions
        (``exp`` -> ``pt_exp``) when this printer renders a Tile kernel, else the function itself."""
        return "pt_" + name if self.guarded and name in GUARDED else name

    def access(self, array: str, index) -> str:
        if array in self.locals:
            return self.locals[array]
        if not index:
            return f"{array}[0]"
        return array + "".join(f"[{self.expr(i)}]" for i in index)

    def as_type(self, n: B.Node, dtype: str) -> str:
        text = self.expr(n)
        if n.dtype == dtype:
            return text
        if D.is_integer(dtype) and D.is_float(n.dtype):
            return f"pt_cvt_{dtype}({text})"
        return f"(({ctype(dtype)})({text}))"

    def expr(self, n: B.Node) -> str:
        if isinstance(n, B.Iter):
            return n.name
        if isinstance(n, B.Const):
            return c_const(n.value, n.dtype)
        if isinstance(n, B.Load):
            return self.access(n.array, n.index)
        if isinstance(n, B.Neg):
            return self._narrow(f"(-{self.as_type(n.operand, n.dtype)})", n.dtype)
        if isinstance(n, B.Clamp):
            return f"pt_clamp({self.as_type(n.operand, 'int64')}, {n.lo}, {n.hi})"
        if isinstance(n, B.Cast):
            return self.as_type(n.operand, n.dtype)
        if isinstance(n, B.Bin):
            if n.op == "//":
                return f"pt_floordiv({self.expr(n.a)}, {self.expr(n.b)})"
            a, b = self.as_type(n.a, n.dtype), self.as_type(n.b, n.dtype)
            if n.op == "/" and not D.is_float(n.dtype):  # index arithmetic divides with '//'; '/' is a value's
                return f"pt_div_{n.dtype}({a}, {b})"
            if n.op in ("<<", ">>"):
                # Count modulo the width (the oracle's rule); shift the unsigned bits so '<<' never overflows.
                w = D.width(n.dtype)
                if n.dtype == "bool":
                    return f"((_Bool)((({a}) {n.op} (({b}) & 7)) & 1))"
                u = "u" + n.dtype if not n.dtype.startswith("u") else n.dtype
                return f"(({ctype(n.dtype)})(({ctype(u)})({a}) {n.op} (({b}) & {w - 1})))" if n.op == "<<" \
                    else f"(({ctype(n.dtype)})(({a}) >> (({b}) & {w - 1})))"
            return self._narrow(f"({a} {n.op} {b})", n.dtype)
        if isinstance(n, B.Cmp):
            return f"({self.as_type(n.a, n.operand_dtype)} {n.op} {self.as_type(n.b, n.operand_dtype)})"
        if isinstance(n, B.Select):
            d = _helper_dtype(n.dtype)
            text = f"pt_sel_{d}({self.as_type(n.cond, 'bool')}, {self.as_type(n.then, d)}, {self.as_type(n.else_, d)})"
            return text if d == n.dtype else f"(({ctype(n.dtype)}){text})"
        if isinstance(n, B.Call):
            return self.call(n)
        raise InternalError(f"cannot print body node {n!r}")

    def _narrow(self, text: str, dtype: str) -> str:
        """C computes narrow integers in int: convert back so the value wraps as the oracle's does."""
        if dtype in ("bool", "int8", "int16", "uint8", "uint16"):
            return f"(({ctype(dtype)}){text})"
        return text

    def call(self, n: B.Call) -> str:
        """Builtins with PlaidML's meaning (see :mod:`polytile.elemwise`)."""
        d = n.dtype
        f = n.func
        if d == "float16":
            # Through float32, rounded back: what numpy's float16 functions compute (libm has no half functions).
            wide = B.Call(f, tuple(B.Cast(a, "float32") for a in n.args), "float32")
            return f"(({ctype(d)})({self.call(wide)}))"
        isf = d in _FLOAT
        suffix = "f" if d == "float32" else ""
        args = [self.as_type(a, d) for a in n.args]
        one = c_const(1, d)
        math_name = {"asin": "asin", "acos": "acos", "atan": "atan", "erf": "erf"}.get(f, f)
        if f in ("exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "erf",
                 "floor", "ceil", "round", "pow"):
            name = "pt_round" if f == "round" else math_name
            self.libm.add(name + suffix)  # suffix "f" for float32 only: the double function otherwise
            name = self._math(name)
            if isf:
                return f"{name}{suffix}({', '.join(args)})"
            # An integer argument: computed in double, truncated back (the oracle's rule).
            dargs = ", ".join(f"(double)({a})" for a in args)
            return f"pt_cvt_{d}({name}({dargs}))"
        h = _helper_dtype(d)
        # Render each argument once, and use helpers that take each once: nested calls must stay
        # linear in size, not duplicate their operands' text.
        hargs = args if h == d else [f"(({ctype(h)})({a}))" for a in args]
        back = (lambda t: t) if h == d else (lambda t: f"(({ctype(d)}){t})")
        if f == "abs":
            return back(f"pt_abs_{h}({hargs[0]})")
        if f == "max":
            return back(f"pt_pmax_{h}({hargs[0]}, {hargs[1]})")
        if f == "min":
            return back(f"pt_pmin_{h}({hargs[0]}, {hargs[1]})")
        if f == "relu":
            return back(f"pt_relu_{h}({hargs[0]})")
        if f == "sigmoid":
            self.libm.add("exp" + suffix)
            return f"({one} / ({one} + {self._math('exp')}{suffix}(-{args[0]})))"
        if f == "recip":
            return f"({one} / {args[0]})" if isf else f"pt_div_{d}({one}, {args[0]})"
        raise InternalError(f"no C rendering of builtin {f}() for {d}")

    def store(self, s: B.Store) -> str:
        arr = self.arrays[s.array]
        target = self.access(s.array, s.index)
        value = self.as_type(s.value, arr.dtype)
        if s.reduce is None:
            return f"{target} = {value};"
        if s.reduce in ("+", "*"):
            if arr.dtype in ("bool", "int8", "int16", "uint8", "uint16"):
                return f"{target} = {self._narrow(f'({target} {s.reduce} {value})', arr.dtype)};"
        return update(target, s.reduce, value, arr.dtype)


def update(target: str, op: str, value: str, dtype: str) -> str:
    """The C statement combining ``value`` into ``target`` by reduction ``op``: ``target op= value``,
    max/min through the prelude's NaN-propagating helpers (a cell, or a lane accumulator).

    >>> update("O[i]", "max", "I[i][j]", "float32")
    'O[i] = pt_max_float32(O[i], I[i][j]);'
    """
    if op in ("+", "*"):
        return f"{target} {op}= {value};"
    return f"{target} = pt_{op}_{_helper_dtype(dtype)}({target}, {value});"


def _helper_dtype(dtype: str) -> str:
    """The prelude's helpers are written per dtype; float16 goes through float32 (exact for these ops)."""
    return "float32" if dtype == "float16" else dtype


def last_iteration(cond: str, it: str) -> Optional[str]:
    """The last value of ``it`` under a canonical loop condition ``cond`` (``it <= b``: ``b``; ``it < b``:
    ``(b) - 1``), else None (OpenMP's canonical form: a bound that does not read ``it``).

    >>> last_iteration("c0 <= 69", "c0"), last_iteration("c0 < n", "c0"), last_iteration("c0 <= c0 + 1", "c0")
    ('69', '(n) - 1', None)
    """
    m = re.match(rf"^{re.escape(it)} (<=|<) (.*)$", cond)
    if not m or re.search(rf"\b{re.escape(it)}\b", m.group(2)):
        return None
    return m.group(2) if m.group(1) == "<=" else f"({m.group(2)}) - 1"
