"""Random contraction programs: the compiled kernel against the oracle (hypothesis).

The generator writes Tile *text*: 1-3 operand tensors (ranks 1-4; each axis a
dimension name or a fixed integer; a later operand may reuse an earlier
tensor), one contraction with a random aggregation (``+ * > < =``) and
combination (none, ``+``, ``*``, ``==``, ``A == B ? C``), index polynomials
that are affine combinations of up to 4 index variables with coefficients
in -2..2 and offsets in -2..2, sometimes one exact division ``(...) / 2``,
up to two constraints ``poly < bound``, sometimes a ``default`` tensor, and
sometimes an elementwise statement after it (builtins, a dimension as a
value, numpy broadcasting against an input).  Sizes are 1-7.

For each program:

* ``parse(str(parse(text))) == parse(text)`` (and printing is stable);
* on integer-valued float64 inputs (values in [-4, 4]; [-2, 2] under ``*``
  aggregation, [-1, 1] if ``*`` meets a ``+`` combination or overflows, so
  products stay exact) the compiled kernel and ``polytile.reference`` agree
  exactly, with the same output dtypes and shapes, and no parallel loop of
  the generated C writes one cell from several iterations;
* a program the two cannot run must be refused by both with the same error
  class: ``TileSemanticError`` when an index variable has no finite range
  (the generator makes such programs on purpose: ``A[i + j]`` alone leaves
  ``i`` unbounded) and ``CollisionError`` when ``=`` writes a cell twice.

Runtime: each example is one small C compile; with the ``ci`` profile (50
examples per test) the whole file takes about 5 s on a 2-core machine when
it passes (300 examples, ``HYPOTHESIS_PROFILE=dev``: about 20 s).  A
failure adds hypothesis' shrinking, typically well under a minute.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

import polytile
from polytile.errors import CollisionError, PolytileError, TileSemanticError
from polytile.frontends.tile import parse

from test_examples_compiled import parallel_loop_races

INDEX_VARS = ("i", "j", "k", "l")
DIM_NAMES = ("D0", "D1", "D2", "D3")
# Repeated entries make a value likelier; hypothesis shrinks toward the first.
COEFS = (1, 1, 1, -1, 2, -2)
OFFSETS = (0, 0, 0, 1, -1, 2, -2)
TERMS = (1, 1, 1, 2, 2, 3, 4)  # variables per index polynomial

Dim = Union[str, int]


@dataclass
class Generated:
    text: str
    dims: Dict[str, int]
    inputs: List[Tuple[str, List[Dim]]]
    agg: str
    combo: Optional[str]
    outputs: List[str]
    features: List[str] = field(default_factory=list)

    def shapes(self) -> List[Tuple[int, ...]]:
        return [tuple(d if isinstance(d, int) else self.dims[d] for d in dims) for _, dims in self.inputs]


def _poly_text(coefs, offset) -> str:
    terms = []
    for c, v in zip(coefs, INDEX_VARS):
        if c == 0:
            continue
        t = v if abs(c) == 1 else f"{abs(c)}*{v}"
        terms.append(("-" if c < 0 else "+", t))
    if offset:
        terms.append(("-" if offset < 0 else "+", str(abs(offset))))
    if not terms:
        return "0"
    sign, first = terms[0]
    text = ("-" if sign == "-" else "") + first
    for sign, t in terms[1:]:
        text += f" {sign} {t}"
    return text


@st.composite
def polys(draw, nvars: int) -> str:
    """An affine index polynomial in some of the first ``nvars`` index variables.

    Two times in three a plain variable, else mostly one or two variables,
    as in real programs: indices that couple every variable make most
    domains empty.
    """
    if draw(st.integers(0, 2)) < 2:  # a plain variable, the common case
        coefs = [0] * nvars
        coefs[draw(st.integers(0, nvars - 1))] = 1
        return _poly_text(coefs, 0)
    count = min(nvars, draw(st.sampled_from(TERMS)))
    chosen = draw(st.permutations(range(nvars)))[:count]
    coefs = [0] * nvars
    for v in chosen:
        coefs[v] = draw(st.sampled_from(COEFS))
    offset = draw(st.sampled_from(OFFSETS))
    if offset <= 0 and all(c <= 0 for c in coefs):
        coefs = [-c for c in coefs]  # never >= 0: would only empty the domain
    return _poly_text(coefs, offset)


def _broadcasts(a: Tuple[int, ...], b: Tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


@st.composite
def programs(draw) -> Generated:
    sizes = {d: draw(st.integers(1, 7)) for d in DIM_NAMES}
    nvars = draw(st.integers(1, 4))
    agg = draw(st.sampled_from(["+", "*", ">", "<", "="]))
    combo = draw(st.sampled_from([None, "+", "*", "==", "?"]))
    nops = {None: 1, "+": 2, "*": 2, "==": 2, "?": 3}[combo]
    features: List[str] = []

    dim_token = st.one_of(st.sampled_from(DIM_NAMES), st.integers(1, 7))
    inputs: List[Tuple[str, List[Dim]]] = []
    operands: List[Tuple[str, List[str]]] = []
    for n in range(nops):
        if inputs and draw(st.integers(0, 3)) == 0:
            name, dims = inputs[draw(st.integers(0, len(inputs) - 1))]
            features.append("reused-operand")
        else:
            dims = draw(st.lists(dim_token, min_size=1, max_size=4))
            name = "ABC"[len(inputs)]
            inputs.append((name, dims))
        operands.append((name, [draw(polys(nvars)) for _ in dims]))

    declared = sorted({d for _, dims in inputs for d in dims if isinstance(d, str)})
    size_token = st.one_of(st.integers(1, 7), st.sampled_from(declared)) if declared else st.integers(1, 7)
    out_rank = draw(st.integers(0, 3))
    out_idx = [draw(polys(nvars)) for _ in range(out_rank)]
    out_sizes: List[Dim] = [draw(size_token) for _ in range(out_rank)]
    constraints = draw(st.lists(st.tuples(polys(nvars), size_token), max_size=2))
    if constraints:
        features.append("constraint")

    # At most one exact division by 2, in an output or operand index.
    slots = [("out", d) for d in range(out_rank)] + [(n, d) for n, (_, idx) in enumerate(operands)
                                                     for d in range(len(idx))]
    if draw(st.integers(0, 2)) == 0:
        where, d = slots[draw(st.integers(0, len(slots) - 1))]
        target = out_idx if where == "out" else operands[where][1]
        target[d] = f"({target[d]}) / 2"
        features.append("division")

    default = out_rank > 0 and draw(st.integers(0, 4)) == 0
    if default:
        inputs.append(("Dflt", list(out_sizes)))
        features.append("default")

    def ref(name, idx):
        return f"{name}[{', '.join(idx)}]"

    parts = [ref(*op) for op in operands]
    rhs = {None: "{0}", "+": "{0} + {1}", "*": "{0} * {1}", "==": "{0} == {1}", "?": "{0} == {1} ? {2}"}[combo]
    rhs = rhs.format(*parts)
    out = f"O[{', '.join(out_idx)}" + (f" : {', '.join(map(str, out_sizes))}]" if out_rank else "]")
    stmt = f"{out} = {agg}({rhs})"
    stmt += "".join(f", {c} < {b}" for c, b in constraints)
    if default:
        stmt += " default Dflt"
    body = [stmt]

    gen = Generated("", sizes, inputs, agg, combo, ["O"], features)
    out_shape = tuple(s if isinstance(s, int) else sizes[s] for s in out_sizes)
    if draw(st.integers(0, 2)) == 0:
        templates = ["Y = O * 2 - 1", "Y = relu(O) + abs(O)", "Y = max(O, 1) - min(O, -1)",
                     "Y = O > 0 ? O : -O", "Y = floor(O) - ceil(-O)"]
        if declared:
            templates.append(f"Y = O == 0 ? {declared[0]} : O")
        partners = [nm for (nm, _), shp in zip(inputs, gen.shapes()) if _broadcasts(out_shape, shp)]
        if partners:
            templates.append(f"Y = O + {partners[draw(st.integers(0, len(partners) - 1))]}")
        body.append(draw(st.sampled_from(templates)))
        gen.outputs = draw(st.sampled_from([["Y"], ["O", "Y"], ["Y", "O"]]))
        features.append("elementwise")

    header = ", ".join(f"{nm}[{', '.join(map(str, dims))}]" for nm, dims in inputs)
    gen.text = f"function ({header}) -> ({', '.join(gen.outputs)}) {{\n" + \
        "".join(f"  {s};\n" for s in body) + "}"
    return gen


def _value_range(gen: Generated) -> Tuple[int, int]:
    if gen.agg == "*":
        return (-1, 1) if gen.combo == "+" else (-2, 2)
    return (-4, 4)


def _inputs(gen: Generated, seed: int, lo: int, hi: int) -> List[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(lo, hi + 1, size=s).astype(np.float64) for s in gen.shapes()]


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _run(fn):
    try:
        return fn(), None
    except PolytileError as exc:
        return None, exc


def check_program(gen: Generated, seed: int, target: str = "openmp") -> str:
    """Round-trip, run both sides, compare; return what happened (for statistics)."""
    note(gen.text)
    program = parse(gen.text)
    printed = str(program)
    assert parse(printed) == program, printed
    assert str(parse(printed)) == printed

    lo, hi = _value_range(gen)
    arrays = _inputs(gen, seed, lo, hi)
    want, ref_err = _run(lambda: _as_tuple(polytile.reference(program, *arrays)))
    if want is not None and gen.agg == "*" and not all(np.isfinite(w).all() for w in want):
        lo, hi = -1, 1  # keep products finite (inf * 0 would depend on the order)
        arrays = _inputs(gen, seed, lo, hi)
        want, ref_err = _run(lambda: _as_tuple(polytile.reference(program, *arrays)))
    kernel, compile_err = _run(lambda: polytile.compile(gen.text, target=target))
    assert compile_err is None, f"compile() refused a program the generator considers valid: {compile_err}"
    got, run_err = _run(lambda: _as_tuple(kernel(*arrays)))

    if ref_err is not None or run_err is not None:
        assert ref_err is not None and run_err is not None, (
            f"only one side failed:\n  oracle:   {ref_err!r}\n  compiled: {run_err!r}")
        assert type(run_err) is type(ref_err), f"oracle: {ref_err!r}\ncompiled: {run_err!r}"
        assert type(run_err) in (TileSemanticError, CollisionError), repr(run_err)
        if type(run_err) is TileSemanticError:
            assert "no finite range" in run_err.message and "no finite range" in ref_err.message
            assert run_err.loc is not None and ref_err.loc is not None
            return "unbounded"
        assert gen.agg == "=" and "twice" in run_err.message and "twice" in ref_err.message
        return "collision"

    assert len(got) == len(want) == len(gen.outputs)
    for name, g, w in zip(gen.outputs, got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != oracle {w.dtype}"
        assert g.shape == w.shape, f"{name}: shape {g.shape} != oracle {w.shape}"
        np.testing.assert_array_equal(g, w, err_msg=f"output {name} of\n{gen.text}\ninputs {arrays}")
    races = parallel_loop_races(kernel.source(*arrays)) if target == "openmp" else []
    assert not races, "parallel loops write one cell from several iterations:\n" + "\n".join(races)
    return "ran" if any(np.any(w != 0) for w in want) else "ran, all outputs 0"


@given(gen=programs(), seed=st.integers(0, 2**32 - 1))
def test_random_contractions_match_oracle(gen, seed):
    outcome = check_program(gen, seed)
    event(outcome)
    event(f"agg {gen.agg}")
    for f in gen.features:
        event(f)


@settings(max_examples=25)
@given(gen=programs(), seed=st.integers(0, 2**32 - 1))
def test_random_contractions_match_oracle_llvm(gen, seed):
    """The same random programs on the llvm target (LLVM IR, JIT-compiled): the oracle's results."""
    event(check_program(gen, seed, "llvm"))


# ---------------------------------------------------------------------------
# The generator itself, and fixed programs for the error paths
# ---------------------------------------------------------------------------


def test_poly_text():
    assert _poly_text([1, 0, 0, 0], 0) == "i"
    assert _poly_text([-2, 1, 0, -1], -2) == "-2*i + j - l - 2"
    assert _poly_text([0, 0, 0, 0], 0) == "0"
    assert _poly_text([0, 2], 1) == "2*j + 1"
    assert parse("function (A[N]) -> (O) { O[i : N] = +(A[-2*i + j - l - 2]); }")


@given(gen=programs())
def test_generated_programs_pass_the_static_checks(gen):
    """The generator only writes programs that parse and pass sema.check (no compile: fast)."""
    prog = polytile.load_program(gen.text)
    assert list(prog.outputs) == gen.outputs
    assert [i.name for i in prog.inputs] == [n for n, _ in gen.inputs]


@pytest.mark.parametrize("text, shapes", [
    ("function (A[N]) -> (O) { O[] = +(A[i + j]); }", [(5,)]),
    ("function (A[N], B[M]) -> (O) { O[i : N] = +(A[i] * B[j - k]); }", [(3,), (4,)]),
    ("function (A[N]) -> (O) { O[i : 3] = >(A[i]), j - k < 2; }", [(4,)]),
    ("function (A[N]) -> (O) { O[] = +(A[(i + j) / 2]); }", [(4,)]),
    # Found by the generator: unbounded i and k, and for N = 1 no integer point
    # (2i + 2k + 1 = 0), so the error must not depend on the size.
    ("function (A[N]) -> (O) { O[] = +(A[j] + A[2*i + j + 2*k + 1]); }", [(1,)]),
    ("function (A[N]) -> (O) { O[] = +(A[j] + A[2*i + j + 2*k + 1]); }", [(3,)]),
])
def test_unbounded_variable_refused_by_both(text, shapes):
    arrays = [np.ones(s) for s in shapes]
    with pytest.raises(TileSemanticError, match="no finite range") as ref:
        polytile.reference(text, *arrays)
    k = polytile.compile(text)
    with pytest.raises(TileSemanticError, match="no finite range") as comp:
        k(*arrays)
    assert type(comp.value) is type(ref.value) is TileSemanticError
    assert comp.value.line == ref.value.line == 1


@pytest.mark.parametrize("text, shapes", [
    ("function (A[N]) -> (O) { O[i : N] = =(A[j]); }", [(3,)]),
    ("function (A[N, M]) -> (O) { O[i + j : N + M] = =(A[i, j]); }", [(2, 3)]),
    ("function (A[N]) -> (O) { O[(i + j) / 2 : N] = =(A[i]), j < 3; }", [(4,)]),
])
def test_collisions_refused_by_both(text, shapes):
    arrays = [np.ones(s) for s in shapes]
    with pytest.raises(CollisionError, match="twice") as ref:
        polytile.reference(text, *arrays)
    k = polytile.compile(text)
    with pytest.raises(CollisionError, match="twice") as comp:
        k(*arrays)
    assert comp.value.line == ref.value.line == 1


def test_injective_assignments_run():
    """'=' that never collides, including through an exact division."""
    k = polytile.compile("function (A[N]) -> (O) { O[2*i + 1 : 2*N] = =(A[i]); }")
    A = np.arange(1.0, 5.0)
    np.testing.assert_array_equal(k(A), [0, 1, 0, 2, 0, 3, 0, 4])
    k = polytile.compile("function (A[N]) -> (O) { O[i / 2 : N] = =(A[i]), i < 2*N; }")
    # Only even i are in the domain: O[m] = A[2m] where 2m < N.
    np.testing.assert_array_equal(k(A), polytile.reference(k.program, A))


@pytest.mark.parametrize("text, shapes", [
    # Found by the generator: a scalar reduction whose loop over k was marked parallel.
    ("function (A[N, M], B[K]) -> (O) { O[] = +(A[i, i - j] * B[k]); }", [(50, 1), (200000,)]),
    ("function (A[D0, D0, D1], B[D0]) -> (O) { O[] = +(A[i, i, i + j] + B[k]); }", [(2, 2, 1), (2,)]),
    ("function (A[M, N]) -> (O) { O[i : M] = +(A[i, j]); }", [(1, 100000)]),
])
def test_reductions_are_not_run_in_parallel_on_one_cell(text, shapes, rng):
    arrays = [rng.integers(-4, 5, size=s).astype(np.float64) for s in shapes]
    k = polytile.compile(text)
    races = parallel_loop_races(k.source(*arrays))
    assert not races, "parallel loops write one cell from several iterations:\n" + "\n".join(races)
    want = polytile.reference(text, *arrays)
    for _ in range(3):
        np.testing.assert_array_equal(k(*arrays), want)
