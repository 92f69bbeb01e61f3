"""libm calls the llvm target's loop vectoriser can replace by glibc's vector variants (libmvec).

The C target gets them from gcc with ``#pragma omp declare simd`` (:func:`.c_expr.vector_math_prelude`);
LLVM's loop vectoriser takes the same information from a call site's VFABI attribute::

    %y = call float @"pt.vm.expf"(float %x) readnone nounwind
             "vector-function-abi-variant"="_ZGV_LLVM_N16v_pt.vm.expf(_ZGVeN16v_expf),..."

and then calls ``_ZGVeN16v_expf`` on 16 lanes at a time (tanhf over 2^20 floats: 10.5 -> 0.26 ms on
Zen 5).  Three details make it happen:

* The scalar callee is ``pt.vm.expf`` (a name no entry point can take), a never-inlined internal function that calls ``expf``: LLVM turns
  a side-effect-free call of ``expf`` itself into the ``llvm.exp`` intrinsic before vectorising, and
  its vector form is then split back into 16 scalar calls.  The loop's remainder calls the wrapper.
* The vector variants are declared and kept in ``@llvm.compiler.used`` (:func:`keep_declarations`);
  unused declarations are deleted before the vectoriser runs, and a variant it cannot see is not used.
* Which variants exist is a property of the machine the JIT runs on (glibc's libmvec, the CPU's ISA):
  the target builds the :func:`table` from what the runtime finds (``runtime.llvm_engine.vector_isas``,
  ``resolves``) and passes it in.  The
  results are those of the C target: glibc's vector functions, within 4 ulp of libm.

    >>> variant_name("e", 16, 1, "expf"), variant_name("b", 2, 2, "pow")
    ('_ZGVeN16v_expf', '_ZGVbN2vv_pow')
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Sequence, Tuple

from llvmlite import ir

from .c_expr import LIBMVEC

I8P = ir.PointerType(ir.IntType(8))

#: x86-64 vector ABI ISA letters (SSE, AVX2, AVX-512) and their register width in bytes.
ISA_BYTES = {"b": 16, "d": 32, "e": 64}


@dataclass(frozen=True)
class Variant:
    """One vector variant of a scalar libm function: ``lanes`` elements per call, ABI ISA letter ``isa``."""

    lanes: int
    isa: str
    name: str


#: Scalar libm name (``expf``, ``pow``) -> the variants the JIT may call on this machine.
VectorMath = Mapping[str, Tuple[Variant, ...]]


def variant_name(isa: str, lanes: int, arity: int, scalar: str) -> str:
    """glibc's symbol for a variant: ``_ZGV<isa>N<lanes><v per argument>_<scalar>`` (unmasked)."""
    return f"_ZGV{isa}N{lanes}{'v' * arity}_{scalar}"


def candidates(scalar: str, itemsize: int, arity: int, isas: Sequence[str]) -> Tuple[Variant, ...]:
    """The variants of ``scalar`` for the ISAs ``isas`` (lanes: the ISA's register over ``itemsize``).

    >>> [v.name for v in candidates("expf", 4, 1, "bde")]
    ['_ZGVbN4v_expf', '_ZGVdN8v_expf', '_ZGVeN16v_expf']
    """
    return tuple(Variant(ISA_BYTES[i] // itemsize, i, variant_name(i, ISA_BYTES[i] // itemsize, arity, scalar))
                 for i in isas)


def table(isas: str, resolves: Callable[[str], bool]) -> VectorMath:
    """The variants of every libm function the C target also vectorises (:data:`.c_expr.LIBMVEC`), for
    the ISAs ``isas`` of the JIT's machine, kept where ``resolves(symbol)`` (the runtime's lookup).

    >>> [v.name for v in table("bd", lambda name: "N8" in name)["tanhf"]]
    ['_ZGVdN8v_tanhf']
    """
    out = {}
    for names in LIBMVEC.values():
        for name in names:
            arity = 2 if name == "pow" else 1
            for scalar, itemsize in ((name + "f", 4), (name, 8)):
                found = tuple(v for v in candidates(scalar, itemsize, arity, isas) if resolves(v.name))
                if found:
                    out[scalar] = found
    return out


class _VectorCallAttributes(ir.instructions.CallInstrAttributes):
    """Call-site attributes with one string attribute, the VFABI mapping (llvmlite knows only keywords)."""

    def add(self, name):
        if name.startswith('"vector-function-abi-variant"='):
            return set.add(self, name)
        return super().add(name)


class VectorCalls:
    """The vector-capable libm calls of one module: wrappers and declarations made on first use.

    >>> # calls = VectorCalls(module, table); y = calls.call(builder, "expf", [x], ir.FloatType())
    """

    def __init__(self, module: ir.Module, table: VectorMath):
        self.module = module
        self.table = table
        self._wrappers: Dict[str, ir.Function] = {}
        self.declared: List[ir.Function] = []

    def available(self, scalar: str) -> bool:
        return bool(self.table.get(scalar))

    def call(self, b: ir.IRBuilder, scalar: str, args: List[ir.Value], t: ir.Type) -> ir.Value:
        """``scalar(args)`` through its wrapper, with the call-site mapping to every vector variant."""
        wrapper = self._wrapper(scalar, t, len(args))
        call = b.call(wrapper, args)
        attrs = _VectorCallAttributes(["readnone", "nounwind"])
        mapping = ",".join(f"_ZGV_LLVM_N{v.lanes}{'v' * len(args)}_{wrapper.name}({v.name})"
                           for v in self.table[scalar])
        attrs.add(f'"vector-function-abi-variant"="{mapping}"')
        call.attributes = attrs
        return call

    def _wrapper(self, scalar: str, t: ir.Type, arity: int) -> ir.Function:
        fn = self._wrappers.get(scalar)
        if fn is not None:
            return fn
        m = self.module
        libm = m.globals.get(scalar) or ir.Function(m, ir.FunctionType(t, [t] * arity), scalar)
        fn = ir.Function(m, ir.FunctionType(t, [t] * arity), f"pt.vm.{scalar}")
        # Not internal: LLVM's interprocedural passes rewrite an internal function's signature, and a
        # constant argument (pow(x, 2)) left the wrapper with one parameter against a two-argument
        # (``vv``) mapping, which the verifier rejects by aborting the process.  An ODR definition keeps
        # its signature and may still be defined by every module.
        fn.linkage = "linkonce_odr"
        fn.attributes.add("noinline")
        wb = ir.IRBuilder(fn.append_basic_block("entry"))
        wb.ret(wb.call(libm, list(fn.args)))
        for v in self.table[scalar]:
            vt = ir.VectorType(t, v.lanes)
            self.declared.append(m.globals.get(v.name) or ir.Function(m, ir.FunctionType(vt, [vt] * arity), v.name))
        self._wrappers[scalar] = fn
        return fn

    def keep_declarations(self) -> None:
        """``@llvm.compiler.used`` holding every vector variant declared (call once, after the body)."""
        if not self.declared:
            return
        arr = ir.ArrayType(I8P, len(self.declared))
        g = ir.GlobalVariable(self.module, arr, "llvm.compiler.used")
        g.linkage = "appending"
        g.section = "llvm.metadata"
        g.initializer = ir.Constant(arr, [f.bitcast(I8P) for f in self.declared])
