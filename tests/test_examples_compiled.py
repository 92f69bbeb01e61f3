"""Every example, compiled to OpenMP C and run, against the numpy oracle.

For each ``examples/*.tile`` and each of its ``// dims:`` lines (every
example has at least two, one of them awkward, with a size of 1), the kernel
from ``polytile.compile(path)`` runs on random integer-valued inputs (values
in [-4, 4], or [1, 4] for ``// inputs: positive``; see
``numpy_programs.make_inputs``) and its outputs are compared with
``polytile.reference`` on the same arrays:

* output count, dtypes and shapes must equal the oracle's exactly;
* float64 and float32 values must be *equal*, except for programs that are
  not exact on integer data (see :func:`float_inexact`): those are compared
  with ``F64_TOL`` / ``F32_TOL``;
* int32 inputs are run where the program has no true division and no
  transcendental builtin (see :func:`integer_exact`); values must be equal.

The generated source is checked too: the loop nest of every contraction
whose output has rank >= 1 starts with ``#pragma omp parallel for`` on its
outermost loop (in every example that loop runs over an output index, so it
is dependence-free).
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Set, Tuple

import numpy as np
import pytest

import polytile
from polytile import ir
from polytile.poly import body as B

from numpy_programs import example_cases, example_paths, input_shapes, make_inputs

PATHS = example_paths()

#: Tolerances for programs that are not exact on integer-valued data
#: (libm vs numpy transcendentals, sums of non-integers in another order).
F64_TOL = dict(rtol=1e-12, atol=1e-12)
F32_TOL = dict(rtol=1e-5, atol=1e-6)

#: Builtins whose C (libm) and numpy results may differ in the last bits.
#: sqrt, recip (1/x) and true division are correctly rounded on both sides.
NOT_CORRECTLY_ROUNDED = frozenset({"exp", "log", "tanh", "sigmoid", "sin", "cos", "tan", "pow"})
#: Builtins that make an integer program produce non-integers (or reject ints).
NON_INTEGER = NOT_CORRECTLY_ROUNDED | {"sqrt", "recip"}


def _exprs(stmt) -> List[ir.Expr]:
    if isinstance(stmt, ir.Assign):
        return [stmt.expr]
    return []


def _calls(program: ir.Program) -> Set[str]:
    return {n.func for s in program.body for e in _exprs(s) for n in ir.walk(e) if isinstance(n, ir.Call)}


def _has_true_division(stmt) -> bool:
    return any(isinstance(n, ir.Binary) and n.op == "/" for e in _exprs(stmt) for n in ir.walk(e))


def integer_exact(program: ir.Program) -> bool:
    """No true division and no transcendental: int32 inputs give exact integer results."""
    return not (_calls(program) & NON_INTEGER) and not any(_has_true_division(s) for s in program.body)


def float_inexact(program: ir.Program) -> bool:
    """True if integer-valued float inputs may legitimately give different last bits.

    That is: a builtin that is not correctly rounded, or a contraction that
    reduces values derived (transitively) from a true division, where the
    summation order matters.  A lone division, sqrt or recip is correctly
    rounded in both numpy and C, so it must match exactly.
    """
    if _calls(program) & NOT_CORRECTLY_ROUNDED:
        return True
    tainted: Set[str] = set()
    for s in program.body:
        if isinstance(s, ir.Assign):
            refs = {n.name for n in ir.walk(s.expr) if isinstance(n, ir.Ref)}
            if _has_true_division(s) or refs & tainted:
                tainted.add(s.target)
        elif isinstance(s, ir.Contraction):
            if {op.tensor for op in s.operands} & tainted:
                return True
    return False


@lru_cache(maxsize=None)
def kernel(path) -> "polytile.Kernel":
    # Every parallel loop kept, however small the example's sizes (min_parallel_work=0): these tests
    # check where the parallel loops go and that they do not race, and run them against the oracle.
    return polytile.compile(path, min_parallel_work=0)


def _params():
    for path in PATHS:
        program = polytile.load_program(path)
        dtypes = ["float64", "float32"] + (["int32"] if integer_exact(program) else [])
        for n, _ in enumerate(example_cases(path)):
            for dt in dtypes:
                yield pytest.param(path, n, dt, id=f"{path.stem}-{n}-{dt}")


def _as_tuple(x):
    return tuple(x) if isinstance(x, tuple) else (x,)


def test_examples_present_with_two_shape_sets():
    assert len(PATHS) >= 24
    for path in PATHS:
        cases = example_cases(path)
        assert len(cases) >= 2, path.name
        assert any(1 in c["dims"].values() or any(1 in s for s in c["shapes"]) for c in cases), path.name


def test_exactness_classification():
    """The rules above sort the examples as expected (guards the rules themselves)."""
    by_name = {p.stem: polytile.load_program(p) for p in PATHS}
    assert float_inexact(by_name["softmax"]) and float_inexact(by_name["geomean"])
    assert float_inexact(by_name["layernorm_stats"])  # sums of (X - S/N)^2
    assert not float_inexact(by_name["mean"]) and not float_inexact(by_name["matmul"])
    assert integer_exact(by_name["matmul"]) and integer_exact(by_name["triu"])
    assert not integer_exact(by_name["mean"]) and not integer_exact(by_name["math_builtins"])


@pytest.mark.parametrize("path, n, dtype", list(_params()))
def test_example_matches_oracle(path, n, dtype):
    case = example_cases(path)[n]
    k = kernel(path)
    program = k.program
    rng = np.random.default_rng(zlib.crc32(f"{path.stem}:{n}:{dtype}".encode()))
    arrays = make_inputs(program, case, rng, np.dtype(dtype))
    for a, shape in zip(arrays, case["shapes"]):
        assert a.shape == tuple(shape) and a.dtype == np.dtype(dtype)

    got = _as_tuple(k(*[a.copy() for a in arrays]))
    want = _as_tuple(polytile.reference(program, *[a.copy() for a in arrays]))
    assert len(got) == len(want) == len(program.outputs)

    inexact = float_inexact(program) and dtype != "int32"
    tol = F32_TOL if dtype == "float32" else F64_TOL
    for name, g, w in zip(program.outputs, got, want):
        w = np.asarray(w)
        msg = f"{path.stem} output {name}, dims {case['dims']}, {dtype} inputs"
        assert isinstance(g, np.ndarray), msg
        assert g.dtype == w.dtype, f"{msg}: dtype {g.dtype} != oracle {w.dtype}"
        assert g.shape == w.shape, f"{msg}: shape {g.shape} != oracle {w.shape}"
        if inexact:
            np.testing.assert_allclose(g, w, err_msg=msg, **tol)
        else:
            np.testing.assert_array_equal(g, w, err_msg=msg)


def test_inputs_are_not_modified(rng):
    path = next(p for p in PATHS if p.stem == "softmax")
    case = example_cases(path)[0]
    arrays = make_inputs(kernel(path).program, case, rng, np.float64)
    copies = [a.copy() for a in arrays]
    kernel(path)(*arrays)
    for a, c in zip(arrays, copies):
        np.testing.assert_array_equal(a, c)


# ---------------------------------------------------------------------------
# Parallel loops in the generated source
# ---------------------------------------------------------------------------

_STMT = re.compile(r"^\s*(?:\{ )?((?:const long \w+ = [^;]*; )*)(\w+)((?:\[[^\]]*\])*) (?:=|\+=|\*=) ")
_FOR = re.compile(r"^\s*for \(long (\w+) = ")
_PRAGMA = "#pragma omp parallel for"


@dataclass
class Loop:
    iterator: str
    parallel: bool  # directly under '#pragma omp parallel for'
    header: str = ""  # the 'for (...)' line: its bounds may use outer iterators (tiles)
    reduces: Tuple[str, ...] = ()  # arrays in its pragma's reduction clauses (each thread a private copy)


@dataclass
class StatementLine:
    text: str
    binds: Dict[str, str]  # user iterator -> expression in the loop iterators
    array: str
    index: str  # the written cell, e.g. "[i][0]"
    loops: List[Loop]  # enclosing loops, outermost first

    def _moves_directly(self, loop: Loop) -> bool:
        moving = {v for v, e in self.binds.items() if re.search(rf"\b{loop.iterator}\b", e)} | {loop.iterator}
        return any(re.search(rf"\b{re.escape(v)}\b", self.index) for v in moving)

    def moves(self, loop: Loop) -> bool:
        """True if different iterations of ``loop`` write different cells (as far as the text shows).

        A tile loop moves the cell through the bounds of its point loop: in
        ``for (c0 ...) for (c3 = 8 * c0; c3 <= 8 * c0 + 7; ...) C[c3] = ...``
        distinct ``c0`` give disjoint ranges of ``c3``.
        """
        if self._moves_directly(loop):
            return True
        inner = self.loops[self.loops.index(loop) + 1:] if loop in self.loops else []
        return any(re.search(rf"\b{loop.iterator}\b", lp.header.split("=", 1)[-1]) and self.moves(lp)
                   for lp in inner)


_OUTLINED = re.compile(r"^static __attribute__\(\(noinline\)\) void (pt_par\d+)\(")
_CALL = re.compile(r"^\s*(pt_par\d+)\(.*\);\s*$")


def inline_outlined(source: str) -> List[str]:
    """Source lines with each call of an outlined parallel body replaced by that body.

    The code generator moves the body of every parallel loop into a
    ``pt_parN`` function (its parameters keep the caller's iterator names);
    putting the bodies back gives the loop nest as it runs.
    """
    lines = source.splitlines()
    bodies: Dict[str, List[str]] = {}
    rest: List[str] = []
    i = 0
    while i < len(lines):
        m = _OUTLINED.match(lines[i])
        if not m:
            rest.append(lines[i])
            i += 1
            continue
        depth, j, body = 0, i + 1, []
        while True:
            depth += lines[j].count("{") - lines[j].count("}")
            body.append(lines[j])
            j += 1
            if depth == 0:
                break
        bodies[m.group(1)] = body
        i = j

    def expand(ls: List[str]) -> List[str]:
        out: List[str] = []
        for ln in ls:
            c = _CALL.match(ln)
            out.extend(expand(bodies[c.group(1)]) if c and c.group(1) in bodies else [ln])
        return out

    return expand(rest)


def statement_lines(source: str) -> List[StatementLine]:
    """Every statement instance line of the kernel with its enclosing loops."""
    lines = inline_outlined(source)
    out: List[StatementLine] = []
    stack: List[tuple] = []  # (Loop, brace depth before its 'for' line)
    private: List[tuple] = []  # (pointer to this thread's slice of a buffer, brace depth of its declaration)
    depth = 0
    for n, line in enumerate(lines):
        s = line.strip()
        own = _PER_THREAD.search(s)
        if own:
            private.append((own.group(1), depth))
        m = _FOR.match(line)
        if m:
            pragma = lines[n - 1].strip() if n > 0 and lines[n - 1].strip().startswith(_PRAGMA) else ""
            reduces = tuple(re.findall(r"reduction\([^:]+:(\w+)", pragma))
            stack.append((Loop(m.group(1), bool(pragma), line.strip(), reduces), depth))
        st = _STMT.match(line)
        # Register-tile accumulators (acc_R_V) and SIMD reductions' (pt_accN, added to the cell after
        # their loop) are per-thread locals, not memory: skip them.
        if st and re.fullmatch(r"acc_\w+|pt_acc\d+", st.group(2)):
            st = None
        # A packed panel written through a pointer to this thread's slice of the buffer is private too.
        if st and any(st.group(2) == name for name, _ in private):
            st = None
        if st and not s.startswith(("const ", "for (", "int ", "static ")):
            binds = dict(re.findall(r"const long (\w+) = ([^;]*);", st.group(1)))
            out.append(StatementLine(s, binds, st.group(2), st.group(3), [lp for lp, _ in stack]))
        depth += s.count("{") - s.count("}")
        if "}" in s:
            while stack and depth <= stack[-1][1]:
                stack.pop()
            while private and depth < private[-1][1]:
                private.pop()
    return out


#: ``float *restrict pt_pk0 = pt_pkbuf0 + (long)pt_thread_num() * 576;``: the name of a thread's own slice.
_PER_THREAD = re.compile(r"\*\s*(?:restrict\s+)?(\w+)\s*=[^;]*\bpt_thread_num\(\)")


def parallel_loop_races(source: str) -> List[str]:
    """Statements in a parallel loop whose written cell does not move with that loop.

    Such a statement writes one cell from different iterations of the
    parallel loop: a data race (a reduction or an overwrite carried by the
    loop).  The check is necessary, not sufficient, for a correct pragma.
    """
    return [f"loop {lp.iterator}: {st.text}" for st in statement_lines(source)
            for lp in st.loops if lp.parallel and not st.moves(lp) and st.array not in lp.reduces]


_SAMPLE = """
int pt_k(void *restrict a0)
{
  double *restrict O = (double *)a0;
  #pragma omp parallel for schedule(static)
  for (long c0 = 0; c0 <= 3; c0 += 1)
  {
    { const long o0 = c0; O[o0] = 0; }
  }
  for (long c0 = 0; c0 <= 3; c0 += 1)
  {
    { const long i = c0; R[0] += O[i]; }
  }
  {
    const long c0 = 0;
    #pragma omp parallel for schedule(static)
    for (long c1 = 0; c1 <= 3; c1 += 1)
    {
      for (long c2 = 0; c2 <= 3; c2 += 1)
      {
        { const long i = c0; const long j = c1; const long k = c2; C[i][j] += A[i][k]; }
      }
      { const long j = c1; C[0][j] *= 2; }
    }
  }
  R[0] = 1;
  return 0;
}
"""


_PACKS = """
int pt_k(void *restrict a0)
{
  #pragma omp parallel for schedule(static)
  for (long c0 = 0; c0 <= 1; c0 += 1)
  {
    {
      float *restrict pt_pk0 = pt_pkbuf0 + (long)pt_thread_num() * 576;
      for (long pt_l = 0; pt_l < 16; pt_l += 1)
        pt_pk0[pt_l] = F[pt_l];
    }
    for (long pt_l = 0; pt_l < 16; pt_l += 1)
      pt_pk1[pt_l] = F[pt_l];
  }
  return 0;
}
"""


def test_a_threads_own_pack_buffer_is_not_a_race_and_a_shared_one_is():
    assert parallel_loop_races(_PACKS) == ["loop c0: pt_pk1[pt_l] = F[pt_l];"]


def test_statement_lines_parser():
    got = [(st.array, st.index, [(lp.iterator, lp.parallel) for lp in st.loops]) for st in statement_lines(_SAMPLE)]
    assert got == [
        ("O", "[o0]", [("c0", True)]),
        ("R", "[0]", [("c0", False)]),
        ("C", "[i][j]", [("c1", True), ("c2", False)]),
        ("C", "[0][j]", [("c1", True)]),
        ("R", "[0]", []),
    ]
    assert parallel_loop_races(_SAMPLE) == []
    racy = _SAMPLE.replace("const long j = c1; const long k = c2;", "const long j = c2; const long k = c1;")
    assert parallel_loop_races(racy) == ["loop c1: { const long i = c0; const long j = c2; const long k = c1; "
                                         "C[i][j] += A[i][k]; }"]
    scalar = _SAMPLE.replace("  for (long c0 = 0; c0 <= 3; c0 += 1)\n  {\n    { const long i",
                             "  #pragma omp parallel for\n  for (long c0 = 0; c0 <= 3; c0 += 1)\n  {\n    { const long i")
    assert len(parallel_loop_races(scalar)) == 1


def _contraction_lines(spec) -> List[tuple]:
    """(scop statement, output rank, its lines in the source) for each contraction update."""
    lines = statement_lines(spec.source.text)
    shapes = {a.name: a.shape for a in spec.scop.arrays}
    out = []
    for st in spec.scop.statements:
        if st.kind != "contract" or _recurrence(spec.scop, st):
            continue
        # Every iterator bound, in order; a SIMD reduction's write-back binds only the cell's iterators.
        binds = "".join(rf"(?:const long {re.escape(v)} = [^;]*; )?" for v in st.iters)
        pat = re.compile(r"^\{ " + binds + re.escape(st.body.array) + r"\[")
        out.append((st, len(shapes[st.body.array]), [ln for ln in lines if pat.match(ln.text)]))
    return out


def _recurrence(scop, st) -> bool:
    """Whether contraction ``st`` is part of a prefix computed as a recurrence (poly.scan: a statement of its
    tensor reads the cells it writes, each from the previous one); its scan axis runs in order, serially."""
    return any(s.kind == "contract" and s.origin == st.origin and
               any(ld.array == s.body.array for ld in B.loads(s.body.value)) for s in scop.statements)


def _source_params():
    for path in PATHS:
        for n, _ in enumerate(example_cases(path)):
            yield pytest.param(path, n, id=f"{path.stem}-{n}")


@pytest.mark.parametrize("path, n", list(_source_params()))
def test_contractions_have_parallel_outer_loop(path, n):
    """The outermost loop that moves a contraction's output cell is '#pragma omp parallel for'.

    In every example that loop runs over an output index and is
    dependence-free.  Loops before it (sizes of 1 make isl drop output loops)
    carry the reduction and must stay sequential: no parallel loop may leave
    the written cell unchanged (a race) -- unless its pragma reduces the array
    (a small output whose rows run in parallel, scheduling.locality).
    """
    k = kernel(path)
    case = example_cases(path)[n]
    shapes = input_shapes(k.program, case)
    spec = k.specialize_shapes(shapes, ["float32"] * len(shapes), build=False)
    assert spec.source.text == k.source(shapes=shapes)
    where = f"{path.stem} dims {case['dims']}"
    parallel_expected = False
    for st, rank, found in _contraction_lines(spec):
        assert found, f"{where}: no line of the source executes contraction {st.name} ({st.text})"
        for line in found:
            moving = [lp for lp in line.loops if line.moves(lp)]
            if rank == 0:
                assert not moving
                continue
            if any(lp.parallel and line.array in lp.reduces for lp in line.loops):
                parallel_expected = True  # rows in parallel, each thread reducing into a private copy
                continue
            if moving:
                parallel_expected = True
                assert moving[0].parallel, (
                    f"{where}: loop {moving[0].iterator}, the outermost over an output index of {st.name} "
                    f"({st.text}), is not '{_PRAGMA}': {line.text}")
    if parallel_expected:
        assert _PRAGMA in spec.source.text
    races = parallel_loop_races(spec.source.text)
    assert not races, f"{where}: parallel loops write one cell from several iterations:\n" + "\n".join(races)


def test_every_example_with_ranked_contraction_is_parallel_at_nice_sizes():
    """At the first (nice) dims line every rank >= 1 contraction really has a parallel loop."""
    for path in PATHS:
        k = kernel(path)
        shapes = input_shapes(k.program, example_cases(path)[0])
        spec = k.specialize_shapes(shapes, ["float64"] * len(shapes), build=False)
        for st, rank, found in _contraction_lines(spec):
            if rank >= 1:
                assert found and all(any(lp.parallel for lp in ln.loops) for ln in found), (path.stem, st.text)
