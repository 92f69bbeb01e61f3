"""LLVM in this process: IR -> optimised machine code in an MCJIT engine, via llvmlite.

LLVM is initialised once per process; every module is optimised by LLVM's O3 pipeline (loop and
SLP vectorisation on) for the host's CPU name and features and gets its own MCJIT engine, which
its owner keeps alive (:class:`polytile.runtime.jit.JitFunction` for kernels,
:mod:`polytile.runtime.spread` for its helper).  No C compiler is involved.

Parallel regions call libgomp (``GOMP_parallel``), loaded once by :mod:`polytile.runtime.openmp` so the JIT
resolves its symbols and :mod:`polytile.runtime.threads` sets the thread count of the same runtime;
libm's functions (``expf``, ``tanh``, ``erf``...) resolve from the process.

    >>> # eng = engine(text); eng.get_function_address("pt_matmul")
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading

from polytile.errors import InternalError, PolytileEnvironmentError

_lock = threading.Lock()
_compile_lock = threading.Lock()
_state: dict = {}


class JitError(InternalError):
    """LLVM could not compile a generated module (a polytile bug: the message holds LLVM's words)."""


def _llvm():
    """llvmlite's binding layer, initialised once, and the host's target machine."""
    with _lock:
        if "tm" not in _state:
            try:
                import llvmlite.binding as llvm
            except ImportError as exc:  # pragma: no cover - llvmlite is a dependency
                raise PolytileEnvironmentError(f"the llvm target needs llvmlite ({exc}); pip install llvmlite") from None
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _state["llvm"] = llvm
            _state["tm"] = _host_machine(llvm)
            _load_library(llvm, "libm.so.6", "m")
        return _state["llvm"], _state["tm"]


def _load_library(llvm, soname: str, short: str) -> bool:
    """Make a library's symbols visible to the JIT: glibc's ``soname`` directly (``dlopen`` searches the
    usual paths), else whatever ``ctypes.util.find_library(short)`` finds -- which runs ``ldconfig`` in a
    subprocess, ~5 ms of a cold process's first llvm kernel.  False when neither loads."""
    for name in (soname, None):
        path = name or ctypes.util.find_library(short)
        if not path:
            continue
        try:
            llvm.load_library_permanently(path)
            return True
        except RuntimeError:
            continue
    return False


def _host_machine(llvm):
    """A target machine for this host's CPU (name and features), at -O3, for the JIT."""
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, jit=True)


def vector_isas() -> str:
    """The x86-64 vector-ABI ISA letters whose glibc vector functions (libmvec) the JIT can call here:
    ``b`` (SSE, every x86-64), ``d`` (AVX2), ``e`` (AVX-512F), or ``""`` off x86-64 or without libmvec,
    which this loads into the JIT's symbol space once (the llvm target's ``codegen.llvm_vmath``).

    >>> set(vector_isas()) <= set("bde")
    True
    """
    llvm, _ = _llvm()
    with _lock:
        if "isas" not in _state:
            isas = ""
            if llvm.get_process_triple().startswith("x86_64") and _load_library(llvm, "libmvec.so.1", "mvec"):
                features = llvm.get_host_cpu_features()
                isas = "b" + ("d" if features.get("avx2") else "") + ("e" if features.get("avx512f") else "")
            _state["isas"] = isas
        return _state["isas"]


def resolves(symbol: str) -> bool:
    """Whether the JIT finds ``symbol`` in the libraries loaded so far.

    >>> resolves("expf"), resolves("pt_no_such_function")
    (True, False)
    """
    llvm, _ = _llvm()
    return bool(llvm.address_of_symbol(symbol))


def optimise(text: str):
    """The module of LLVM IR ``text``, verified and optimised at O3 for the host (a binding ModuleRef).

    >>> # str(optimise(source.text)) is the IR the JIT compiles
    """
    llvm, tm = _llvm()
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as exc:
        raise JitError(f"LLVM rejected the generated module: {exc}") from None
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def engine(text: str, optimised: bool = True):
    """An MCJIT engine holding the machine code of LLVM IR ``text`` (optimised by :func:`optimise`, or
    only verified and compiled at -O0 with ``optimised=False``: a measurement loop must stay as written,
    and that saves ~8 ms).

    >>> # address = engine(text).get_function_address("pt_entry")
    """
    llvm, _ = _llvm()
    # LLVM's global context is not safe for concurrent use: modules compiled from several Python
    # threads (ctypes and llvmlite release the GIL) take turns.
    with _compile_lock:
        if optimised:
            mod = optimise(text)
        else:
            try:
                mod = llvm.parse_assembly(text)
                mod.verify()
            except RuntimeError as exc:
                raise JitError(f"LLVM rejected the generated module: {exc}") from None
        # A function the module calls but no loaded library defines (omp_* without libgomp) would be
        # called at address 0: refuse here instead.
        missing = [f.name for f in mod.functions
                   if f.is_declaration and not f.name.startswith("llvm.") and not llvm.address_of_symbol(f.name)]
        if missing:
            raise PolytileEnvironmentError(f"the kernel calls {', '.join(sorted(missing))}, which no loaded library "
                                           f"defines (is libgomp or libm missing?)")
        # An engine owns (and disposes of) its target machine: each gets its own, the shared one stays.
        # Unoptimised code needs no host tuning: a plain machine at -O0 costs ~1 ms instead of ~4.
        machine = _host_machine(llvm) if optimised else llvm.Target.from_triple(
            llvm.get_process_triple()).create_target_machine(opt=0, jit=True)
        eng = llvm.create_mcjit_compiler(mod, machine)
        eng.finalize_object()
        return eng
