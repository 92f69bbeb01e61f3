"""Statement bodies as LLVM IR: :mod:`polytile.poly.body` nodes -> llvmlite instructions.

The meaning is exactly that of the C back end's helpers (:mod:`.c_expr`), which give C the oracle's
semantics where C differs: NaN-propagating max/min of reductions, integer division pinned at zero
and at ``MIN / -1``, float -> integer conversion that truncates to 64 bits and keeps the low bits
(NaN and out-of-range values give 0), narrow integers wrapping, shift counts masked by the width,
selects that evaluate both operands, half-away-from-zero rounding.  Each rule is written once here,
next to the C helper it mirrors.

Values of ``bool`` live in registers as ``i1`` and in memory as one byte (numpy's and C's ``_Bool``).
Float arithmetic carries LLVM's ``contract`` flag only: gcc compiles the C target in GNU C mode,
whose default ``-ffp-contract=fast`` fuses multiply-adds, and nothing else is relaxed.

    >>> # e = BodyEmitter(module, arrays); e.b = builder; e.ptrs = {"A": ptr}
    >>> # e.store(st.body, {"i": i64_value})   emits A[i] = ...
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from llvmlite import ir

from polytile import dtypes as D
from polytile.errors import InternalError, PolytileError
from polytile.poly import body as B
from polytile.poly.scop import Array

from .llvm_vmath import VectorCalls, VectorMath

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
VOID = ir.VoidType()
I8P = ir.PointerType(I8)
#: Fast-math flags of float arithmetic: contraction only (gcc's GNU C default), never reassociation.
FP = ("contract",)

_FLOAT = ("float32", "float64")


def _suffix(dtype: str) -> str:
    """The type suffix of a floating-point LLVM intrinsic (``llvm.fabs.f32``)."""
    return "f32" if dtype == "float32" else "f64"


class _Unbound(InternalError):
    """An isl AST expression names an iterator that is not in scope (a register tile falls back)."""


class UnsupportedConstruct(PolytileError):
    """Something the llvm target cannot compile (its message names it; the openmp target may)."""


def value_type(dtype: str) -> ir.Type:
    """The LLVM type a value of ``dtype`` has in registers.

    >>> str(value_type("float32")), str(value_type("bool")), str(value_type("uint16"))
    ('float', 'i1', 'i16')
    """
    if dtype == "float32":
        return F32
    if dtype == "float64":
        return F64
    if dtype == "bool":
        return I1
    if dtype in D.INTEGERS:
        return ir.IntType(D.width(dtype))
    raise UnsupportedConstruct(f"the llvm target has no type for dtype {dtype}")


def memory_type(dtype: str) -> ir.Type:
    """The LLVM type of one array element of ``dtype`` (``bool`` is a byte)."""
    return I8 if dtype == "bool" else value_type(dtype)


def const(value, dtype: str) -> ir.Constant:
    """An exact constant of ``dtype`` (integers wrapped to the width, as C converts them).

    >>> str(const(255, "int8")), str(const(0.1, "float32"))
    ('i8 -1', 'float 0x3fb99999a0000000')
    """
    t = value_type(dtype)
    if dtype in _FLOAT:
        return ir.Constant(t, float(value))
    if dtype == "bool":
        return ir.Constant(I1, 1 if value else 0)
    w = t.width
    v = int(value) & ((1 << w) - 1)
    return ir.Constant(t, v - (1 << w) if v >= 1 << (w - 1) else v)


def _signed(dtype: str) -> bool:
    return dtype in D.INTEGERS and not D.is_unsigned(dtype)


class BodyEmitter:
    """Emits statement bodies into the function of builder ``b``.

    ``ptrs`` maps each array to its element pointer in that function, ``locals`` a contracted array to
    the ``alloca`` of its scalar; the code generator swaps them when it enters an outlined function.
    """

    def __init__(self, module: ir.Module, arrays: Dict[str, Array], vector_math: Optional[VectorMath] = None):
        self.module = module
        self.arrays = arrays
        self.vector = VectorCalls(module, vector_math or {})  # libm calls the vectoriser may widen
        self.b: ir.IRBuilder = None  # type: ignore[assignment]
        self.ptrs: Dict[str, ir.Value] = {}
        self.locals: Dict[str, ir.Value] = {}

    # -- declarations ------------------------------------------------------
    def function(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        """The module's declaration of ``name`` (made on first use)."""
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, list(args)), name)
        return fn

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        return self.function(name, ret, args)

    # -- addresses ---------------------------------------------------------
    def address(self, array: str, index: Sequence[ir.Value]) -> ir.Value:
        """Pointer to ``array[index]`` (row-major offsets from the array's shape; ``A[0]`` for a 0-d array)."""
        arr = self.arrays[array]
        ptr = self.ptrs.get(array)
        if ptr is None:
            raise InternalError(f"array {array} is not in scope of the llvm code generator")
        if not index:
            return ptr
        offset = index[0]
        for d in range(1, len(index)):
            n = arr.shape[d]
            if n < 0:
                raise UnsupportedConstruct(f"array {array} has an unknown extent: the llvm target needs shapes")
            offset = self.b.add(self.b.mul(offset, ir.Constant(I64, n)), index[d])
        return self.b.gep(ptr, [offset], inbounds=True)

    def load_elem(self, ptr: ir.Value, dtype: str) -> ir.Value:
        v = self.b.load(ptr, align=D.width(dtype) // 8 if dtype != "bool" else 1)
        return self.b.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if dtype == "bool" else v

    def store_elem(self, value: ir.Value, ptr: ir.Value, dtype: str) -> None:
        if dtype == "bool":
            value = self.b.zext(value, I8)
        self.b.store(value, ptr, align=D.width(dtype) // 8 if dtype != "bool" else 1)

    def access(self, array: str, index: Sequence[B.Node], env) -> ir.Value:
        """Pointer to the cell ``array[index]`` (the scalar of a contracted array)."""
        if array in self.locals:
            return self.locals[array]
        return self.address(array, [self.as_type(e, "int64", env) for e in index])

    # -- conversions ---------------------------------------------------------
    def convert(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """C's conversion of ``v`` from ``src`` to ``dst``, float -> integer through ``pt_cvt_*``."""
        b = self.b
        if src == dst:
            return v
        if dst in D.INTEGERS and src in _FLOAT:
            return self.cvt(self.to_double(v, src), dst)
        t = value_type(dst)
        if dst == "bool":  # (_Bool)x: x != 0 (a NaN is true)
            if src in _FLOAT:
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if src == "bool":
            return b.uitofp(v, t) if dst in _FLOAT else b.zext(v, t)
        if src in _FLOAT and dst in _FLOAT:
            return b.fpext(v, t) if dst == "float64" else b.fptrunc(v, t)
        if dst in _FLOAT:
            return b.sitofp(v, t) if _signed(src) else b.uitofp(v, t)
        sw, dw = D.width(src), D.width(dst)
        if dw < sw:
            return b.trunc(v, t)
        if dw > sw:
            return b.sext(v, t) if _signed(src) else b.zext(v, t)
        return v

    def to_double(self, v: ir.Value, src: str) -> ir.Value:
        return self.convert(v, src, "float64") if src != "float64" else v

    def cvt(self, x: ir.Value, dst: str) -> ir.Value:
        """``pt_cvt_<dst>(double x)``: truncate to int64 when ``-2^63 < x < 2^63`` and keep the low bits; else 0.

        ``pt_cvt_bool`` is the oracle's truth of a float: finite and ``|x| >= 1``.
        """
        b = self.b
        if dst == "bool":
            finite = b.fcmp_ordered("==", b.fsub(x, x, flags=FP), ir.Constant(F64, 0.0))
            big = b.or_(b.fcmp_ordered(">=", x, ir.Constant(F64, 1.0)), b.fcmp_ordered("<=", x, ir.Constant(F64, -1.0)))
            return b.and_(finite, big)
        inside = b.and_(b.fcmp_ordered(">", x, ir.Constant(F64, -9223372036854775808.0)),
                        b.fcmp_ordered("<", x, ir.Constant(F64, 9223372036854775808.0)))
        # The saturating conversion is defined for every input (plain fptosi is poison out of range).
        i = b.call(self.intrinsic("llvm.fptosi.sat.i64.f64", I64, [F64]), [x])
        i = b.select(inside, i, ir.Constant(I64, 0))
        t = value_type(dst)
        return b.trunc(i, t) if t.width < 64 else i

    def as_type(self, n: B.Node, dtype: str, env) -> ir.Value:
        return self.convert(self.expr(n, env), n.dtype, dtype)

    # -- expressions ---------------------------------------------------------
    def expr(self, n: B.Node, env: Dict[str, ir.Value]) -> ir.Value:
        """The value of body node ``n``; ``env`` maps iterator names to i64 values."""
        b = self.b
        if isinstance(n, B.Iter):
            try:
                v = env[n.name]
            except KeyError:
                raise InternalError(f"iterator {n.name} unbound in the llvm code generator") from None
            return self.convert(v, "int64", n.dtype) if n.dtype != "int64" else v
        if isinstance(n, B.Const):
            return const(n.value, n.dtype)
        if isinstance(n, B.Load):
            return self.load_elem(self.access(n.array, n.index, env), n.dtype)
        if isinstance(n, B.Neg):
            v = self.as_type(n.operand, n.dtype, env)
            if n.dtype in _FLOAT:
                return b.fneg(v)
            if n.dtype == "bool":  # (_Bool)(-x) == x
                return v
            return b.sub(ir.Constant(v.type, 0), v)
        if isinstance(n, B.Clamp):
            x = self.as_type(n.operand, "int64", env)
            lo, hi = ir.Constant(I64, n.lo), ir.Constant(I64, n.hi)
            return b.select(b.icmp_signed("<", x, lo), lo, b.select(b.icmp_signed(">", x, hi), hi, x))
        if isinstance(n, B.Cast):
            return self.as_type(n.operand, n.dtype, env)
        if isinstance(n, B.Bin):
            if n.op == "//":
                return self.floordiv(self.as_type(n.a, "int64", env), self.as_type(n.b, "int64", env))
            return self.binary(n.op, self.as_type(n.a, n.dtype, env), self.as_type(n.b, n.dtype, env), n.dtype)
        if isinstance(n, B.Cmp):
            return self.compare(n.op, self.as_type(n.a, n.operand_dtype, env), self.as_type(n.b, n.operand_dtype, env),
                                n.operand_dtype)
        if isinstance(n, B.Select):
            # pt_sel_*: both operands are evaluated, then one is chosen.
            c = self.as_type(n.cond, "bool", env)
            return b.select(c, self.as_type(n.then, n.dtype, env), self.as_type(n.else_, n.dtype, env))
        if isinstance(n, B.Call):
            return self.call(n, env)
        raise UnsupportedConstruct(f"the llvm target cannot compile body node {type(n).__name__}")

    def floordiv(self, a: ir.Value, d: ir.Value) -> ir.Value:
        """isl's ``floord(n, d)`` for ``d > 0``: ``n >> log2(d)`` for a constant power of two, else the
        truncated quotient less one where the remainder is negative.  (The select of two divisions this
        replaced, ``n < 0 ? -((-n + d - 1) / d) : n / d``, crashed LLVM 14's loop vectoriser on an
        assertion, aborting the process: ``I[(i - 5) / 2]`` at N = 64.)

        >>> # floord(-7, 2) = -7 >> 1 = -4;  floord(-7, 3) = -2 - 1 = -3;  floord(7, 3) = 2 - 0 = 2
        """
        b = self.b
        k = getattr(d, "constant", None)
        if isinstance(k, int) and k > 0 and k & (k - 1) == 0:
            return b.ashr(a, ir.Constant(a.type, k.bit_length() - 1))
        negative = b.icmp_signed("<", b.srem(a, d), ir.Constant(a.type, 0))
        return b.sub(b.sdiv(a, d), b.zext(negative, a.type))

    def binary(self, op: str, a: ir.Value, c: ir.Value, dtype: str) -> ir.Value:
        b = self.b
        if dtype in _FLOAT:
            ops = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}
            if op not in ops:
                raise UnsupportedConstruct(f"the llvm target has no {op!r} on {dtype}")
            return ops[op](a, c, flags=FP)
        if dtype == "bool":
            # C computes in int and converts back: + is or, - is xor, * and / are and; a shift keeps
            # bit 0 only when the count is 0.
            if op in ("+", "|"):
                return b.or_(a, c)
            if op in ("-", "^"):
                return b.xor(a, c)
            if op in ("*", "/", "&"):
                return b.and_(a, c)
            if op in ("<<", ">>"):
                return b.and_(a, b.not_(c))
            raise UnsupportedConstruct(f"the llvm target has no {op!r} on bool")
        signed = _signed(dtype)
        if op == "/":
            return self.int_div(a, c, signed)
        if op in ("<<", ">>"):
            count = b.and_(c, ir.Constant(c.type, D.width(dtype) - 1))  # the count modulo the width
            if op == "<<":
                return b.shl(a, count)
            return b.ashr(a, count) if signed else b.lshr(a, count)
        ops = {"+": b.add, "-": b.sub, "*": b.mul, "&": b.and_, "|": b.or_, "^": b.xor}
        if op not in ops:
            raise UnsupportedConstruct(f"the llvm target has no {op!r} on {dtype}")
        return ops[op](a, c)  # no nsw/nuw: narrow and wide integers wrap, as the oracle's do

    def int_div(self, a: ir.Value, c: ir.Value, signed: bool) -> ir.Value:
        """``pt_div_*``: C's division toward zero with ``x / 0 == 0`` and ``MIN / -1`` wrapping."""
        b = self.b
        zero, one = ir.Constant(a.type, 0), ir.Constant(a.type, 1)
        is_zero = b.icmp_unsigned("==", c, zero)
        if not signed:
            q = b.udiv(a, b.select(is_zero, one, c))
            return b.select(is_zero, zero, q)
        minus_one = ir.Constant(a.type, -1)
        is_m1 = b.icmp_signed("==", c, minus_one)
        safe = b.select(b.or_(is_zero, is_m1), one, c)  # never divide by 0 or overflow MIN / -1
        q = b.sdiv(a, safe)
        return b.select(is_zero, zero, b.select(is_m1, b.sub(zero, a), q))

    def compare(self, op: str, a: ir.Value, c: ir.Value, dtype: str) -> ir.Value:
        b = self.b
        if dtype in _FLOAT:
            # C: every comparison is false on a NaN except '!=', which is true.
            return b.fcmp_unordered(op, a, c) if op == "!=" else b.fcmp_ordered(op, a, c)
        return b.icmp_signed(op, a, c) if _signed(dtype) else b.icmp_unsigned(op, a, c)

    def less(self, a: ir.Value, c: ir.Value, dtype: str) -> ir.Value:
        return self.compare("<", a, c, dtype)

    # -- builtins --------------------------------------------------------------
    def libm(self, name: str, args: List[ir.Value], dtype: str) -> ir.Value:
        t = value_type(dtype)
        suffix = "f" if dtype == "float32" else ""
        if name in ("sqrt", "floor", "ceil"):
            # Correctly rounded (sqrt) or exact (floor, ceil): the intrinsic is libm's result.
            return self.b.call(self.intrinsic(f"llvm.{name}.{_suffix(dtype)}", t, [t]), args)
        if name == "round":
            return self.round(args[0], dtype)
        if self.vector.available(name + suffix):
            if name == "exp":
                return self.guarded_exp(args[0], dtype)
            if name == "log":
                return self.guarded_log(args[0], dtype)
            return self.vector.call(self.b, name + suffix, args, t)
        return self.b.call(self.function(name + suffix, t, [t] * len(args)), args)

    def guarded_exp(self, x: ir.Value, dtype: str) -> ir.Value:
        """The C prelude's ``pt_expf``/``pt_exp`` (:data:`.c_expr._GUARDED`): lanes whose result is
        exactly 0 or inf take glibc's vector exp of 0 and their value by select, so no lane of a masked
        softmax's ``exp(-1e9)`` goes through libmvec's scalar callout."""
        b, t = self.b, value_type(dtype)
        shift, half = (7.5, 96.5) if dtype == "float32" else (18.0, 728.0)
        far = b.fcmp_ordered(">", b.call(self.intrinsic(f"llvm.fabs.{_suffix(dtype)}", t, [t]),
                                         [b.fadd(x, ir.Constant(t, shift))]), ir.Constant(t, half))
        r = self.vector.call(b, "expf" if dtype == "float32" else "exp", [b.select(far, ir.Constant(t, 0.0), x)], t)
        s = b.select(b.fcmp_ordered(">", x, ir.Constant(t, 0.0)), ir.Constant(t, float("inf")), ir.Constant(t, 0.0))
        return b.select(far, s, r)

    def guarded_log(self, x: ir.Value, dtype: str) -> ir.Value:
        """The C prelude's ``pt_logf``/``pt_log``: zero, negative and infinite lanes take glibc's vector log
        of 1 and their value (-inf, the default NaN, inf) by select (a log of probabilities with exact zeros
        went through libmvec's scalar callout)."""
        b, t = self.b, value_type(dtype)
        bits = ir.IntType(32 if dtype == "float32" else 64)
        nan = 0xffc00000 if dtype == "float32" else 0xfff8000000000000
        zero = b.fcmp_ordered("==", x, ir.Constant(t, 0.0))
        neg = b.fcmp_ordered("<", x, ir.Constant(t, 0.0))
        far = b.or_(b.or_(zero, neg), b.fcmp_ordered("==", x, ir.Constant(t, float("inf"))))
        r = self.vector.call(b, "logf" if dtype == "float32" else "log", [b.select(far, ir.Constant(t, 1.0), x)], t)
        edge = b.select(zero, ir.Constant(t, float("-inf")),
                        b.select(neg, b.bitcast(ir.Constant(bits, nan), t), ir.Constant(t, float("inf"))))
        return b.select(far, edge, r)

    def round(self, x: ir.Value, dtype: str) -> ir.Value:
        """``pt_round``: half away from zero, exactly: LLVM's ``llvm.round`` is C's ``round()``."""
        return self.b.call(self.intrinsic(f"llvm.round.{_suffix(dtype)}", x.type, [x.type]), [x])

    def call(self, n: B.Call, env) -> ir.Value:
        """Builtins with the meaning of :meth:`.c_expr.BodyPrinter.call`."""
        b = self.b
        d, f = n.dtype, n.func
        isf = d in _FLOAT
        args = [self.as_type(a, d, env) for a in n.args]
        if f in ("exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "erf",
                 "floor", "ceil", "round", "pow"):
            if isf:
                return self.libm(f, args, d)
            # An integer argument: computed in double, converted back by pt_cvt (the oracle's rule).
            return self.cvt(self.libm(f, [self.to_double(a, d) for a in args], "float64"), d) \
                if d != "bool" else self.cvt(self.libm(f, [self.to_double(a, d) for a in args], "float64"), "bool")
        if d not in _FLOAT and d not in D.INTEGERS and d != "bool":
            raise UnsupportedConstruct(f"the llvm target has no builtin {f}() for {d}")
        zero = const(0, d)
        if f == "abs":  # pt_abs: a < 0 ? -a : a (unsigned and bool: a)
            if d == "bool" or D.is_unsigned(d):
                return args[0]
            neg = b.fneg(args[0]) if isf else b.sub(zero, args[0])
            return b.select(self.less(args[0], zero, d), neg, args[0])
        if f == "max":  # pt_pmax: a < b ? b : a
            return b.select(self.less(args[0], args[1], d), args[1], args[0])
        if f == "min":  # pt_pmin: a < b ? a : b
            return b.select(self.less(args[0], args[1], d), args[0], args[1])
        if f == "relu":  # pt_relu: a < 0 ? 0 : a
            return b.select(self.less(args[0], zero, d), zero, args[0])
        if f == "sigmoid":
            if isf:
                one = const(1, d)
                e = self.libm("exp", [b.fneg(args[0])], d)
                return b.fdiv(one, b.fadd(one, e, flags=FP), flags=FP)
            # C: the integer operand negated in int, exp in double, the double result converted back.
            x = self.to_double(args[0], d)
            e = self.libm("exp", [b.fneg(x)], "float64")
            one = ir.Constant(F64, 1.0)
            return self.cvt(b.fdiv(one, b.fadd(one, e, flags=FP), flags=FP), d)
        if f == "recip":
            return b.fdiv(const(1, d), args[0], flags=FP) if isf else self.binary("/", const(1, d), args[0], d)
        raise UnsupportedConstruct(f"the llvm target has no builtin {f}() for {d}")

    # -- statements --------------------------------------------------------------
    def reduce(self, op: str, old: ir.Value, value: ir.Value, dtype: str) -> ir.Value:
        """``old (op) value`` for a reduction: ``+``/``*`` wrap, ``max``/``min`` as ``pt_max_*`` (NaN wins)."""
        b = self.b
        if op in ("+", "*"):
            return self.binary(op, old, value, dtype)
        if op not in ("max", "min"):
            raise UnsupportedConstruct(f"the llvm target has no reduction {op!r}")
        if dtype == "bool":  # pt_max_bool: a || b; pt_min_bool: a && b
            return b.or_(old, value) if op == "max" else b.and_(old, value)
        cmp = ">" if op == "max" else "<"
        if dtype in _FLOAT:  # (a != a || a > b) ? a : b
            keep = b.or_(b.fcmp_unordered("uno", old, old), b.fcmp_ordered(cmp, old, value))
        else:
            keep = self.compare(cmp, old, value, dtype)
        return b.select(keep, old, value)

    def store(self, s: B.Store, env: Dict[str, ir.Value], *, lanes: bool = False) -> None:
        """``array[index] = value`` or the reduction update of statement body ``s``; with ``lanes`` (a
        float ``+``/``*``/``max``/``min`` into one cell along its loop: ``c_accumulate.lane_reduction``)
        the update may be reassociated, so LLVM keeps the cell in a register and reduces it in vector lanes."""
        dtype = self.arrays[s.array].dtype
        ptr = self.access(s.array, s.index, env)
        value = self.as_type(s.value, dtype, env)
        if s.reduce is not None and lanes and dtype in _FLOAT and s.reduce in ("+", "*"):
            op = self.b.fadd if s.reduce == "+" else self.b.fmul
            value = op(self.load_elem(ptr, dtype), value, flags=FP + ("reassoc",))
        elif s.reduce in ("max", "min") and lanes and dtype in _FLOAT:
            # llvm.maximum/minimum: NaN-propagating like pt_max_* (the signed zeros aside, which compare
            # equal), and a reduction kind the loop vectoriser splits into lanes; the select is not.
            t = value_type(dtype)
            fn = self.intrinsic(f"llvm.{s.reduce}imum.{_suffix(dtype)}", t, [t, t])
            value = self.b.call(fn, [self.load_elem(ptr, dtype), value])
        elif s.reduce is not None:
            value = self.reduce(s.reduce, self.load_elem(ptr, dtype), value, dtype)
        self.store_elem(value, ptr, dtype)


def identity(op: str, dtype: str) -> ir.Constant:
    """The identity of reduction ``op`` in ``dtype`` (a thread's private copy starts there).

    >>> str(identity("max", "int8")), str(identity("*", "float32"))
    ('i8 -128', 'float 0x3ff0000000000000')
    """
    return const(D.reduction_identity(op, dtype), dtype)
