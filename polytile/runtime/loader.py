"""Loading compiled kernels with ctypes and calling them on numpy arrays."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Optional

import numpy as np

from polytile.errors import ENTRY_ENOMEM, CacheError, InternalError, PolytileEnvironmentError, PolytileError
from polytile.runtime import openmp
from polytile.runtime.threads import enter_call, leave_call

_load_lock = threading.Lock()
_libraries: dict[str, "Library"] = {}


def call_entry(cfunc, name: str, addresses, parallel: bool) -> None:
    """Call a kernel entry on raw addresses (with a thread count for this call when it has parallel
    regions) and raise for a non-zero return: the one call path of both loaders (ctypes, LLVM JIT)."""
    if parallel:
        token = enter_call()
        try:
            rc = cfunc(*addresses)
        finally:
            leave_call(token)
    else:
        rc = cfunc(*addresses)
    if rc != 0:
        raise_for_return(name, rc)


def raise_for_return(name: str, rc: int) -> None:
    """The error for a kernel entry's non-zero return code ``rc`` (both back ends return the same codes).

    >>> raise_for_return("pt_matmul", 12)
    Traceback (most recent call last):
    ...
    polytile.errors.PolytileEnvironmentError: kernel 'pt_matmul' could not allocate its packing buffers (out of memory)
    """
    if rc == ENTRY_ENOMEM:
        raise PolytileEnvironmentError(f"kernel {name!r} could not allocate its packing buffers (out of memory)")
    raise PolytileError(f"kernel {name!r} failed with error code {rc}")


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
        # no buffer can be freed while C code is using it.  The call runs with as many OpenMP
        # threads as there are idle cores (polytile.runtime.threads).
        call_entry(self._cfunc, self.name, pointers, True)

    def call_addresses(self, addresses, *, parallel: bool = True) -> None:
        """Run the kernel on raw buffer addresses (the caller keeps the buffers alive and checked).

        The lean path of :class:`polytile.specialization.Launcher`; ``parallel=False`` (code without
        an OpenMP region) skips choosing a thread count.
        """
        call_entry(self._cfunc, self.name, addresses, parallel)

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

    @property
    def cdll(self) -> ctypes.CDLL:
        """The underlying ctypes library (for symbols other than ``int f(void *...)`` entry points)."""
        return self._cdll

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

    A library with a manifest next to it (every library :func:`build` puts in
    the cache) is hashed again, through the same open file, and loaded only if
    it matches; after ``dlopen`` the path must still name that file.  A library
    inside the configured cache directory without a manifest is refused.  See
    :mod:`polytile.runtime.cache` for the trust model.

    >>> load(build("int z(void){return 0;}", name_hint="z")).function("z", 0)()   # doctest: +SKIP
    """
    resolved = os.path.realpath(os.fspath(path))
    with _load_lock:
        lib = _libraries.get(resolved)
        if lib is None:
            fd = _verified_fd(os.fspath(path), resolved)
            openmp.load()  # before a kernel's dlopen pulls libgomp in with its default spin
            try:
                try:
                    cdll = ctypes.CDLL(resolved, mode=ctypes.RTLD_LOCAL)
                except OSError as exc:
                    raise PolytileError(f"cannot load kernel library {resolved}: {exc}") from None
                if fd is not None:
                    before, now = os.fstat(fd), _stat_or_none(resolved)
                    if now is None or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
                        raise CacheError(f"kernel library {resolved} was replaced while it was being loaded; "
                                         f"run again")
            finally:
                if fd is not None:
                    os.close(fd)
            lib = Library(resolved, cdll)
            _libraries[resolved] = lib
            if fd is not None:
                from polytile.runtime import cache, spread

                cache.mark_used(resolved)
                # A library polytile built (its manifest checked): its pt_spread is the generated one.
                spread.use_library(cdll)
    return lib


def _stat_or_none(path: str):
    try:
        return os.stat(path)
    except OSError:
        return None


def _inside(path: str, directory: str) -> bool:
    try:
        return os.path.commonpath([path, os.path.realpath(directory)]) == os.path.realpath(directory)
    except ValueError:
        return False


def _verified_fd(given: str, resolved: str) -> Optional[int]:
    """An open fd of the library after checking it against its manifest; None for a library of the
    user's own outside the cache (no manifest), which is loaded as it is."""
    from polytile.config import get_config
    from polytile.runtime import cache

    has_manifest = os.path.lexists(cache.manifest_path(given)) or os.path.lexists(cache.manifest_path(resolved))
    if not has_manifest and not _inside(resolved, str(get_config().cache_dir)):
        return None
    if os.path.islink(given):
        raise CacheError(f"refusing to load kernel library {given}: it is a symbolic link inside the kernel cache")
    try:
        fd = cache.open_nofollow(resolved)
    except OSError as exc:
        raise CacheError(f"cannot open kernel library {resolved} ({exc.strerror or exc})") from None
    try:
        problem = cache.verify_fd(fd, resolved)
    except BaseException:
        os.close(fd)
        raise
    if problem is not None:
        os.close(fd)
        raise CacheError(f"refusing to load kernel library {resolved}: {problem}; run again to rebuild it "
                         f"(or `polytile cache verify`)")
    return fd
