"""What a target is: the back half of the pipeline as a plugin.

The pipeline runs the front half once for a signature -- bind, lower, dependences: a
:class:`Lowered` record -- and hands it to ``target.compile(lowered, options, build=...)``, which
schedules, generates and builds whatever the target runs (a shared library for OpenMP, a CUDA or
emulated library for CUDA).  ``target.run(compiled, arrays)`` calls it on numpy arrays and
``target.specialization(compiled)`` gives the common record (Scop, schedule, source, library).
A new backend is one module with a :class:`Target` subclass, named in :func:`polytile.targets.get`.

    >>> # t = polytile.targets.get("openmp"); c = t.compile(lowered, options); t.run(c, [A, B])
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..config import debug_log
from ..specialization import Specialization, run_specialization


@dataclass(frozen=True, eq=False)
class Lowered:
    """The front half's result for one signature: program, binding, Scop and its dependences."""

    program: Any  # ir.Program
    bound: Any  # sema.Bound
    scop: Any  # poly.Scop
    deps: Any  # deps.Dependences


class Target:
    """A backend: ``compile`` a :class:`Lowered` program, ``run`` the result on arrays."""

    #: The name users pass as ``target=`` / ``--target``.
    name: str = ""
    #: Runs on a GPU (or its emulation): a kernel per parallel nest, a grid/block mapping.
    gpu: bool = False
    #: What :meth:`compile` returns is a :class:`Specialization` with a library in the kernel cache and
    #: one entry point run by :func:`run_specialization`: later processes find it in the specialization
    #: cache (:mod:`polytile.kernel`) instead of compiling.
    disk_cacheable: bool = False
    #: What :meth:`compile` returns is a :class:`Specialization` whose ``function`` runs in this process
    #: (a JIT-compiled entry point with a library's call interface): the Kernel calls it through a
    #: :class:`~polytile.specialization.Launcher`, though nothing is stored on disk.
    in_process: bool = False

    def compile(self, lowered: Lowered, options: Any, *, build: bool = True) -> Any:
        """Schedule, generate and (with ``build``) build ``lowered`` under ``options`` (options.Options)."""
        raise NotImplementedError(f"target {self.name!r} does not compile")

    def specialization(self, compiled: Any) -> Specialization:
        """The common record of what :meth:`compile` produced."""
        return compiled

    def run(self, compiled: Any, arrays: Sequence[np.ndarray]):
        """Call the built kernel on the inputs; its output, or a tuple of them."""
        return run_specialization(compiled, arrays)

    def __repr__(self) -> str:
        return f"<polytile target {self.name}>"


def stage(name: str, t0: float, detail=None, level: int = 2) -> None:
    """Log a finished pipeline stage and its time (``POLYTILE_DEBUG=1``; ``detail`` at ``level``)."""
    debug_log(1, "pipeline", f"{name} ({(time.perf_counter() - t0) * 1e3:.1f} ms)")
    if detail is not None:
        debug_log(level, name, detail)
