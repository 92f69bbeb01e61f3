"""The in-process compiler of the ``llvm`` target: LLVM IR -> optimised machine code, via llvmlite.

Every kernel gets a module optimised for the host (:mod:`polytile.runtime.llvm_engine`) and its own
MCJIT engine, which :class:`JitFunction` keeps alive as long as the kernel.  No C compiler is involved.

Parallel regions call libgomp (``GOMP_parallel``), loaded once by :mod:`polytile.runtime.openmp` so the JIT
resolves its symbols and :mod:`polytile.runtime.threads` sets the thread count of the same runtime;
libm's functions (``expf``, ``tanh``, ``erf``...) resolve from the process.

    >>> # fn = compile_ir(source.text, source.entry, len(source.params)); fn(A, B, C)
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from polytile.errors import InternalError, PolytileEnvironmentError
from polytile.runtime.llvm_engine import JitError, engine, optimise, resolves, vector_isas
from polytile.runtime.openmp import gomp
from polytile.runtime.loader import call_entry

__all__ = ["JitFunction", "compile_ir", "engine", "gomp", "optimise", "resolves", "vector_isas", "JitError"]


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
    parallel = "@GOMP_parallel" in text or "@\"GOMP_parallel\"" in text
    if parallel and gomp() is None:
        raise PolytileEnvironmentError("the kernel has parallel loops but no OpenMP runtime (libgomp) was found; "
                            "set POLYTILE_LIBGOMP or compile with parallel=False")
    return JitFunction(engine(text), entry, nargs, parallel)
