"""The in-process compiler of the ``llvm`` target: LLVM IR -> optimised machine code, via llvmlite.

LLVM is initialised once per process; every kernel gets a module optimised by LLVM's O3 pipeline
(loop and SLP vectorisation on) for the host's CPU name and features, and its own MCJIT engine,
which :class:`JitFunction` keeps alive as long as the kernel.  No C compiler is involved.

Parallel regions call libgomp (``GOMP_parallel``), loaded once with ``RTLD_GLOBAL`` so the JIT
resolves its symbols and :mod:`polytile.runtime.threads` sets the thread count of the same runtime;
libm's functions (``expf``, ``tanh``, ``erf``...) resolve from the process.

    >>> # fn = compile_ir(source.text, source.entry, len(source.params)); fn(A, B, C)
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import Any, Optional

import numpy as np

from polytile.errors import InternalError, PolytileEnvironmentError
from polytile.runtime.loader import call_entry

_lock = threading.Lock()
_compile_lock = threading.Lock()
_state: dict = {}

#: Where libgomp is looked for (the first that loads wins); ``POLYTILE_LIBGOMP`` names another.
GOMP_NAMES = ("libgomp.so.1", "/usr/lib/x86_64-linux-gnu/libgomp.so.1", "libgomp.so")


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
            libm = ctypes.util.find_library("m")
            if libm:
                llvm.load_library_permanently(libm)
        return _state["llvm"], _state["tm"]


def _host_machine(llvm):
    """A target machine for this host's CPU (name and features), at -O3, for the JIT."""
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, jit=True)


def gomp() -> Optional[str]:
    """The path or name of the libgomp this process uses for parallel regions, or None if there is none.

    >>> gomp() is None or "gomp" in gomp()
    True
    """
    llvm, _ = _llvm()
    with _lock:
        if "gomp" not in _state:
            found = None
            names = (os.environ.get("POLYTILE_LIBGOMP"),) + GOMP_NAMES
            for name in names:
                if not name:
                    continue
                try:
                    ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
                    llvm.load_library_permanently(name)
                except (OSError, RuntimeError):
                    continue
                found = name
                break
            _state["gomp"] = found
        return _state["gomp"]


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


class JitFunction:
    """The entry point of one JIT-compiled kernel: ``int f(void *a0, ...)`` like a built library's.

    It holds the execution engine (and so the machine code) for as long as it lives; it has the call
    interface of :class:`polytile.runtime.KernelFunction`.

    >>> # fn = compile_ir(text, "pt_matmul", 3); fn(A, B, C)
    """

    library = None  # no shared library on disk

    def __init__(self, engine: Any, name: str, nargs: int, parallel: bool):
        self.engine = engine
        self.name = name
        self.nargs = nargs
        self.parallel = parallel
        address = engine.get_function_address(name)
        if not address:
            raise InternalError(f"no function {name!r} in the JIT-compiled module")
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_void_p] * nargs))(address)

    def __call__(self, *arrays: np.ndarray) -> None:
        if len(arrays) != self.nargs:
            raise InternalError(f"kernel {self.name!r} takes {self.nargs} arrays, got {len(arrays)}")
        for i, arr in enumerate(arrays):
            if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous:
                raise InternalError(f"kernel {self.name!r} argument {i} is not a C-contiguous numpy array")
        self.call_addresses([a.ctypes.data for a in arrays], parallel=self.parallel)

    def call_addresses(self, addresses, *, parallel: bool = True) -> None:
        """Run the kernel on raw buffer addresses (the caller keeps the buffers alive and checked)."""
        call_entry(self._cfunc, self.name, addresses, parallel and self.parallel)

    def __repr__(self) -> str:
        return f"<JitFunction {self.name}/{self.nargs}>"


def compile_ir(text: str, entry: str, nargs: int) -> JitFunction:
    """JIT-compile LLVM IR ``text`` and return its entry point ``entry`` taking ``nargs`` pointers.

    >>> # compile_ir(source.text, source.entry, len(source.params))(A, B, C)
    """
    llvm, _ = _llvm()
    parallel = "@GOMP_parallel" in text or "@\"GOMP_parallel\"" in text
    if parallel and gomp() is None:
        raise PolytileEnvironmentError("the kernel has parallel loops but no OpenMP runtime (libgomp) was found; "
                            "set POLYTILE_LIBGOMP or compile with parallel=False")
    # LLVM's global context is not safe for concurrent use: kernels compiled from several Python
    # threads (ctypes and llvmlite release the GIL) take turns.
    with _compile_lock:
        mod = optimise(text)
        # A function the module calls but no loaded library defines (omp_* without libgomp) would be
        # called at address 0: refuse here instead.
        missing = [f.name for f in mod.functions
                   if f.is_declaration and not f.name.startswith("llvm.") and not llvm.address_of_symbol(f.name)]
        if missing:
            raise PolytileEnvironmentError(f"the kernel calls {', '.join(sorted(missing))}, which no loaded library "
                                           f"defines (is libgomp or libm missing?)")
        # An engine owns (and disposes of) its target machine: each gets its own, the shared one stays.
        engine = llvm.create_mcjit_compiler(mod, _host_machine(llvm))
        engine.finalize_object()
        return JitFunction(engine, entry, nargs, parallel)
