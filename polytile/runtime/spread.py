"""Keep a kernel's OpenMP worker threads off the CPU of the thread that calls it.

libgomp's workers sleep (on a futex) once they have spun a while without work.  The next
parallel region wakes them from the calling thread, and Linux's wake-affine placement
often puts a woken worker on the *caller's* CPU: the two then share one core until the
load balancer moves one, a few milliseconds later.  Measured on a 2-vCPU Xeon guest,
after 0.2 s idle: the worker starts 2-4 ms late and both threads run at half speed, so
SGEMM 1024^3 took a median 19 ms per call (9-24 ms) where a warm call takes 7 ms and
numpy (OpenBLAS) 8 ms.  Binding the threads (``OMP_PROC_BIND``) removes it, but would pin
the caller -- the user's Python main thread -- for good.

So before a kernel call, :func:`spread` runs one empty parallel region on the call's
team.  Every worker narrows its own affinity to the caller's mask minus the caller's CPU
(the kernel moves a worker that is on it at once, to an idle CPU when there is one), and
keeps that mask: later wake-ups then land where it is allowed to run.  The caller's own
affinity is never changed; nothing happens when the user binds threads (``OMP_PROC_BIND``)
or chooses the count (``OMP_NUM_THREADS``: the caller of :func:`spread` leaves the team
alone then).  After the change the same 1024^3 calls took a median 9.2 ms.

The region is itself a fork and join (~2 us of a 32^3 matmul's 6.7 us call), so the call path
(:func:`before_call`) runs it only when it could change something: while the calling thread
is on the CPU of its last spread with as many threads, every worker's mask already leaves
that CPU out.  A caller that moved, or a team of another size (new workers), spreads again.

Every C kernel library exports the region as ``pt_spread`` (``codegen.c_threads.SPREAD_FUNCTION``), and
the runtime takes the first one it loads (:func:`use_library`).  Without one (llvm kernels only)
the region is LLVM IR JIT-compiled once per process (llvmlite is a base dependency, and a C
compiler is not): it runs on the libgomp that kernels of both targets use.  That compile (~90 ms
with importing llvmlite and LLVM's start-up) happens in the process's second parallel kernel call,
not its first (:func:`before_call`): the first call's workers are new threads, which Linux places
on idle CPUs, and a one-call script should not pay for calls it never makes.

    >>> spread(2) in (True, False)
    True
"""
from __future__ import annotations

import ctypes
import threading
from typing import Callable, Optional

#: CPUs a ``cpu_set_t`` of this many 64-bit words describes (glibc's default size: 1024 CPUs).
MASK_WORDS = 16

# The worker's part (pt_spread_body) and the caller's (pt_spread): see the module docstring.
# struct team { i32 cpu; [16 x i64] mask }: the caller's CPU and affinity mask.
_IR = r"""
%team = type { i32, [16 x i64] }
declare i32 @omp_get_thread_num()
declare i32 @omp_get_proc_bind()
declare i32 @sched_getcpu()
declare i32 @sched_getaffinity(i32, i64, i8*)
declare i32 @sched_setaffinity(i32, i64, i8*)
declare void @GOMP_parallel(void (i8*)*, i8*, i32, i32)

define internal void @pt_spread_body(i8* %data) {
entry:
  %tid = call i32 @omp_get_thread_num()
  %master = icmp eq i32 %tid, 0
  br i1 %master, label %done, label %check
check:
  %t = bitcast i8* %data to %team*
  %cpup = getelementptr %team, %team* %t, i32 0, i32 0
  %cpu = load i32, i32* %cpup
  br label %move
move:
  %maskp = getelementptr %team, %team* %t, i32 0, i32 1
  %mask = load [16 x i64], [16 x i64]* %maskp
  %word = lshr i32 %cpu, 6
  %bit = and i32 %cpu, 63
  %bit64 = zext i32 %bit to i64
  %one = shl i64 1, %bit64
  %clear = xor i64 %one, -1
  %mine = alloca [16 x i64]
  store [16 x i64] %mask, [16 x i64]* %mine
  %wp = getelementptr [16 x i64], [16 x i64]* %mine, i32 0, i32 %word
  %w = load i64, i64* %wp
  %w2 = and i64 %w, %clear
  store i64 %w2, i64* %wp
  br label %scan
scan:
  %k = phi i32 [ 0, %move ], [ %k1, %scan ]
  %acc = phi i64 [ 0, %move ], [ %acc1, %scan ]
  %kp = getelementptr [16 x i64], [16 x i64]* %mine, i32 0, i32 %k
  %kw = load i64, i64* %kp
  %acc1 = or i64 %acc, %kw
  %k1 = add i32 %k, 1
  %more = icmp ult i32 %k1, 16
  br i1 %more, label %scan, label %scanned
scanned:
  %left = icmp ne i64 %acc1, 0
  br i1 %left, label %set, label %done
set:
  %raw = bitcast [16 x i64]* %mine to i8*
  %r = call i32 @sched_setaffinity(i32 0, i64 128, i8* %raw)
  br label %done
done:
  ret void
}

define i32 @pt_spread(i32 %threads) {
entry:
  %bind = call i32 @omp_get_proc_bind()
  %bound = icmp ne i32 %bind, 0
  br i1 %bound, label %no, label %where
where:
  %t = alloca %team
  %cpup = getelementptr %team, %team* %t, i32 0, i32 0
  %cpu = call i32 @sched_getcpu()
  store i32 %cpu, i32* %cpup
  %low = icmp slt i32 %cpu, 0
  %high = icmp sge i32 %cpu, 1024
  %out = or i1 %low, %high
  br i1 %out, label %no, label %mask
mask:
  %maskp = getelementptr %team, %team* %t, i32 0, i32 1
  %raw = bitcast [16 x i64]* %maskp to i8*
  %r = call i32 @sched_getaffinity(i32 0, i64 128, i8* %raw)
  %failed = icmp ne i32 %r, 0
  br i1 %failed, label %no, label %run
run:
  %data = bitcast %team* %t to i8*
  call void @GOMP_parallel(void (i8*)* @pt_spread_body, i8* %data, i32 %threads, i32 0)
  ret i32 %cpu
no:
  ret i32 -1
}
"""

_lock = threading.Lock()
_native: Optional[Callable[[int], int]] = None  # pt_spread of a loaded C kernel library (use_library)
_fn: Optional[Callable[[int], int]] = None
_failed = False
_calls = 0  # parallel kernel calls so far (before_call)
_keep: list = []  # the engine of pt_spread, alive as long as the process


def _compiled() -> Optional[Callable[[int], int]]:
    """``pt_spread`` JIT-compiled (once), or None where there is no libgomp or no LLVM."""
    global _fn, _failed
    with _lock:
        if _fn is None and not _failed:
            try:
                from polytile.runtime import llvm_engine, openmp

                if openmp.gomp() is None:
                    raise OSError("no libgomp")
                eng = llvm_engine.engine(_IR)  # holds the machine code
                fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(eng.get_function_address("pt_spread"))
                _keep.append(eng)
                _fn = fn
            except Exception:  # noqa: BLE001 - an optimisation: without it kernels run as before
                _failed = True
        return _fn


def use_library(cdll) -> bool:
    """Take ``pt_spread`` from a kernel library the runtime loaded (every C kernel exports it:
    ``codegen.c_threads.SPREAD_FUNCTION``), if none is taken yet; then no process that loads a C kernel
    JIT-compiles the region.  True when the library has it.

    >>> use_library(None)
    False
    """
    global _native
    try:
        fn = cdll.pt_spread  # a function of the CDLL, which the loader keeps (and so the code mapped)
    except AttributeError:
        return False
    with _lock:
        if _native is None:
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            _native = fn
    return True


def before_call(threads: int) -> bool:
    """The kernel-call path's :func:`spread`: skipped on the process's first parallel call, whose workers
    are new threads Linux places on idle CPUs anyway, so that a one-call script never pays the ~50 ms
    compile (LLVM's start-up included); from the second call on, compiled once and run -- unless this
    thread's last spread was on the CPU it runs on now, with as many threads (module docstring).

    >>> before_call(1)
    False
    """
    global _calls
    if threads < 2:
        return False
    _calls += 1
    if _calls <= 1:
        return False
    now = _current_cpu()
    if now >= 0 and getattr(_last, "key", None) == (now, threads):
        return True
    at = caller_cpu_spread(threads)
    # Keyed by the CPU the region found the caller on: if it moved since `now`, the workers avoid that CPU.
    _last.key = (at, threads) if at is not None else None
    return at is not None


_last = threading.local()  # .key: (caller's CPU, threads) of this thread's last spread (its own team)


def _sched_getcpu() -> Callable[[], int]:
    """libc's ``sched_getcpu`` (a vDSO read, ~0.1 us through ctypes), or a stand-in returning -1."""
    try:
        fn = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return lambda: -1
    fn.argtypes, fn.restype = [], ctypes.c_int
    return fn


_current_cpu = _sched_getcpu()


def spread(threads: int) -> bool:
    """Move the workers of a ``threads``-thread team off the calling thread's CPU; False if nothing ran.

    >>> spread(1)
    False
    """
    return caller_cpu_spread(threads) is not None


def caller_cpu_spread(threads: int) -> Optional[int]:
    """:func:`spread`, returning the CPU the caller was on when its region started (None: nothing ran).

    >>> caller_cpu_spread(1) is None
    True
    """
    if threads < 2:
        return None
    fn = _native if _native is not None else _fn if _fn is not None else _compiled()
    if fn is None:
        return None
    cpu = fn(threads)
    return cpu if cpu >= 0 else None
