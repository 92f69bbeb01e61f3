"""Wiring of the CUDA target: Tile program -> GPU mapping -> CUDA (or its CPU emulation) -> callable.

    >>> k = compile_cuda("examples/matmul.tile", [(64, 32), (32, 48)], ["float32"] * 2, emulate=True)
    >>> C = k(A, B)            # runs the mapped kernels on the CPU, block by block
    >>> print(k.describe())    # grid / block of every kernel

Without ``emulate`` the CUDA source is built with ``nvcc -arch=<descriptor arch>``;
calling it on a machine without a GPU raises a :class:`PolytileError` saying so.

Unless a block size (``threads``) or a promotion (``shared``/``steps``) is
forced, the GPU cost model (:func:`polytile.cost.gpu.choose`) picks each
kernel's block size, reduction steps and shared-memory promotion for the
descriptor.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .. import deps as deps_mod
from ..cost import gpu as gpucost
from .. import hardware as hardware_mod
from .. import runtime, sema
from ..program import load_program
from ..specialization import Specialization, run_scop, run_specialization
from .base import Lowered, Target
from .. import scheduling as sched_mod
from ..codegen import cuda as cuda_codegen
from ..codegen.c import KernelSource
from ..config import get_config
from ..errors import PolytileError
from ..poly.scop import Scop
from ..poly.tile import lower as lower_to_scop
from ..scheduling import Schedule
from ..scheduling.gpu import (GpuLimits, GpuMapping, OutOfResources, describe as describe_mappings, map_schedule,
                           promotion_plan, reduction_extents)


def gpu_schedule(scop: Scop, dependences=None) -> Schedule:
    """Program order with the outermost dependence-free loops marked (the mapping's starting point)."""
    if dependences is None:
        dependences = deps_mod.compute(scop)
    return sched_mod.auto_parallel(sched_mod.initial(scop, dependences))


def gpu_limits(hardware: Any = "nvidia-h100", *, threads: Optional[int] = None, max_grid=None) -> GpuLimits:
    desc = hardware_mod.load_once(hardware)
    try:
        return GpuLimits.from_descriptor(desc, threads=threads, max_grid=max_grid)
    except Exception as e:  # ScheduleError is a PolytileError; keep its message
        raise PolytileError(str(e)) from None


def no_device_reason() -> Optional[str]:
    """Why no CUDA kernel can run here, or None when a GPU looks present."""
    if shutil.which("nvidia-smi") is None:
        return ("no CUDA device is present (nvidia-smi not found); run the mapping on the CPU with "
                "target=\"cuda-emulate\" (polytile.compile) or --target cuda-emulate (the CLI)")
    return None


@dataclass(frozen=True, eq=False)
class CudaKernel:
    """One specialisation compiled for CUDA (or its emulation); call it on numpy arrays."""

    spec: Any  # specialization.Specialization
    mappings: Tuple[GpuMapping, ...]
    emulated: bool
    has_device: Any = None  # the library's <entry>_has_device, for real CUDA builds
    estimates: Tuple[Any, ...] = ()  # gpucost.GpuEstimate per kernel when the model chose the mapping

    @property
    def source(self) -> KernelSource:
        return self.spec.source

    @property
    def library_path(self) -> Path:
        return self.spec.library_path

    def describe(self) -> str:
        """Grid, block, host loops and shared-memory tiles of every kernel (with the model's estimate)."""
        if not self.estimates:
            return describe_mappings(self.mappings)
        return "\n".join(m.describe() + "\n  " + e.describe() for m, e in zip(self.mappings, self.estimates))

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
        return run_specialization(self.spec, [np.asarray(a) for a in arrays])

    def run_named(self, arrays):
        """Run on named arrays (``inout`` ones start from the given values); every array after the call."""
        self._ready()
        return run_scop(self.spec, arrays)


def _specialize(source_or_program, shapes, dtypes, hardware, threads, max_grid, sizes=None):
    prog = load_program(source_or_program)
    shapes = [tuple(int(x) for x in s) for s in shapes]
    dtypes = [np.dtype(d).name for d in dtypes]
    bound = sema.bind(prog, shapes, dtypes, sizes)
    scop = lower_to_scop(bound)
    sched = gpu_schedule(scop)
    limits = gpu_limits(hardware, threads=threads, max_grid=max_grid)
    return bound, scop, sched, limits, map_schedule(sched, limits)


def _descriptor(hardware):
    return hardware_mod.load_once(hardware)


def _mappings(scop, sched, limits, hardware, threads, shared, steps, mappings=None):
    """The kernels' mappings: given, forced (``threads``/``shared``/``steps``), or chosen by the cost model.

    Returns ``(mappings, estimates)``; ``estimates`` is empty unless the model chose.
    """
    if mappings is not None:
        return tuple(mappings), ()
    desc = _descriptor(hardware)
    if threads is None and shared is None and steps is None:
        try:
            choice = gpucost.choose(scop, sched, desc, limits)
        except OutOfResources as e:
            raise PolytileError(str(e)) from None
        return choice.mappings, choice.estimates
    maps = map_schedule(sched, limits)
    if steps is not None:
        # An explicit step box: promote where it applies, and refuse a plan the descriptor cannot hold.
        out = []
        for m in maps:
            names = {v for v in steps}
            plan = None
            try:
                ext = reduction_extents(scop, sched, m)
                if ext is not None and names == {v for v, _, _ in ext}:
                    plan, _ = promotion_plan(scop, sched, m, dict(steps),
                                             shared_bytes=int(desc.shared_memory_per_block_bytes))
            except OutOfResources as e:
                raise PolytileError(f"{e} ({desc.name})") from None
            out.append(m.with_shared(plan))
        maps = tuple(out)
    elif shared:
        maps = tuple(m.with_shared(cuda_codegen.shared_plan(
            scop, sched, m, shared_bytes=int(desc.shared_memory_per_block_bytes))[0]) for m in maps)
    return maps, ()


def compile_cuda(source_or_program, shapes: Sequence[Sequence[int]], dtypes: Sequence[Any], *,
                 hardware: Any = "nvidia-h100", emulate: bool = False, threads: Optional[int] = None,
                 max_grid=None, reverse: bool = True, shared: Optional[bool] = None,
                 steps: Optional[dict] = None, sizes: Optional[dict] = None) -> CudaKernel:
    """Map, generate and build one specialisation; return a callable :class:`CudaKernel`.

    >>> # k = compile_cuda("examples/matmul.tile", [(64, 32), (32, 48)], ["float32"] * 2, emulate=True)
    >>> # print(k.describe()); C = k(A, B)

    ``emulate`` builds the CPU emulation (plain C through the normal C
    compiler); otherwise ``nvcc -O3 -arch=<arch> -Xcompiler -fPIC -shared``.
    By default the GPU cost model chooses each kernel's block size, reduction
    steps and promotion for ``hardware``.  ``threads`` (block size aimed for),
    ``shared`` (True: the default promotion plan where it applies; False:
    none) and ``steps`` (``{reduction iterator: step}``: promote with this
    step box, raising an out-of-resources error when the tiles exceed the
    descriptor's shared memory per block) force a choice instead;
    ``max_grid`` (blocks per axis) forces grid-stride loops.  ``sizes`` gives the
    values of size inputs and constants (see :func:`polytile.reference.constants`).
    """
    bound, scop, sched, limits, _ = _specialize(source_or_program, shapes, dtypes, hardware, threads, max_grid,
                                                sizes)
    maps, ests = _mappings(scop, sched, limits, hardware, threads, shared, steps)
    return _build(bound, scop, sched, limits, maps, emulate, reverse, ests)


def compile_scop_cuda(scop: Scop, *, hardware: Any = "nvidia-h100", emulate: bool = False,
                      threads: Optional[int] = None, max_grid=None, reverse: bool = True,
                      mappings: Optional[Sequence[GpuMapping]] = None, shared: Optional[bool] = None,
                      steps: Optional[dict] = None) -> CudaKernel:
    """Like :func:`compile_cuda` for any Scop (isl text, the C frontend); run it with ``run_named``.

    >>> # k = compile_scop_cuda(scop_from_isl(...), emulate=True); k.run_named({"A": a, "B": b})

    ``mappings`` replaces the computed mapping (tests use it to show that the
    emulation catches an illegal one).
    """
    sched = gpu_schedule(scop)
    limits = gpu_limits(hardware, threads=threads, max_grid=max_grid)
    maps, ests = _mappings(scop, sched, limits, hardware, threads, shared, steps, mappings)
    return _build(None, scop, sched, limits, maps, emulate, reverse, ests)


def _build(bound, scop, sched, limits, mappings, emulate, reverse, estimates=()) -> CudaKernel:
    if emulate:
        src = cuda_codegen.generate_emulated(scop, sched, mappings, reverse=reverse)
        path = runtime.build(src.text, flags=get_config().cflags, name_hint=f"{scop.name}_emu")
        has = None
    else:
        src = cuda_codegen.generate(scop, sched, mappings)
        path = runtime.build(src.text, lang="cuda", flags=cuda_codegen.nvcc_flags(limits.arch), name_hint=scop.name)
        has = runtime.load(path).function(f"{src.entry}_has_device", 0)
    fn = runtime.load(path).function(src.entry, len(src.params))
    spec = Specialization(bound, scop, sched.deps, sched, src, path, fn)
    return CudaKernel(spec, tuple(mappings), emulate, has, tuple(estimates))


def cuda_source(source_or_program, shapes, dtypes, *, hardware: Any = "nvidia-h100", emulate: bool = False,
                threads: Optional[int] = None, max_grid=None, shared: Optional[bool] = None,
                steps: Optional[dict] = None) -> Tuple[KernelSource, Tuple[GpuMapping, ...]]:
    """The generated CUDA (or emulation C) source and the mappings, without building.

    >>> # src, maps = cuda_source("examples/matmul.tile", [(64, 32), (32, 48)], ["float32"] * 2)
    """
    _, scop, sched, limits, _ = _specialize(source_or_program, shapes, dtypes, hardware, threads, max_grid)
    maps, _ = _mappings(scop, sched, limits, hardware, threads, shared, steps)
    gen = cuda_codegen.generate_emulated if emulate else cuda_codegen.generate
    return gen(scop, sched, maps), maps


def compile_ptx(source_or_program, shapes, dtypes, *, hardware: Any = "nvidia-h100",
                threads: Optional[int] = None, max_grid=None, shared: Optional[bool] = None,
                steps: Optional[dict] = None) -> str:
    """PTX text of the CUDA kernels (``nvcc -ptx -arch=<arch>``).

    >>> # ".entry pt_matmul_k1(" in compile_ptx("examples/matmul.tile", [(64, 32), (32, 48)], ["float32"] * 2)
    """
    src, _ = cuda_source(source_or_program, shapes, dtypes, hardware=hardware, threads=threads, max_grid=max_grid,
                         shared=shared, steps=steps)
    arch = gpu_limits(hardware).arch
    path = runtime.build(src.text, lang="cuda", flags=cuda_codegen.nvcc_flags(arch, ptx=True),
                         name_hint=f"{src.entry}_ptx")
    return Path(path).read_text()


def ptxas_registers(source: KernelSource, arch: str = "sm_90") -> dict:
    """Registers per thread of each kernel as ptxas allocates them: ``{kernel name: registers}``.

    Runs ``nvcc -cubin -Xptxas -v`` on the CUDA source (needs nvcc; no GPU).

    >>> # ptxas_registers(cuda_source("examples/matmul.tile", [(64, 32), (32, 48)], ["float32"] * 2)[0])
    >>> # -> {'pt_matmul_k0': 8, 'pt_matmul_k1': 30}
    """
    import re
    import subprocess
    import tempfile

    nvcc = get_config().nvcc
    if nvcc is None:
        raise PolytileError("nvcc not found: ptxas register counts need the CUDA toolkit")
    with tempfile.TemporaryDirectory() as d:
        cu = Path(d) / "k.cu"
        cu.write_text(source.text)
        r = subprocess.run([str(nvcc), "-cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", "-o", str(Path(d) / "k.cubin"),
                            str(cu)], capture_output=True, text=True)
    if r.returncode != 0:
        raise PolytileError(f"nvcc failed:\n{r.stderr[-2000:]}")
    out, current = {}, None
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line) or re.search(r"Function properties for (\w+)", line)
        if m:
            current = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            out[current] = int(m.group(1))
    return out


class Cuda(Target):
    """CUDA C++ built by nvcc (``emulate``: the same mapping as plain C on the CPU, to test it).

    Kernels map for the hardware option when it names a GPU descriptor; the host is a CPU, so
    ``"host"`` or a CPU descriptor maps for ``nvidia-h100``.
    """

    gpu = True

    def __init__(self, emulate: bool):
        self.emulate = emulate
        self.name = "cuda-emulate" if emulate else "cuda"

    def compile(self, lowered: Lowered, options, *, build: bool = True) -> CudaKernel:
        hw = options.hardware
        if hw is None or hw == "host" or getattr(hardware_mod.load_once(hw), "kind", "cpu") != "gpu":
            hw = "nvidia-h100"
        sched = gpu_schedule(lowered.scop, lowered.deps)
        limits = gpu_limits(hw)
        maps, ests = _mappings(lowered.scop, sched, limits, hw, None, None, None)
        return _build(lowered.bound, lowered.scop, sched, limits, maps, self.emulate, True, ests)

    def specialization(self, compiled: CudaKernel) -> Specialization:
        return compiled.spec

    def run(self, compiled: CudaKernel, arrays):
        return compiled(*arrays)


CUDA = Cuda(emulate=False)
CUDA_EMULATE = Cuda(emulate=True)
