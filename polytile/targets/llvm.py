"""The LLVM target: the OpenMP target's schedule, LLVM IR from isl's AST, compiled in-process by llvmlite.

No C compiler is involved: the IR is optimised at O3 for the host CPU and JIT-compiled
(:mod:`polytile.runtime.jit`); parallel loops run on libgomp's threads.  Kernels live as long as the
process that compiled them (no library on disk; polytile.kernel keeps the last 64 per process).

    >>> # LLVM_TARGET.compile(lowered, options) -> Specialization; LLVM_TARGET.run(spec, [A, B]) -> C
"""
from __future__ import annotations

import functools
import time

from ..specialization import Specialization
from .base import Lowered, Target, stage
from .openmp import schedule_and_generate


class LLVM(Target):
    """LLVM IR JIT-compiled with llvmlite (``target="llvm"``); needs no C compiler."""

    name = "llvm"
    in_process = True

    def compile(self, lowered: Lowered, options, *, build: bool = True) -> Specialization:
        from ..codegen.llvm import generate
        from ..runtime import jit

        scop, dependences = lowered.scop, lowered.deps
        threads = bool(options.parallel) and jit.gomp() is not None
        sched, source = schedule_and_generate(lowered, options, generate, parallel=threads,
                                              vector_math=_vector_math())
        if not build:
            return Specialization(lowered.bound, scop, dependences, sched, source)
        t0 = time.perf_counter()
        fn = jit.compile_ir(source.text, source.entry, len(source.params))
        stage("build", t0, f"llvm jit {source.entry}", level=1)
        return Specialization(lowered.bound, scop, dependences, sched, source, None, fn)


@functools.lru_cache(maxsize=None)
def _vector_math():
    """The libm functions with vector variants the JIT can call on this machine (``codegen.llvm_vmath``)."""
    from ..codegen.llvm_vmath import table
    from ..runtime import jit

    return table(jit.vector_isas(), jit.resolves)


LLVM_TARGET = LLVM()
