"""CUDA backend: one ``__global__`` kernel per top-level loop nest, and its CPU emulation.

Input: a Scop, a legal :class:`~polytile.schedule.Schedule` and the
:class:`~polytile.scheduling.gpu.GpuMapping` of each nest (from
:func:`polytile.scheduling.gpu.map_schedule`).  Every kernel body is the same
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

Shared memory: a mapping may carry a promotion plan
(:class:`~polytile.scheduling.gpu.SharedPlan`, chosen by the GPU cost model or
requested with ``shared=True``).  Its kernel loops over the reduction steps;
per step the block loads every tile cooperatively (base offsets from isl's
footprint, cells outside the array skipped), ``__syncthreads()``, computes
isl's AST of the statement restricted to the step reading the tiles, and
synchronises again before the next step overwrites them.  The emulation runs
such a kernel per block, each phase between barriers for all threads of the
block.  Host loops (:class:`~polytile.scheduling.gpu.HostLoop`) become C loops
around the launches, their values passed to the kernels.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

import cgen
import islpy as isl

from polytile.errors import InternalError
from polytile.poly import body as B
from polytile.poly.scop import Array, Scop
from polytile.scheduling.core import Schedule
from polytile.scheduling.gpu import (AXES, GpuMapping, OutOfResources, SharedPlan, launch_tree,
                                   promotion_plan, reduction_extents)

from .c import NAN_REDUCTION_PRELUDE, AstPrinter, KernelSource, _param_decl, _param_type
from .c_expr import PRELUDE, BodyPrinter, ctype

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


def _thread_ast(scop: Scop, schedule: Schedule, m: GpuMapping, plan: Optional[SharedPlan] = None) -> isl.AstNode:
    """isl AST of the nest's statements with the mapped dimensions fixed to ``pt_gK``.

    Host loop dimensions are fixed to their ``pt_h<dim>`` parameters; with a
    shared-memory ``plan`` the reduction iterators are restricted to the
    current step ``[pt_r_v, pt_r_v + step)``.
    """
    n = schedule.n_dims
    mapped = list(m.mapped_dims)
    gnames = [f"pt_g{k}" for k in range(len(mapped))]
    fixed = list(zip(mapped, gnames)) + [(h.dim, h.param) for h in m.host]
    fixed_dims = {d for d, _ in fixed}
    steps = list(plan.steps) if plan is not None else []
    pnames = [g for _, g in fixed] + [f"pt_r_{v}" for v, _, _, _ in steps]
    ts = [f"t{d}" for d in range(n)]
    keep = [ts[d] for d in range(n) if d not in fixed_dims]
    cons = " and ".join(f"{ts[d]} = {g}" for d, g in fixed)
    params = f"[{', '.join(pnames)}] -> " if pnames else ""
    proj = isl.Map(f"{params}{{ [{', '.join(ts)}] -> [{', '.join(keep)}]{' : ' + cons if cons else ''} }}")
    umap = None
    for name in m.statements:
        st = scop.statement(name)
        dom = st.domain
        if steps:
            box = " and ".join(f"pt_r_{v} <= {v} <= pt_r_{v} + {k - 1}" for v, _, _, k in steps)
            dom = dom.intersect(isl.Set(f"{params}{{ {name}[{', '.join(st.iters)}] : {box} }}").align_params(
                dom.get_space()))
        sm = schedule.table[name].map.intersect_domain(dom)
        part = isl.UnionMap.from_map(sm.apply_range(proj.align_params(sm.get_space())))
        umap = part if umap is None else umap.union(part)
    box = []
    loops = [lp for a in m.axes for lp in a.loops]
    for lp, g in zip(loops, gnames):
        box.append(f"{lp.lo} <= {g} <= {lp.lo + lp.extent - 1}")
    for h in m.host:
        box.append(f"{h.lo} <= {h.param} <= {h.hi}")
    for v, lo, hi, _ in steps:
        box.append(f"{lo} <= pt_r_{v} <= {hi}")
    ctx = isl.Set(f"{params}{{ : {' and '.join(box) if box else 'true'} }}")
    ctx = ctx.align_params(scop.context.get_space()).intersect(scop.context.align_params(ctx.get_space()))
    build = isl.AstBuild.from_context(ctx)
    return build.node_from_schedule_map(umap.align_params(ctx.get_space()))


def _block_loops(m: GpuMapping, inner: List[cgen.Generable]) -> List[cgen.Generable]:
    """``pt_b<axis>``: the block index per axis (z outermost), a grid-stride loop where the grid is capped."""
    nodes = list(inner)
    for a in m.axes:  # x is wrapped first, so it ends up innermost
        ax = a.axis
        b = f"pt_b{ax}"
        if a.strided:
            nodes = [cgen.For(f"long {b} = pt_block_{ax}", f"{b} < {a.blocks}", f"{b} += {a.grid}", cgen.Block(nodes))]
        else:
            nodes = [cgen.Block([cgen.Line(f"const long {b} = pt_block_{ax};")] + nodes)]
    return nodes


def _decode(m: GpuMapping, a, linear: str, prefix: str, names=None) -> List[cgen.Generable]:
    """The mapped loop values of axis ``a`` at linear index ``linear`` (several loops: outermost slowest)."""
    first = 0
    for b in m.axes:
        if b is a:
            break
        first += len(b.loops)
    out = []
    stride = a.total
    for j, lp in enumerate(a.loops):
        stride //= max(1, lp.extent)
        val = linear if stride == 1 else f"{linear} / {stride}"
        if j > 0:
            val = f"{val} % {lp.extent}"
        lo = f"{lp.lo} + " if lp.lo else ""
        var = names[lp.name] if names else f"{prefix}{first + j}"
        out.append(cgen.Line(f"const long {var} = {lo}{val};  /* {lp.name} */"))
    return out


def _thread_guard(m: GpuMapping, inner: List[cgen.Generable]) -> List[cgen.Generable]:
    """Per axis: the thread's linear index, the guard for partial blocks, the mapped loop values ``pt_gK``."""
    nodes = list(inner)
    for a in m.axes:  # x innermost
        l = f"pt_l{a.axis}"
        linear = cgen.Line(f"const long {l} = pt_b{a.axis} * {a.block} + pt_thread_{a.axis};")
        nodes = [linear, cgen.If(f"{l} < {a.total}", cgen.Block(_decode(m, a, l, "pt_g") + nodes))]
    return nodes


def _grid_nest(m: GpuMapping, inner: List[cgen.Generable]) -> List[cgen.Generable]:
    """Wrap the thread body in the grid prologue (z outermost, x innermost)."""
    return _block_loops(m, _thread_guard(m, inner))


def kernel_body(scop: Scop, schedule: Schedule, m: GpuMapping) -> List[cgen.Generable]:
    """The body of one kernel: grid prologue around the thread body (see the module docstring)."""
    ast = _thread_ast(scop, schedule, m)
    printer = AstPrinter(scop, outline=False, guarded_math=False)
    inner = printer.node(ast)
    if printer.vector_types or printer.locals:
        raise InternalError("register tiles and local buffers are not supported by the CUDA backend")
    return _grid_nest(m, inner)


def _signature(params: Sequence[Array], m: Optional[GpuMapping] = None) -> str:
    parts = [_param_type(a) for a in params]
    if m is not None:
        parts += [f"const long {h.param}" for h in m.host]
    return ", ".join(parts)


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


def _launch_code(mappings: Sequence[GpuMapping], launch) -> List[str]:
    """Host code running every kernel in order, host loops (carried dependences) as C loops around launches."""
    def emit(items) -> List[str]:
        out: List[str] = []
        for item in items:
            if item[0] == "kernel":
                out.extend(launch(item[1]))
            else:
                h, inner = item[1], item[2]
                out.append(f"for (long {h.param} = {h.lo}; {h.param} <= {h.hi}; {h.param}++) {{")
                out.extend(emit(inner))
                out.append("}")
        return out

    return emit(launch_tree(mappings))


def _call_args(names: str, m: GpuMapping, extra: str = "") -> str:
    return ", ".join(x for x in [names] + [h.param for h in m.host] + ([extra] if extra else []) if x)


# ---------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------


def generate(scop: Scop, schedule: Schedule, mappings: Sequence[GpuMapping], *,
             entry: Optional[str] = None, prelude: bool = True, shared: bool = False,
             shared_bytes: int = 48 * 1024) -> KernelSource:
    """CUDA C++ for ``scop``: kernels, ``<entry>_device`` and the host-pointer ``<entry>``.

    >>> # src = generate(scop, sched, gpu.map_schedule(sched)); src.lang == "cuda"

    Without ``prelude`` the text leaves out :func:`cuda_prelude` (to put
    several programs in one translation unit, each in its own namespace).
    A mapping's own shared-memory plan (``GpuMapping.shared``) is used; with
    ``shared``, mappings without one get :func:`shared_plan`'s default where
    it applies (at most ``shared_bytes`` per block).  Kernels inside host
    loops take the loop values as extra ``long`` arguments.
    """
    _check(scop, mappings)
    entry = entry or f"pt_{scop.name}"
    params = kernel_params(scop)
    names = ", ".join(a.name for a in params)
    mappings = _with_plans(scop, schedule, mappings, shared, shared_bytes)
    out: List[str] = [_banner(scop, mappings, "CUDA")] + ([cuda_prelude()] if prelude else [])
    for m in mappings:
        idx = [cgen.Line(f"const long pt_block_{a} = blockIdx.{a}, pt_thread_{a} = threadIdx.{a};") for a in AXES]
        if m.shared is None:
            body = kernel_body(scop, schedule, m)
        else:
            body = _dynamic_tile_decls(m.shared) + _shared_block(
                scop, schedule, m, lambda nodes: [cgen.Block(nodes)], [cgen.Line("__syncthreads();")])
        out.append(_cuda_minmax(str(cgen.FunctionBody(
            cgen.Line(f'extern "C" __global__ void __launch_bounds__({m.threads}) '
                      f'{entry}_k{m.index}({_signature(params, m)})'),
            cgen.Block(idx + body)))))
    sig = ", ".join(f"void *a{k}" for k in range(len(params))) or "void"
    decls = [_param_decl(a, k) for k, a in enumerate(params)]

    def launch(m: GpuMapping) -> List[str]:
        g, b = m.grid, m.block
        smem = f", {shared_size(m.shared)}" if m.shared is not None else ""
        return [f"{entry}_k{m.index}<<<dim3({g[0]}, {g[1]}, {g[2]}), dim3({b[0]}, {b[1]}, {b[2]}){smem}>>>"
                f"({_call_args(names, m)});",
                "if ((pt_err = cudaGetLastError()) != cudaSuccess) return (int)pt_err;"]

    # Tiles live in dynamic shared memory: beyond 48 KiB a kernel must opt in to its size first.
    optin = [f"if ((pt_err = cudaFuncSetAttribute({entry}_k{m.index}, cudaFuncAttributeMaxDynamicSharedMemorySize, "
             f"{shared_size(m.shared)})) != cudaSuccess) return (int)pt_err;" for m in mappings if m.shared is not None]
    out.append(f'extern "C" int {entry}_device({sig}) {{\n'
               + "\n".join(decls) + "\ncudaError_t pt_err;\n" + "\n".join(optin + _launch_code(mappings, launch))
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
                      entry: Optional[str] = None, reverse: bool = True, shared: bool = False,
                      shared_bytes: int = 48 * 1024) -> KernelSource:
    """Plain C running the mapped kernels block by block, thread by thread.

    >>> # src = generate_emulated(scop, sched, maps); runtime.build(src.text) -> a C library

    Each kernel is ``static void pt_kernelN(arrays..., host loop values, block
    x/y/z, thread x/y/z)`` with exactly the CUDA kernel's body; the entry
    point calls it for every block of the launched grid and every thread of
    the block (last first when ``reverse``), kernels in launch order inside
    their host loops (always forward: they carry dependences).  A kernel using
    shared memory is emulated per block: its tiles are locals of the block
    function and each phase between two barriers runs every thread of the
    block before the next phase starts.
    """
    _check(scop, mappings)
    entry = entry or f"pt_{scop.name}"
    params = kernel_params(scop)
    names = ", ".join(a.name for a in params)
    mappings = _with_plans(scop, schedule, mappings, shared, shared_bytes)
    # The NaN-propagating max/min reductions a thread's lane-reduced loop may name (c_accumulate).
    out: List[str] = [_banner(scop, mappings, "CUDA emulation on the CPU"), PRELUDE, NAN_REDUCTION_PRELUDE]
    block_params = [f"const long pt_block_{a}" for a in AXES]
    thread_params = [f"const long pt_thread_{a}" for a in AXES]

    def loops(kind: str, dims) -> List[str]:
        out_: List[str] = []
        for a, n in reversed(list(zip(AXES, dims))):
            v = f"pt_{kind}_{a}"
            out_.append(f"for (long {v} = {n - 1}; {v} >= 0; {v}--)" if reverse else
                        f"for (long {v} = 0; {v} < {n}; {v}++)")
        return out_

    calls: Dict[int, List[str]] = {}
    for m in mappings:
        base_sig = _signature(params, m)
        if m.shared is not None:
            sig = ", ".join(x for x in (base_sig, ", ".join(block_params)) if x)
            body = _tile_decls(m.shared, "") + _shared_block(
                scop, schedule, m, lambda nodes, m=m: _thread_loops(m, nodes, reverse), [])
            args = _call_args(names, m, "pt_block_x, pt_block_y, pt_block_z")
            calls[m.index] = loops("block", m.grid) + [f"  {entry}_k{m.index}({args});"]
        else:
            body = kernel_body(scop, schedule, m)
            sig = ", ".join(x for x in (base_sig, ", ".join(block_params + thread_params)) if x)
            args = _call_args(names, m, "pt_block_x, pt_block_y, pt_block_z, pt_thread_x, pt_thread_y, pt_thread_z")
            calls[m.index] = loops("block", m.grid) + loops("thread", m.block) + [f"  {entry}_k{m.index}({args});"]
        out.append(str(cgen.FunctionBody(cgen.Line(f"static void {entry}_k{m.index}({sig})"), cgen.Block(body))))
    sig = ", ".join(f"void *restrict a{k}" for k in range(len(params))) or "void"
    decls = [_param_decl(a, k) for k, a in enumerate(params)]
    body_lines = _launch_code(mappings, lambda m: ["{"] + calls[m.index] + ["}"])
    out.append(f"int {entry}({sig}) {{\n" + "\n".join(decls) + "\n" + "\n".join(body_lines) + "\nreturn 0;\n}\n")
    return KernelSource(entry, "\n".join(out), params, lang="c")


# ---------------------------------------------------------------------------
# Shared-memory promotion (the plan: polytile.scheduling.gpu.promotion_plan)
# ---------------------------------------------------------------------------


def shared_plan(scop: Scop, schedule: Schedule, m: GpuMapping, *, shared_bytes: int = 48 * 1024,
                tk: Optional[int] = None, steps: Optional[Dict[str, int]] = None) -> Tuple[Optional[SharedPlan], str]:
    """The default promotion plan of one kernel, or ``(None, why not)``.

    >>> # plan, why = shared_plan(scop, sched, maps[1]); plan.tiles[0].array -> 'A'

    The innermost reduction loop in steps of ``tk`` (default: the block's x
    size), outer reduction loops one at a time, unless ``steps`` gives them;
    see :func:`polytile.scheduling.gpu.promotion_plan`.  A plan needing more
    than ``shared_bytes`` is reported as a reason, not raised.
    """
    if steps is None and tk is not None:
        ext = reduction_extents(scop, schedule, m)
        if ext is not None:
            steps = {v: 1 for v, _, _ in ext}
            steps[ext[-1][0]] = tk
    try:
        return promotion_plan(scop, schedule, m, steps, shared_bytes=shared_bytes)
    except OutOfResources as e:
        return None, str(e)


def _affine_c(aff) -> str:
    coeffs, c0 = aff
    terms = [(n if c == 1 else f"{c} * {n}") for n, c in coeffs]
    if c0 or not terms:
        terms.append(str(c0))
    return " + ".join(terms).replace("+ -", "- ")


class _TileBodyPrinter(BodyPrinter):
    """Statement bodies reading promoted arrays from their shared tiles (global index minus the tile base)."""

    def __init__(self, arrays, plan: SharedPlan):
        super().__init__(arrays)
        self.plan = plan

    def expr(self, n):
        if isinstance(n, B.Load):
            for t in self.plan.tiles:
                if (t.array, t.index) == (n.array, n.index):
                    return t.name + "".join(f"[{self.expr(e)} - ({_affine_c(b)})]" for e, b in zip(n.index, t.base))
        return super().expr(n)


def _shared_block(scop: Scop, schedule: Schedule, m: GpuMapping, phase, barrier: List[cgen.Generable]):
    """Block-level code: block indices, the block's base per mapped iterator, then per reduction step:
    barrier, cooperative load of every tile, barrier, compute.

    ``phase(nodes)`` makes code that every thread of the block runs (CUDA: as is,
    with its thread indices; emulation: inside loops over the threads).
    """
    plan = m.shared
    arrays = {a.name: a for a in scop.arrays}
    bx, by, bz = m.block
    # Loading: each thread copies every m.threads-th cell of each tile (consecutive threads,
    # consecutive cells of the last dimension: coalesced); cells outside the array are skipped
    # (the domain guards of the compute phase never read them).
    load: List[cgen.Generable] = [cgen.Line(f"const long pt_tid = pt_thread_x + {bx} * (pt_thread_y + {by} * pt_thread_z);")]
    for t in plan.tiles:
        shape = arrays[t.array].shape
        inner: List[cgen.Generable] = []
        stride = t.cells
        conds, gidx = [], []
        for j, (size, base) in enumerate(zip(t.sizes, t.base)):
            stride //= size
            c = "pt_e" if stride == 1 else f"pt_e / {stride}"
            inner.append(cgen.Line(f"const long pt_c{j} = {c if j == 0 else f'{c} % {size}'};"))
            inner.append(cgen.Line(f"const long pt_a{j} = {_affine_c(base)} + pt_c{j};"))
            conds.append(f"pt_a{j} >= 0 && pt_a{j} < {shape[j]}")
            gidx.append(f"[pt_a{j}]")
        cells = "".join(f"[pt_c{j}]" for j in range(len(t.sizes)))
        inner.append(cgen.If(" && ".join(conds), cgen.Line(f"{t.name}{cells} = {t.array}{''.join(gidx)};")))
        load.append(cgen.For("long pt_e = pt_tid", f"pt_e < {t.cells}", f"pt_e += {m.threads}", cgen.Block(inner)))
    # Computing: isl's AST of the statement restricted to this step, reading the tiles.
    printer = AstPrinter(scop, outline=False, guarded_math=False)
    printer.body = _TileBodyPrinter(arrays, plan)
    comp = _thread_guard(m, printer.node(_thread_ast(scop, schedule, m, plan)))
    if printer.vector_types or printer.locals:
        raise InternalError("register tiles and local buffers are not supported by the CUDA backend")
    nodes: List[cgen.Generable] = barrier + phase(load) + barrier + phase(comp)
    for v, lo, hi, step in reversed(plan.steps):
        nodes = [cgen.For(f"long pt_r_{v} = {lo}", f"pt_r_{v} <= {hi}", f"pt_r_{v} += {step}", cgen.Block(nodes))]
    # The block's first value of each mapped iterator (thread 0 of each axis).
    names = {lp.name: f"pt_p_{lp.name}" for a in m.axes for lp in a.loops}
    bases: List[cgen.Generable] = []
    for a in m.axes:
        bases += _decode(m, a, f"(pt_b{a.axis} * {a.block})", "", names)
    return _block_loops(m, bases + nodes)


def _with_plans(scop, schedule, mappings, shared: bool, shared_bytes: int) -> List[GpuMapping]:
    if not shared:
        return list(mappings)
    return [m if m.shared is not None else m.with_shared(shared_plan(scop, schedule, m, shared_bytes=shared_bytes)[0])
            for m in mappings]


def _thread_loops(m: GpuMapping, nodes: List[cgen.Generable], reverse: bool) -> List[cgen.Generable]:
    """Every thread of the block runs ``nodes`` (the emulation of one phase between barriers)."""
    out: List[cgen.Generable] = [cgen.Block(nodes)]
    for a, n in zip(AXES, m.block):  # x innermost
        v = f"pt_thread_{a}"
        loop = (cgen.For(f"long {v} = {n - 1}", f"{v} >= 0", f"{v}--", cgen.Block(out)) if reverse else
                cgen.For(f"long {v} = 0", f"{v} < {n}", f"{v}++", cgen.Block(out)))
        out = [loop]
    return out


#: Alignment of each tile inside the kernel's dynamic shared memory.
TILE_ALIGN = 16


def _tile_offsets(plan: SharedPlan) -> Tuple[List[int], int]:
    offs, n = [], 0
    for t in plan.tiles:
        n = -(-n // TILE_ALIGN) * TILE_ALIGN
        offs.append(n)
        n += t.nbytes
    return offs, n


def shared_size(plan: SharedPlan) -> int:
    """Bytes of dynamic shared memory a kernel with ``plan`` is launched with (tiles, 16-byte aligned).

    >>> # shared_size(plan) >= plan.nbytes
    """
    return _tile_offsets(plan)[1]


def _dynamic_tile_decls(plan: SharedPlan) -> List[cgen.Generable]:
    """Tiles as typed pointers into ``extern __shared__`` memory (static ``__shared__`` stops at 48 KiB)."""
    offs, _ = _tile_offsets(plan)
    out: List[cgen.Generable] = [cgen.Line("extern __shared__ __align__(16) unsigned char pt_smem[];")]
    for t, off in zip(plan.tiles, offs):
        ct = ctype(t.dtype)
        tail = "".join(f"[{s}]" for s in t.sizes[1:])
        ptr = f"({ct} (*){tail})" if tail else f"({ct} *)"
        decl = f"{ct} (*{t.name}){tail}" if tail else f"{ct} *{t.name}"
        out.append(cgen.Line(f"{decl} = {ptr}(pt_smem + {off});  /* {t.array} tile [{']['.join(map(str, t.sizes))}] */"))
    return out


def _tile_decls(plan: SharedPlan, qualifier: str) -> List[cgen.Generable]:
    return [cgen.Line(f"{qualifier}{ctype(t.dtype)} {t.name}{''.join(f'[{s}]' for s in t.sizes)};") for t in plan.tiles]
