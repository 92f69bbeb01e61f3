"""Wiring of the CUDA target: Tile program -> GPU mapping -> CUDA (or its CPU emulation) -> callable.

    >>> k = compile_cuda("examples/matmul.tile", [(64, 32), (32, 48)], ["float32"] * 2, emulate=True)
    >>> C = k(A, B)            # runs the mapped kernels on the CPU, block by block
    >>> print(k.describe())    # grid / block of every kernel

Without ``emulate`` the CUDA source is built with ``nvcc -arch=<descriptor arch>``;
calling it on a machine without a GPU raises a :class:`PolytileError` saying so.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import deps as deps_mod
from . import pipeline, runtime, sema
from . import schedule as sched_mod
from .codegen import cuda as cuda_codegen
from .codegen.c import KernelSource
from .config import get_config
from .errors import PolytileError
from .poly.scop import Scop
from .poly.tile import lower as lower_to_scop
from .schedule import Schedule
from .schedule.gpu import GpuLimits, GpuMapping, describe as describe_mappings, map_schedule


def gpu_schedule(scop: Scop) -> Schedule:
    """Program order with the outermost dependence-free loops marked (the mapping's starting point)."""
    return sched_mod.auto_parallel(sched_mod.initial(scop, deps_mod.compute(scop)))


def gpu_limits(hardware: Any = "nvidia-h100", *, threads: Optional[int] = None, max_grid=None) -> GpuLimits:
    desc = pipeline.load_hardware(hardware) if isinstance(hardware, str) else hardware
    try:
        return GpuLimits.from_descriptor(desc, threads=threads, max_grid=max_grid)
    except Exception as e:  # ScheduleError is a PolytileError; keep its message
        raise PolytileError(str(e)) from None


def no_device_reason() -> Optional[str]:
    """Why no CUDA kernel can run here, or None when a GPU looks present."""
    if shutil.which("nvidia-smi") is None:
        return "no CUDA device is present (nvidia-smi not found); use emulate=True to run the mapping on the CPU"
    return None


@dataclass(frozen=True, eq=False)
class CudaKernel:
    """One specialisation compiled for CUDA (or its emulation); call it on numpy arrays."""

    spec: Any  # pipeline.Specialization
    mappings: Tuple[GpuMapping, ...]
    emulated: bool
    has_device: Any = None  # the library's <entry>_has_device, for real CUDA builds

    @property
    def source(self) -> KernelSource:
        return self.spec.source

    @property
    def library_path(self) -> Path:
        return self.spec.library_path

    def describe(self) -> str:
        return describe_mappings(self.mappings)

    def _ready(self) -> None:
        if not self.emulated:
            reason = no_device_reason()
            if reason is not None:
                raise PolytileError(reason)
            try:
                self.has_device()
            except PolytileError as e:
                raise PolytileError(f"no CUDA device is present (cudaGetDeviceCount failed: {e})") from None

    def __call__(self, *arrays):
        """Run a Tile specialisation on its inputs; return its outputs."""
        if self.spec.bound is None:
            raise PolytileError("this kernel was built from a Scop: call run_named({array: values})")
        self._ready()
        return pipeline.run_specialization(self.spec, [np.asarray(a) for a in arrays])

    def run_named(self, arrays):
        """Run on named arrays (``inout`` ones start from the given values); every array after the call."""
        self._ready()
        return pipeline.run_scop(self.spec, arrays)


def _specialize(source_or_program, shapes, dtypes, hardware, threads, max_grid):
    prog = pipeline.load_program(source_or_program)
    shapes = [tuple(int(x) for x in s) for s in shapes]
    dtypes = [np.dtype(d).name for d in dtypes]
    bound = sema.bind(prog, shapes, dtypes)
    scop = lower_to_scop(bound)
    sched = gpu_schedule(scop)
    limits = gpu_limits(hardware, threads=threads, max_grid=max_grid)
    return bound, scop, sched, limits, map_schedule(sched, limits)


def compile_cuda(source_or_program, shapes: Sequence[Sequence[int]], dtypes: Sequence[Any], *,
                 hardware: Any = "nvidia-h100", emulate: bool = False, threads: Optional[int] = None,
                 max_grid=None, reverse: bool = True, shared: bool = False) -> CudaKernel:
    """Map, generate and build one specialisation; return a callable :class:`CudaKernel`.

    ``emulate`` builds the CPU emulation (plain C through the normal C
    compiler); otherwise ``nvcc -O3 -arch=<arch> -Xcompiler -fPIC -shared``.
    ``threads`` (block size aimed for) and ``max_grid`` (blocks per axis,
    forcing grid-stride loops) tune the mapping; ``shared`` stages the inputs
    of reduction kernels through shared memory where
    :func:`polytile.codegen.cuda.shared_plan` applies.
    """
    bound, scop, sched, limits, mappings = _specialize(source_or_program, shapes, dtypes, hardware, threads, max_grid)
    return _build(bound, scop, sched, limits, mappings, emulate, reverse, _shared_kw(hardware, shared))


def _shared_kw(hardware, shared: bool):
    if not shared:
        return {}
    desc = pipeline.load_hardware(hardware) if isinstance(hardware, str) else hardware
    return {"shared": True, "shared_bytes": int(desc.shared_memory_per_block_bytes)}


def compile_scop_cuda(scop: Scop, *, hardware: Any = "nvidia-h100", emulate: bool = False,
                      threads: Optional[int] = None, max_grid=None, reverse: bool = True,
                      mappings: Optional[Sequence[GpuMapping]] = None, shared: bool = False) -> CudaKernel:
    """Like :func:`compile_cuda` for any Scop (isl text, the C frontend); run it with ``run_named``.

    ``mappings`` replaces the computed mapping (tests use it to show that the
    emulation catches an illegal one).
    """
    sched = gpu_schedule(scop)
    limits = gpu_limits(hardware, threads=threads, max_grid=max_grid)
    maps = tuple(mappings) if mappings is not None else map_schedule(sched, limits)
    return _build(None, scop, sched, limits, maps, emulate, reverse, _shared_kw(hardware, shared))


def _build(bound, scop, sched, limits, mappings, emulate, reverse, shared_kw) -> CudaKernel:
    if emulate:
        src = cuda_codegen.generate_emulated(scop, sched, mappings, reverse=reverse, **shared_kw)
        path = runtime.build(src.text, flags=get_config().cflags, name_hint=f"{scop.name}_emu")
        has = None
    else:
        src = cuda_codegen.generate(scop, sched, mappings, **shared_kw)
        path = runtime.build(src.text, lang="cuda", flags=cuda_codegen.nvcc_flags(limits.arch), name_hint=scop.name)
        has = runtime.load(path).function(f"{src.entry}_has_device", 0)
    fn = runtime.load(path).function(src.entry, len(src.params))
    spec = pipeline.Specialization(bound, scop, sched.deps, sched, src, path, fn)
    return CudaKernel(spec, mappings, emulate, has)


def cuda_source(source_or_program, shapes, dtypes, *, hardware: Any = "nvidia-h100", emulate: bool = False,
                threads: Optional[int] = None, max_grid=None,
                shared: bool = False) -> Tuple[KernelSource, Tuple[GpuMapping, ...]]:
    """The generated CUDA (or emulation C) source and the mappings, without building."""
    _, scop, sched, _, mappings = _specialize(source_or_program, shapes, dtypes, hardware, threads, max_grid)
    gen = cuda_codegen.generate_emulated if emulate else cuda_codegen.generate
    return gen(scop, sched, mappings, **_shared_kw(hardware, shared)), mappings


def compile_ptx(source_or_program, shapes, dtypes, *, hardware: Any = "nvidia-h100",
                threads: Optional[int] = None, max_grid=None, shared: bool = False) -> str:
    """PTX text of the CUDA kernels (``nvcc -ptx -arch=<arch>``)."""
    src, _ = cuda_source(source_or_program, shapes, dtypes, hardware=hardware, threads=threads, max_grid=max_grid,
                         shared=shared)
    arch = gpu_limits(hardware).arch
    path = runtime.build(src.text, lang="cuda", flags=cuda_codegen.nvcc_flags(arch, ptx=True),
                         name_hint=f"{src.entry}_ptx")
    return Path(path).read_text()
