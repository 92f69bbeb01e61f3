"""Loading compiled kernels with ctypes and calling them on numpy arrays."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from polytile.errors import InternalError, PolytileError

_load_lock = threading.Lock()
_libraries: dict[str, "Library"] = {}


class KernelFunction:
    """One ``int f(void *a0, void *a1, ...)`` entry point of a loaded library.

    >>> f = load(build(src, name_hint="add1")).function("add1", 2)   # doctest: +SKIP
    >>> f(x, np.array(len(x), dtype=np.int64))                       # doctest: +SKIP
    """

    def __init__(self, library: "Library", name: str, cfunc: Any, nargs: int):
        self.library = library  # keeps the CDLL (and so the code) alive
        self.name = name
        self.nargs = nargs
        self._cfunc = cfunc

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run the kernel on C-contiguous numpy arrays; raise on a non-zero return."""
        if len(arrays) != self.nargs:
            raise InternalError(f"kernel {self.name!r} takes {self.nargs} arrays, got {len(arrays)}")
        pointers = []
        for i, arr in enumerate(arrays):
            if not isinstance(arr, np.ndarray):
                raise InternalError(f"kernel {self.name!r} argument {i} is {type(arr).__name__}, not a numpy array")
            if not arr.flags.c_contiguous:
                raise InternalError(f"kernel {self.name!r} argument {i} is not C-contiguous")
            pointers.append(arr.ctypes.data)
        # `arrays` stays referenced by this frame until the call returns, so
        # no buffer can be freed while C code is using it.
        rc = self._cfunc(*pointers)
        if rc != 0:
            raise PolytileError(f"kernel {self.name!r} failed with error code {rc}")

    def __repr__(self) -> str:
        return f"<KernelFunction {self.name}/{self.nargs} in {self.library.path}>"


class Library:
    """A loaded shared library of kernels (get one with :func:`load`).

    >>> lib = load("/path/to/libadd1.so")          # doctest: +SKIP
    >>> add1 = lib.function("add1", 2)             # doctest: +SKIP
    """

    def __init__(self, path: str, cdll: ctypes.CDLL):
        self.path = path
        self._cdll = cdll
        self._functions: dict[tuple[str, int], KernelFunction] = {}
        self._lock = threading.Lock()

    def function(self, name: str, nargs: int) -> KernelFunction:
        """The entry point ``name`` taking ``nargs`` pointers and returning int.

        >>> lib.function("add1", 2).nargs             # doctest: +SKIP
        2
        """
        with self._lock:
            fn = self._functions.get((name, nargs))
            if fn is not None:
                return fn
            # Indexing (unlike attribute access, which ctypes caches) makes a
            # fresh function object, so two signatures of one symbol never
            # overwrite each other's argtypes.
            try:
                cfunc = self._cdll[name]
            except AttributeError:
                # The symbol name comes from the code generator, so a missing
                # one is polytile's bug, not the user's.
                raise InternalError(f"no function {name!r} in {self.path}") from None
            cfunc.argtypes = [ctypes.c_void_p] * nargs
            cfunc.restype = ctypes.c_int
            fn = KernelFunction(self, name, cfunc, nargs)
            self._functions[(name, nargs)] = fn
            return fn

    def __repr__(self) -> str:
        return f"<Library {self.path}>"


def load(path: os.PathLike | str) -> Library:
    """Load a shared library once per resolved path and return it.

    >>> load(build("int z(void){return 0;}", name_hint="z")).function("z", 0)()   # doctest: +SKIP
    """
    resolved = os.path.realpath(os.fspath(path))
    with _load_lock:
        lib = _libraries.get(resolved)
        if lib is None:
            try:
                cdll = ctypes.CDLL(resolved, mode=ctypes.RTLD_LOCAL)
            except OSError as exc:
                raise PolytileError(f"cannot load kernel library {resolved}: {exc}") from None
            lib = Library(resolved, cdll)
            _libraries[resolved] = lib
    return lib
