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

With ``shared=True``, reduction kernels whose inputs are reused by several
threads of a block (matmul's ``A[i][k]`` across ``j``, ``B[k][j]`` across
``i``) stage them through ``__shared__`` tiles (:func:`shared_plan`): per step
of ``tk`` reduction iterations the block loads the tiles cooperatively,
``__syncthreads()``, computes, ``__syncthreads()``.  The emulation runs such a
kernel per block, each phase between barriers for all threads of the block.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import cgen
import islpy as isl

from polytile.errors import InternalError
from polytile.poly import body as B
from polytile.poly.scop import Array, Scop
from polytile.schedule.core import Schedule
from polytile.schedule.gpu import AXES, GpuMapping

from .c import PRELUDE, AstPrinter, BodyPrinter, KernelSource, _param_decl, _param_type, ctype

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


def _banner(scop: Scop, mappings: Sequence[GpuMapping], what: str, plans=None) -> str:
    lines = [f"/* Generated by polytile ({what})."]
    for s in scop.statements:
        lines.append(f" * {s.name}: {s.text or s.kind}")
    for m, plan in zip(mappings, plans or [None] * len(mappings)):
        lines.extend(" * " + ln for ln in m.describe().splitlines())
        if plan is not None:
            tiles = ", ".join(f"{t.array} as {t.name}[{']['.join(map(str, t.sizes))}]" for t in plan.tiles)
            lines.append(f" *   shared memory ({plan.nbytes} bytes): {tiles}, {plan.k} in steps of {plan.tk}")
    return "\n".join(lines) + "\n */\n"


def _check(scop: Scop, mappings: Sequence[GpuMapping]) -> None:
    seen = [n for m in mappings for n in m.statements]
    if sorted(seen) != sorted(s.name for s in scop.statements):
        raise InternalError(f"GPU mappings cover {seen}, the Scop has {[s.name for s in scop.statements]}")


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
    ``shared`` stages inputs through shared memory where :func:`shared_plan`
    applies (at most ``shared_bytes`` per block).
    """
    _check(scop, mappings)
    entry = entry or f"pt_{scop.name}"
    params = kernel_params(scop)
    names = ", ".join(a.name for a in params)
    plans = _plans(scop, schedule, mappings, shared, shared_bytes)
    out: List[str] = [_banner(scop, mappings, "CUDA", plans)] + ([cuda_prelude()] if prelude else [])
    for m, plan in zip(mappings, plans):
        idx = [cgen.Line(f"const long pt_block_{a} = blockIdx.{a}, pt_thread_{a} = threadIdx.{a};") for a in AXES]
        if plan is None:
            body = kernel_body(scop, schedule, m)
        else:
            body = _tile_decls(plan, "__shared__ ") + _shared_block(
                scop, m, plan, lambda nodes: [cgen.Block(nodes)], [cgen.Line("__syncthreads();")])
        out.append(_cuda_minmax(str(cgen.FunctionBody(
            cgen.Line(f'extern "C" __global__ void __launch_bounds__({m.threads}) {entry}_k{m.index}({_signature(params)})'),
            cgen.Block(idx + body)))))
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
                      entry: Optional[str] = None, reverse: bool = True, shared: bool = False,
                      shared_bytes: int = 48 * 1024) -> KernelSource:
    """Plain C running the mapped kernels block by block, thread by thread.

    Each kernel is ``static void pt_kernelN(arrays..., block x/y/z, thread x/y/z)``
    with exactly the CUDA kernel's body; the entry point calls it for every
    block of the launched grid and every thread of the block (last first when
    ``reverse``), kernels in program order.  A kernel using shared memory
    (``shared``) is emulated per block: its tiles are locals of the block
    function and each phase between two barriers runs every thread of the
    block before the next phase starts.
    """
    _check(scop, mappings)
    entry = entry or f"pt_{scop.name}"
    params = kernel_params(scop)
    names = ", ".join(a.name for a in params)
    plans = _plans(scop, schedule, mappings, shared, shared_bytes)
    out: List[str] = [_banner(scop, mappings, "CUDA emulation on the CPU", plans), PRELUDE]
    block_params = [f"const long pt_block_{a}" for a in AXES]
    idx_params = ", ".join(block_params + [f"const long pt_thread_{a}" for a in AXES])
    calls: List[str] = []
    for m, plan in zip(mappings, plans):
        if plan is not None:
            sig = ", ".join(x for x in (_signature(params), ", ".join(block_params)) if x)
            body = _tile_decls(plan, "") + _shared_block(scop, m, plan, lambda nodes, m=m: _thread_loops(m, nodes, reverse), [])
            out.append(str(cgen.FunctionBody(cgen.Line(f"static void {entry}_k{m.index}({sig})"), cgen.Block(body))))
            loops = [f"for (long pt_block_{a} = {n - 1}; pt_block_{a} >= 0; pt_block_{a}--)" if reverse else
                     f"for (long pt_block_{a} = 0; pt_block_{a} < {n}; pt_block_{a}++)"
                     for a, n in reversed(list(zip(AXES, m.grid)))]
            args = ", ".join(x for x in (names, "pt_block_x, pt_block_y, pt_block_z") if x)
            calls.append("\n".join(loops) + f"\n  {entry}_k{m.index}({args});")
            continue
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


# ---------------------------------------------------------------------------
# Shared-memory promotion (opt-in: ``shared=True``)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SharedTile:
    """One promoted read: ``array[index]`` served from ``__shared__ name[sizes]``.

    ``dims`` gives, per array dimension, the iterator it follows and the
    constant offset (index = iterator + offset); ``sizes`` the tile extent.
    """

    name: str
    array: str
    index: Tuple[B.Node, ...]
    dims: Tuple[Tuple[str, int], ...]
    sizes: Tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class SharedPlan:
    """How one reduction kernel stages its inputs through shared memory, ``tk`` reduction steps at a time."""

    stmt: str
    k: str  # the reduction iterator (tiled by tk)
    k_lo: int
    k_hi: int
    tk: int
    axis_of: Tuple[Tuple[str, str], ...]  # mapped iterator -> grid axis
    tiles: Tuple[SharedTile, ...]

    @property
    def nbytes(self) -> int:
        import numpy as np

        n = 0
        for t in self.tiles:
            c = np.dtype(t.dtype).itemsize
            for s in t.sizes:
                c *= s
            n += c
        return n


def _iter_offset(e: B.Node) -> Optional[Tuple[str, int]]:
    """``(v, c)`` when ``e`` is ``v``, ``v + c``, ``c + v`` or ``v - c``."""
    if isinstance(e, B.Iter):
        return e.name, 0
    if isinstance(e, B.Bin) and e.op in ("+", "-"):
        if isinstance(e.a, B.Iter) and isinstance(e.b, B.Const):
            c = int(e.b.value)
            return e.a.name, (c if e.op == "+" else -c)
        if e.op == "+" and isinstance(e.b, B.Iter) and isinstance(e.a, B.Const):
            return e.b.name, int(e.a.value)
    return None


def shared_plan(scop: Scop, schedule: Schedule, m: GpuMapping, *, shared_bytes: int = 48 * 1024,
                tk: Optional[int] = None) -> Tuple[Optional[SharedPlan], str]:
    """The promotion plan of one kernel, or ``(None, why not)``.

    Applies to a kernel of one reduction statement on a rectangular domain
    whose schedule is the identity on its iterators, with every iterator but
    one (the reduction ``k``) mapped, one loop per grid axis.  Inputs read at
    ``iterator + constant`` in every dimension, and missing at least one
    mapped iterator (so several threads of a block read each element), are
    promoted: per step of ``tk`` reduction iterations the block copies their
    footprint into shared memory cooperatively, synchronises, and computes
    from it.
    """
    if len(m.statements) != 1 or not m.axes:
        return None, "not a single mapped statement"
    st = scop.statement(m.statements[0])
    if st.body.reduce is None or st.c_text is not None:
        return None, "not a reduction"
    if any(len(a.loops) != 1 for a in m.axes):
        return None, "linearised grid axis"
    ss = schedule.table[st.name]
    names = [n for _, n in ss.loops()]
    if names != list(st.iters):
        return None, "schedule is not the identity on the iterators"
    dims = [d for d, _ in ss.loops()]
    cons = " and ".join(f"t{d} = {v}" for d, v in zip(dims, st.iters))
    ident = isl.Map(f"{{ {st.name}[{', '.join(st.iters)}] -> [{', '.join(f't{d}' for d in range(schedule.n_dims))}] : {cons} }}")
    if not ss.map.intersect_domain(st.domain).is_subset(ident):
        return None, "schedule is not the identity on the iterators"
    axis_of = {}
    for a in m.axes:
        axis_of[a.loops[0].name] = a
    rest = [v for v in st.iters if v not in axis_of]
    if len(rest) != 1:
        return None, "needs exactly one sequential (reduction) loop"
    k = rest[0]
    box = []
    bounds = {}
    for j, v in enumerate(st.iters):
        proj = st.domain.project_out(isl.dim_type.set, j + 1, len(st.iters) - j - 1).project_out(isl.dim_type.set, 0, j)
        lo = int(proj.lexmin().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python())
        hi = int(proj.lexmax().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python())
        bounds[v] = (lo, hi)
        box.append(f"{lo} <= {v} <= {hi}")
    if not st.domain.is_equal(isl.Set(f"{{ {st.name}[{', '.join(st.iters)}] : {' and '.join(box)} }}")):
        return None, "domain is not rectangular"
    k_lo, k_hi = bounds[k]
    step = max(1, min(tk or m.axes[0].block, k_hi - k_lo + 1))
    arrays = {a.name: a for a in scop.arrays}
    tiles: List[SharedTile] = []
    seen = set()
    for ld in B.loads(st.body.value):
        if (ld.array, ld.index) in seen or arrays[ld.array].kind != "input" or not ld.index:
            continue
        parts = [_iter_offset(e) for e in ld.index]
        if any(p is None for p in parts):
            continue
        used = {p[0] for p in parts}
        if not (set(axis_of) - used):
            continue  # every thread reads its own elements: no reuse in the block
        sizes = tuple(step if v == k else axis_of[v].block for v, _ in parts)
        seen.add((ld.array, ld.index))
        tiles.append(SharedTile(f"pt_s{len(tiles)}", ld.array, ld.index, tuple(parts), sizes, ld.dtype))
    if not tiles:
        return None, "no input read is shared by several threads of a block"
    plan = SharedPlan(st.name, k, k_lo, k_hi, step, tuple((v, a.axis) for v, a in axis_of.items()), tuple(tiles))
    if plan.nbytes > shared_bytes:
        return None, f"tiles need {plan.nbytes} bytes of shared memory, more than {shared_bytes}"
    return plan, ""


class _TileBodyPrinter(BodyPrinter):
    """Statement bodies reading promoted arrays from their shared tiles."""

    def __init__(self, arrays, plan: SharedPlan):
        super().__init__(arrays)
        self.plan = plan
        self.axis = dict(plan.axis_of)

    def expr(self, n):
        if isinstance(n, B.Load):
            for t in self.plan.tiles:
                if (t.array, t.index) == (n.array, n.index):
                    return t.name + "".join(f"[{v} - {self._base(v)}]" for v, _ in t.dims)
        return super().expr(n)

    def _base(self, v: str) -> str:
        return "pt_kt" if v == self.plan.k else f"pt_base_{self.axis[v]}"


def _shared_block(scop: Scop, m: GpuMapping, plan: SharedPlan, phase, barrier: List[cgen.Generable]):
    """Block-level code: grid-stride/block bases, then per reduction step: load, barrier, compute.

    ``phase(nodes)`` makes code that every thread of the block runs (CUDA: as is,
    with its thread indices; emulation: inside loops over the threads).
    """
    st = scop.statement(plan.stmt)
    arrays = {a.name: a for a in scop.arrays}
    bx, by, bz = m.block
    tid = cgen.Line(f"const long pt_tid = pt_thread_x + {bx} * (pt_thread_y + {by} * pt_thread_z);")
    loops = {v: a for a in m.axes for v in [a.loops[0].name]}
    # Loading: each thread copies every m.threads-th element of each tile.
    load: List[cgen.Generable] = [tid]
    for t in plan.tiles:
        total = 1
        for s in t.sizes:
            total *= s
        inner: List[cgen.Generable] = []
        stride = total
        conds, gidx = [], []
        for j, ((v, off), size) in enumerate(zip(t.dims, t.sizes)):
            stride //= size
            c = "pt_e" if stride == 1 else f"pt_e / {stride}"
            inner.append(cgen.Line(f"const long pt_c{j} = {c if j == 0 else f'{c} % {size}'};"))
            base = "pt_kt" if v == plan.k else f"pt_base_{loops[v].axis}"
            hi = plan.k_hi if v == plan.k else loops[v].loops[0].lo + loops[v].loops[0].extent - 1
            conds.append(f"{base} + pt_c{j} <= {hi}")
            gidx.append(f"[{base} + pt_c{j}{f' + {off}' if off > 0 else (f' - {-off}' if off < 0 else '')}]")
        cells = "".join(f"[pt_c{j}]" for j in range(len(t.sizes)))
        inner.append(cgen.If(" && ".join(conds), cgen.Line(f"{t.name}{cells} = {t.array}{''.join(gidx)};")))
        load.append(cgen.For("long pt_e = pt_tid", f"pt_e < {total}", f"pt_e += {m.threads}", cgen.Block(inner)))
    # Computing: in-range threads run tk steps of the reduction from the tiles.
    printer = _TileBodyPrinter(arrays, plan)
    ok, binds = [], []
    comp: List[cgen.Generable] = []
    for a in m.axes:
        lp = a.loops[0]
        comp.append(cgen.Line(f"const long pt_l{a.axis} = pt_b{a.axis} * {a.block} + pt_thread_{a.axis};"))
        ok.append(f"pt_l{a.axis} < {a.total}")
        binds.append(f"const long {lp.name} = {f'{lp.lo} + ' if lp.lo else ''}pt_l{a.axis};")
    kloop = cgen.For(f"long {plan.k} = pt_kt", f"{plan.k} <= min(pt_kt + {plan.tk - 1}, {plan.k_hi})",
                     f"{plan.k}++", cgen.Block([cgen.Line(printer.store(st.body))]))
    comp.append(cgen.If(" && ".join(ok), cgen.Block([cgen.Line(b) for b in binds] + [kloop])))
    step = barrier + phase(load) + barrier + phase(comp)
    nodes: List[cgen.Generable] = [cgen.For(f"long pt_kt = {plan.k_lo}", f"pt_kt <= {plan.k_hi}",
                                            f"pt_kt += {plan.tk}", cgen.Block(step))]
    for a in m.axes:  # x innermost
        ax = a.axis
        inner = [cgen.Line(f"const long pt_base_{ax} = {a.loops[0].lo} + pt_b{ax} * {a.block};")] + nodes
        if a.strided:
            nodes = [cgen.For(f"long pt_b{ax} = pt_block_{ax}", f"pt_b{ax} < {a.blocks}", f"pt_b{ax} += {a.grid}",
                              cgen.Block(inner))]
        else:
            nodes = [cgen.Block([cgen.Line(f"const long pt_b{ax} = pt_block_{ax};")] + inner)]
    return nodes


def _plans(scop, schedule, mappings, shared: bool, shared_bytes: int) -> List[Optional[SharedPlan]]:
    if not shared:
        return [None] * len(mappings)
    return [shared_plan(scop, schedule, m, shared_bytes=shared_bytes)[0] for m in mappings]


def _thread_loops(m: GpuMapping, nodes: List[cgen.Generable], reverse: bool) -> List[cgen.Generable]:
    """Every thread of the block runs ``nodes`` (the emulation of one phase between barriers)."""
    out: List[cgen.Generable] = [cgen.Block(nodes)]
    for a, n in zip(AXES, m.block):  # x innermost
        v = f"pt_thread_{a}"
        loop = (cgen.For(f"long {v} = {n - 1}", f"{v} >= 0", f"{v}--", cgen.Block(out)) if reverse else
                cgen.For(f"long {v} = 0", f"{v} < {n}", f"{v}++", cgen.Block(out)))
        out = [loop]
    return out


def _tile_decls(plan: SharedPlan, qualifier: str) -> List[cgen.Generable]:
    return [cgen.Line(f"{qualifier}{ctype(t.dtype)} {t.name}{''.join(f'[{s}]' for s in t.sizes)};") for t in plan.tiles]
