"""CUDA backend: one ``__global__`` kernel per top-level loop nest, and its CPU emulation.

Input: a Scop, a legal :class:`~polytile.schedule.Schedule` and the
:class:`~polytile.schedule.gpu.GpuMapping` of each nest (from
:func:`polytile.schedule.gpu.map_schedule`).  Every kernel body is the same
text in both outputs:

* the *grid prologue*: per grid axis (z outermost, x innermost) the block
  index -- a grid-stride loop ``for (b = blockIdx; b < blocks; b += grid)``
  when fewer blocks are launched than the axis needs, else just the block
  index -- the linear index ``b * block + threadIdx``, a guard
  ``if (l < total)`` for sizes that do not divide the block, and the mapped
  loop values ``pt_gK = lo + l / stride % extent`` (several loops linearised
  on one axis);
* the *thread body*: isl's AST of the nest's remaining schedule dimensions,
  with the mapped dimensions fixed to the parameters ``pt_gK`` (isl adds
  the guards for points of the box outside the statements' domains), printed
  by :class:`~polytile.codegen.c.AstPrinter` so statement bodies are the same
  C expressions as in the OpenMP backend.

:func:`generate` renders CUDA C++ (``__global__`` kernels, an
``extern "C" int <entry>(void *a0, ...)`` launcher on host pointers that
allocates, copies, launches every kernel in order, synchronises, copies the
outputs back and returns the CUDA error code, and ``<entry>_device`` on
device pointers).  :func:`generate_emulated` renders plain C where each
kernel is a function of (block, thread) indices and the entry point loops
over every block and every thread -- in *reverse* order by default, so a
mapping that let two threads depend on each other would show up as a wrong
result against the oracle.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

import cgen
import islpy as isl

from polytile.errors import InternalError
from polytile.poly.scop import Array, Scop
from polytile.schedule.core import Schedule
from polytile.schedule.gpu import AXES, GpuMapping

from .c import PRELUDE, AstPrinter, KernelSource, _param_decl, _param_type

_ORDER = {"input": 0, "inout": 1, "output": 2, "temp": 3}

#: CUDA error code the launcher returns when no device is usable (cudaErrorNoDevice).
NO_DEVICE = 100

CUDA_HEADER = r"""#include <cuda_runtime.h>
#define restrict __restrict__
#define _Bool bool
"""


def cuda_prelude() -> str:
    """The C prelude made usable on both sides of CUDA C++.

    Helpers become ``__host__ __device__``; isl's ``min``/``max`` macros are
    renamed (``pt_imin``/``pt_imax``) so they never shadow CUDA's functions.
    """
    text = PRELUDE.replace("static inline ", "static __host__ __device__ inline ")
    text = re.sub(r"#define (min|max)\(a, b\)", r"#define pt_i\1(a, b)", text)
    return CUDA_HEADER + text


def _cuda_minmax(text: str) -> str:
    return re.sub(r"\b(min|max)\(", r"pt_i\1(", text)


def kernel_params(scop: Scop) -> Tuple[Array, ...]:
    """Arrays in call order: inputs, inouts, outputs, temporaries (as the C backend)."""
    return tuple(sorted(scop.arrays, key=lambda a: _ORDER[a.kind]))


# ---------------------------------------------------------------------------
# The kernel body shared by CUDA and the emulation
# ---------------------------------------------------------------------------


def _thread_ast(scop: Scop, schedule: Schedule, m: GpuMapping) -> isl.AstNode:
    """isl AST of the nest's statements with the mapped dimensions fixed to ``pt_gK``."""
    n = schedule.n_dims
    mapped = list(m.mapped_dims)
    gnames = [f"pt_g{k}" for k in range(len(mapped))]
    ts = [f"t{d}" for d in range(n)]
    keep = [ts[d] for d in range(n) if d not in mapped]
    cons = " and ".join(f"{ts[d]} = {g}" for d, g in zip(mapped, gnames))
    params = f"[{', '.join(gnames)}] -> " if gnames else ""
    proj = isl.Map(f"{params}{{ [{', '.join(ts)}] -> [{', '.join(keep)}]{' : ' + cons if cons else ''} }}")
    umap = None
    for name in m.statements:
        sm = schedule.table[name].map.intersect_domain(scop.statement(name).domain)
        part = isl.UnionMap.from_map(sm.apply_range(proj))
        umap = part if umap is None else umap.union(part)
    box = []
    loops = [lp for a in m.axes for lp in a.loops]
    for lp, g in zip(loops, gnames):
        box.append(f"{lp.lo} <= {g} <= {lp.lo + lp.extent - 1}")
    ctx = isl.Set(f"{params}{{ : {' and '.join(box) if box else 'true'} }}")
    ctx = ctx.align_params(scop.context.get_space()).intersect(scop.context.align_params(ctx.get_space()))
    build = isl.AstBuild.from_context(ctx)
    return build.node_from_schedule_map(umap)


def _grid_nest(m: GpuMapping, inner: List[cgen.Generable]) -> List[cgen.Generable]:
    """Wrap the thread body in the grid prologue (z outermost, x innermost)."""
    first = {}
    k = 0
    for a in m.axes:
        first[a.axis] = k
        k += len(a.loops)
    nodes = list(inner)
    for a in m.axes:  # x is wrapped first, so it ends up innermost
        ax = a.axis
        b, l = f"pt_b{ax}", f"pt_l{ax}"
        decode = []
        stride = a.total
        for j, lp in enumerate(a.loops):
            stride //= max(1, lp.extent)
            val = l if stride == 1 else f"{l} / {stride}"
            if j > 0:
                val = f"{val} % {lp.extent}"
            lo = f"{lp.lo} + " if lp.lo else ""
            decode.append(cgen.Line(f"const long pt_g{first[ax] + j} = {lo}{val};  /* {lp.name} */"))
        linear = cgen.Line(f"const long {l} = {b} * {a.block} + pt_thread_{ax};")
        guarded = cgen.If(f"{l} < {a.total}", cgen.Block(decode + nodes))
        if a.strided:
            nodes = [cgen.For(f"long {b} = pt_block_{ax}", f"{b} < {a.blocks}", f"{b} += {a.grid}",
                              cgen.Block([linear, guarded]))]
        else:
            nodes = [cgen.Line(f"const long {b} = pt_block_{ax};"), linear, guarded]
    return nodes


def kernel_body(scop: Scop, schedule: Schedule, m: GpuMapping) -> List[cgen.Generable]:
    """The body of one kernel: grid prologue around the thread body (see the module docstring)."""
    ast = _thread_ast(scop, schedule, m)
    printer = AstPrinter(scop, outline=False)
    inner = printer.node(ast)
    if printer.vector_types or printer.locals:
        raise InternalError("register tiles and local buffers are not supported by the CUDA backend")
    return _grid_nest(m, inner)


def _signature(params: Sequence[Array]) -> str:
    return ", ".join(_param_type(a) for a in params)


def _banner(scop: Scop, mappings: Sequence[GpuMapping], what: str) -> str:
    lines = [f"/* Generated by polytile ({what})."]
    for s in scop.statements:
        lines.append(f" * {s.name}: {s.text or s.kind}")
    for m in mappings:
        lines.extend(" * " + ln for ln in m.describe().splitlines())
    return "\n".join(lines) + "\n */\n"


def _check(scop: Scop, mappings: Sequence[GpuMapping]) -> None:
    seen = [n for m in mappings for n in m.statements]
    if sorted(seen) != sorted(s.name for s in scop.statements):
        raise InternalError(f"GPU mappings cover {seen}, the Scop has {[s.name for s in scop.statements]}")


# ---------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------


def generate(scop: Scop, schedule: Schedule, mappings: Sequence[GpuMapping], *,
             entry: Optional[str] = None, prelude: bool = True) -> KernelSource:
    """CUDA C++ for ``scop``: kernels, ``<entry>_device`` and the host-pointer ``<entry>``.

    >>> # src = generate(scop, sched, gpu.map_schedule(sched)); src.lang == "cuda"

    Without ``prelude`` the text leaves out :func:`cuda_prelude` (to put
    several programs in one translation unit, each in its own namespace).
    """
    _check(scop, mappings)
    entry = entry or f"pt_{scop.name}"
    params = kernel_params(scop)
    names = ", ".join(a.name for a in params)
    out: List[str] = [_banner(scop, mappings, "CUDA")] + ([cuda_prelude()] if prelude else [])
    for m in mappings:
        idx = [cgen.Line(f"const long pt_block_{a} = blockIdx.{a}, pt_thread_{a} = threadIdx.{a};") for a in AXES]
        out.append(_cuda_minmax(str(cgen.FunctionBody(
            cgen.Line(f'extern "C" __global__ void __launch_bounds__({m.threads}) {entry}_k{m.index}({_signature(params)})'),
            cgen.Block(idx + kernel_body(scop, schedule, m))))))
    sig = ", ".join(f"void *a{k}" for k in range(len(params))) or "void"
    decls = [_param_decl(a, k) for k, a in enumerate(params)]
    launches = []
    for m in mappings:
        g, b = m.grid, m.block
        launches.append(f"{entry}_k{m.index}<<<dim3({g[0]}, {g[1]}, {g[2]}), dim3({b[0]}, {b[1]}, {b[2]})>>>({names});")
        launches.append("if ((pt_err = cudaGetLastError()) != cudaSuccess) return (int)pt_err;")
    out.append(f'extern "C" int {entry}_device({sig}) {{\n'
               + "\n".join(decls) + "\ncudaError_t pt_err;\n" + "\n".join(launches)
               + "\nreturn (int)cudaDeviceSynchronize();\n}\n")
    out.append(f'extern "C" int {entry}_has_device(void) {{\n'
               "int n = 0;\ncudaError_t e = cudaGetDeviceCount(&n);\n"
               "if (e != cudaSuccess) return (int)e;\n"
               f"return n > 0 ? 0 : {NO_DEVICE};\n}}\n")
    out.append(_host_launcher(entry, params))
    return KernelSource(entry, "\n".join(out), params, lang="cuda")


def _host_launcher(entry: str, params: Sequence[Array]) -> str:
    n = len(params)
    sig = ", ".join(f"void *a{k}" for k in range(n)) or "void"
    if n == 0:
        return f'extern "C" int {entry}({sig}) {{\nint rc = {entry}_has_device();\nreturn rc ? rc : {entry}_device();\n}}\n'
    sizes = ", ".join(str(max(1, a.nbytes)) for a in params)
    copy_in = ", ".join("1" if a.kind in ("input", "inout") else "0" for a in params)
    copy_out = ", ".join("1" if a.kind in ("output", "inout") else "0" for a in params)
    host = ", ".join(f"a{k}" for k in range(n))
    dev = ", ".join(f"pt_dev[{k}]" for k in range(n))
    return (
        f'extern "C" int {entry}({sig}) {{\n'
        f"static const size_t pt_bytes[{n}] = {{{sizes}}};\n"
        f"static const int pt_in[{n}] = {{{copy_in}}}, pt_out[{n}] = {{{copy_out}}};\n"
        f"void *pt_host[{n}] = {{{host}}};\n"
        f"void *pt_dev[{n}] = {{0}};\n"
        f"int rc = {entry}_has_device();\n"
        "if (rc) return rc;\n"
        "do {\n"
        f"  for (int k = 0; k < {n} && !rc; k++) rc = (int)cudaMalloc(&pt_dev[k], pt_bytes[k]);\n"
        "  if (rc) break;\n"
        f"  for (int k = 0; k < {n} && !rc; k++)\n"
        "    if (pt_in[k]) rc = (int)cudaMemcpy(pt_dev[k], pt_host[k], pt_bytes[k], cudaMemcpyHostToDevice);\n"
        "  if (rc) break;\n"
        f"  rc = {entry}_device({dev});\n"
        "  if (rc) break;\n"
        f"  for (int k = 0; k < {n} && !rc; k++)\n"
        "    if (pt_out[k]) rc = (int)cudaMemcpy(pt_host[k], pt_dev[k], pt_bytes[k], cudaMemcpyDeviceToHost);\n"
        "} while (0);\n"
        f"for (int k = 0; k < {n}; k++) if (pt_dev[k]) cudaFree(pt_dev[k]);\n"
        "return rc;\n}\n")


def nvcc_flags(arch: str = "sm_90", *, ptx: bool = False) -> Tuple[str, ...]:
    """``nvcc`` flags for a shared library (or PTX) for ``arch``."""
    if ptx:
        return ("-ptx", f"-arch={arch}")
    return ("-O3", f"-arch={arch}", "-Xcompiler", "-fPIC", "-shared")


# ---------------------------------------------------------------------------
# CPU emulation
# ---------------------------------------------------------------------------


def generate_emulated(scop: Scop, schedule: Schedule, mappings: Sequence[GpuMapping], *,
                      entry: Optional[str] = None, reverse: bool = True) -> KernelSource:
    """Plain C running the mapped kernels block by block, thread by thread.

    Each kernel is ``static void pt_kernelN(arrays..., block x/y/z, thread x/y/z)``
    with exactly the CUDA kernel's body; the entry point calls it for every
    block of the launched grid and every thread of the block (last first when
    ``reverse``), kernels in program order.
    """
    _check(scop, mappings)
    entry = entry or f"pt_{scop.name}"
    params = kernel_params(scop)
    names = ", ".join(a.name for a in params)
    out: List[str] = [_banner(scop, mappings, "CUDA emulation on the CPU"), PRELUDE]
    idx_params = ", ".join([f"const long pt_block_{a}" for a in AXES] + [f"const long pt_thread_{a}" for a in AXES])
    calls: List[str] = []
    for m in mappings:
        body = kernel_body(scop, schedule, m)
        sig = ", ".join(x for x in (_signature(params), idx_params) if x)
        out.append(str(cgen.FunctionBody(cgen.Line(f"static void {entry}_k{m.index}({sig})"), cgen.Block(body))))
        loops = []
        for kind, dims in (("block", m.grid), ("thread", m.block)):
            for a, n in reversed(list(zip(AXES, dims))):
                v = f"pt_{kind}_{a}"
                if reverse:
                    loops.append(f"for (long {v} = {n - 1}; {v} >= 0; {v}--)")
                else:
                    loops.append(f"for (long {v} = 0; {v} < {n}; {v}++)")
        args = ", ".join(x for x in (names, "pt_block_x, pt_block_y, pt_block_z, pt_thread_x, pt_thread_y, pt_thread_z") if x)
        calls.append("\n".join(loops) + f"\n  {entry}_k{m.index}({args});")
    sig = ", ".join(f"void *restrict a{k}" for k in range(len(params))) or "void"
    decls = [_param_decl(a, k) for k, a in enumerate(params)]
    out.append(f"int {entry}({sig}) {{\n" + "\n".join(decls) + "\n" + "\n".join(calls) + "\nreturn 0;\n}\n")
    return KernelSource(entry, "\n".join(out), params, lang="c")
