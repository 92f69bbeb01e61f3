"""The OpenMP runtime (libgomp) that kernels of both targets share, loaded once, with a short spin.

libgomp's idle workers spin before they sleep on a futex: ``GOMP_SPINCOUNT`` iterations of a
``pause`` loop, 300,000 by default, which is ~7 ms on the Zen 5 VM the benchmarks ran on.  So every
kernel call left the other cores busy for 7 ms after it returned, and whatever the program did
next paid for it.  A numpy SGEMM right after a polytile call ran 1.8x slower (1024³: 16.0 against
9.1 ms), and a loop of numpy's GEMM feeding polytile's softmax took 8.0 ms an iteration against 3.7
ms (``benchmarks/bench_mixed.py``).  A neighbour process loses the same time.

polytile loads libgomp with a spin of :data:`SPIN_SECONDS`.  Parallel regions of one call and
calls back to back (a few microseconds of Python apart) still find their workers awake.  A call
that follows a longer pause wakes them through the kernel: ~25 µs on that VM (a 128³ matmul after
2 ms of other work: 42 against 18 µs), a few per cent of the pause.

The spin is a count of ``pause`` instructions, whose cost differs twentyfold between CPUs (~3
cycles on some, ~140 on recent Intel cores), so the count is the time over the cost of one
``pause`` on this CPU (:func:`pause_seconds`: measured once per CPU model in a JIT-compiled loop and
kept in the cache directory).  Where it cannot be measured, :data:`FALLBACK_SPIN_COUNT` is used.

libgomp reads ``GOMP_SPINCOUNT`` once, when it is loaded.  :func:`load` therefore sets it in this
process's environment only for the ``dlopen`` and then restores the environment, so child processes
never inherit it.  The user's ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` wins (nothing is set or
measured), and a libgomp some other library loaded first keeps its own setting.

>>> load() is None or load() is load()
True
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import threading
import time
from typing import Callable, MutableMapping, Optional, Tuple, TypeVar

from polytile.errors import CacheError, PolytileError
from polytile.runtime import json_cache, llvm_engine

#: How long idle workers spin before they sleep (when the user set no wait policy of their own).
SPIN_SECONDS = 0.00025
#: The spin count where the cost of a ``pause`` could not be measured (0.25 ms on Zen 5).
FALLBACK_SPIN_COUNT = 10_000
#: Bounds of the measured count: at least libgomp's count for oversubscribed teams, at most its default.
SPIN_COUNT_RANGE = (1_000, 300_000)

#: Where libgomp is looked for (the first that loads wins); ``POLYTILE_LIBGOMP`` names another.
GOMP_NAMES = ("libgomp.so.1", "/usr/lib/x86_64-linux-gnu/libgomp.so.1", "libgomp.so")

#: The user's wait-policy variables: with either set, libgomp's environment is left alone.
USER_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")

T = TypeVar("T")

_lock = threading.RLock()  # gomp() holds it while it calls load()
_loaded: dict = {}

#: A loop of ``pause`` instructions (x86's spin-wait hint, libgomp's ``cpu_relax``): ``n`` of them.
PAUSE_LOOP = """
declare void @llvm.x86.sse2.pause()
define i64 @pt_pause_loop(i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  call void @llvm.x86.sse2.pause()
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret i64 %next
}
"""


def spin_count(pause_s: Optional[float]) -> int:
    """``GOMP_SPINCOUNT`` for :data:`SPIN_SECONDS` of spinning, given the seconds of one ``pause``
    (None: not measured), within :data:`SPIN_COUNT_RANGE`.

    >>> spin_count(25e-9), spin_count(1e-9), spin_count(None)
    (10000, 250000, 10000)
    """
    if not pause_s or pause_s <= 0:
        return FALLBACK_SPIN_COUNT
    low, high = SPIN_COUNT_RANGE
    return max(low, min(high, int(round(SPIN_SECONDS / pause_s))))


#: The ``/proc/cpuinfo`` fields that name a CPU model (the cost of ``pause`` is the model's).
CPU_FIELDS = ("vendor_id", "cpu family", "model", "stepping", "model name")


def cpu_identity(cpuinfo: str = "/proc/cpuinfo") -> str:
    """This CPU's model: the machine and the first processor's :data:`CPU_FIELDS` (read without
    starting LLVM, which a cached measurement is there to avoid).

    >>> cpu_identity().startswith(platform.machine())
    True
    """
    fields: dict = {}
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block ends
                key, _, value = line.partition(":")
                if key.strip() in CPU_FIELDS:
                    fields[key.strip()] = value.strip()
    except OSError:
        pass
    return "|".join([platform.machine()] + [fields.get(k, "") for k in CPU_FIELDS])


def measure_pause(loops: int = 4_000, repeats: int = 5) -> Optional[float]:
    """Seconds per ``pause`` on this CPU: the fastest of ``repeats`` JIT-compiled loops of ``loops``
    (the fastest, because a busy machine only ever adds time).  None off x86 or without LLVM.

    >>> t = measure_pause()
    >>> t is None or 1e-10 < t < 1e-6
    True
    """
    try:
        llvm, _ = llvm_engine._llvm()
        if not llvm.get_process_triple().startswith(("x86_64", "i386", "i686")):
            return None
        eng = llvm_engine.engine(PAUSE_LOOP, optimised=False)
    except (PolytileError, RuntimeError, OSError):
        return None
    loop = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(eng.get_function_address("pt_pause_loop"))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        loop(loops)
        best = min(best, time.perf_counter() - t0)
    return best / loops


def pause_seconds() -> Optional[float]:
    """:func:`measure_pause`, kept per CPU model in the cache directory (namespace ``openmp``): a process
    finds it there in a fraction of a millisecond instead of starting LLVM (~30 ms).  Measured without
    keeping it where the cache directory cannot be used."""
    identity = cpu_identity()
    key = hashlib.sha256(identity.encode()).hexdigest()[:32]
    try:
        doc = json_cache.json_get("openmp", key)
    except CacheError:
        return measure_pause()
    if doc is not None and isinstance(doc.get("pause_s"), float) and doc["pause_s"] > 0:
        return doc["pause_s"]
    seconds = measure_pause()
    if seconds is not None:
        try:
            json_cache.json_put("openmp", key, {"pause_s": seconds, "cpu": identity})
        except (CacheError, OSError):
            pass
    return seconds


def with_spin_count(open_library: Callable[[], T], environ: MutableMapping[str, str],
                    count: Callable[[], int] = lambda: spin_count(pause_seconds())) -> T:
    """``open_library()`` with ``GOMP_SPINCOUNT`` = ``count()`` in ``environ`` for the call alone (unless
    the user set a wait policy: then ``count`` is not called); ``environ`` is as it was afterwards,
    whatever happens.

    >>> env = {}
    >>> with_spin_count(lambda: env.get("GOMP_SPINCOUNT"), env, lambda: 7), env
    ('7', {})
    >>> with_spin_count(lambda: env.get("GOMP_SPINCOUNT"), {"OMP_WAIT_POLICY": "active"})
    """
    if any(key in environ for key in USER_SETTINGS):
        return open_library()
    environ["GOMP_SPINCOUNT"] = str(count())
    try:
        return open_library()
    finally:
        environ.pop("GOMP_SPINCOUNT", None)


def _first_gomp() -> Optional[Tuple[str, ctypes.CDLL]]:
    """(name, handle) of the first of ``POLYTILE_LIBGOMP`` and :data:`GOMP_NAMES` that loads (``RTLD_GLOBAL``)."""
    for name in (os.environ.get("POLYTILE_LIBGOMP"),) + GOMP_NAMES:
        if not name:
            continue
        try:
            return name, ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
    return None


def load() -> Optional[Tuple[str, ctypes.CDLL]]:
    """(name, handle) of the libgomp this process's kernels use, loaded once with ``RTLD_GLOBAL`` (so
    every kernel library links the same copy); None where there is none.  Call it before loading any
    library built with OpenMP: the first ``dlopen`` of libgomp is the one that reads the spin count.

    >>> found = load()
    >>> found is None or "gomp" in found[0]
    True
    """
    with _lock:
        if "gomp" not in _loaded:
            # One setting of the environment (and at most one measurement) around every name tried.
            _loaded["gomp"] = with_spin_count(_first_gomp, os.environ)
        return _loaded["gomp"]


def gomp() -> Optional[str]:
    """The path or name of the libgomp this process uses for parallel regions (:func:`load`), made
    visible to LLVM's JIT (which resolves ``GOMP_parallel`` from it); None if there is none.

    >>> gomp() is None or "gomp" in gomp()
    True
    """
    llvm, _ = llvm_engine._llvm()
    with _lock:
        if "jit" not in _loaded:
            found = load()
            _loaded["jit"] = None
            if found is not None:
                try:
                    llvm.load_library_permanently(found[0])
                    _loaded["jit"] = found[0]
                except RuntimeError:
                    pass
        return _loaded["jit"]
