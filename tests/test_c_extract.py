"""The C frontend's extraction: ``#pragma scop`` regions of C files as Scops.

* Hand-written isl text for the domains, access relations and original
  schedule of PolyBench-style kernels (``tests/c_kernels``).
* Round trips: each kernel's C function is compiled as written and with its
  region replaced by code generated from the extracted Scop (original
  schedule, isl's schedule with parallel loops, and the parametric Scop);
  outputs on random inputs must be bitwise identical.  Every update of a
  cell is a read and a write in the Scop (no reduction is relaxed), so any
  legal schedule performs the same operations on each cell in the same order.
* Non-affine programs are refused with file, line, column and a caret, or
  returned ``skipped`` with ``skip_nonaffine=True``.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict, Optional

import islpy as isl
import numpy as np
import pytest

from polytile import deps as deps_mod
from polytile.codegen.c import generate_region
from polytile.errors import PolytileError
from polytile.frontends.c import CFrontendError, CScop, extract, show, splice
from polytile.frontends.c import source as source_mod
from polytile.scheduling import auto_parallel, automatic, initial

KERNELS = Path(__file__).resolve().parent / "c_kernels"
CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler")


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def only(path, **kw) -> CScop:
    regions = extract(path, **kw)
    assert len(regions) == 1, regions
    return regions[0]


def check_statement(scop, name: str, domain: str, write: str, reads: str, context: Optional[str] = None) -> None:
    """Domain, write and reads of statement ``name`` equal the hand-written isl text.

    Access texts are given without constraints; they are restricted to the
    expected domain here, as the Scop restricts them to the statement's.
    """
    st = scop.statement(name)
    dom = isl.Set(domain)
    if context is not None:
        dom = dom.intersect_params(isl.Set(context))
    assert st.domain.is_equal(dom), f"{name} domain:\n got  {st.domain}\n want {dom}"
    w = isl.Map(write).intersect_domain(dom)
    assert st.write_map().is_equal(w), f"{name} write:\n got  {st.write_map()}\n want {w}"
    r = isl.UnionMap(reads).intersect_domain(isl.UnionSet.from_set(dom)) if reads else \
        isl.UnionMap.empty(dom.get_space().params())
    assert st.reads().is_equal(r), f"{name} reads:\n got  {st.reads()}\n want {r}"
    assert st.kind == "c" and st.c_text.endswith(";") and st.loc is not None


def check_schedule(scop, text: str) -> None:
    """The Scop's original schedule map is the given 2d+1 map (on the statements' domains)."""
    want = isl.UnionMap(text).intersect_domain(scop.domain)
    got = scop.schedule.get_map()
    assert got.is_equal(want), f"schedule:\n got  {got}\n want {want}"


def compile_lib(tmp_path: Path, name: str, text: bytes) -> ctypes.CDLL:
    c_file = tmp_path / f"{name}.c"
    so = tmp_path / f"{name}.so"
    c_file.write_bytes(text)
    cmd = [CC, "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-fopenmp", "-o", str(so), str(c_file), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{r.stderr}\n--- source ---\n{text.decode()}"
    return ctypes.CDLL(str(so))


_CTYPES = {"int32": ctypes.c_int, "int64": ctypes.c_long, "uint32": ctypes.c_uint, "uint64": ctypes.c_ulong,
           "float64": ctypes.c_double, "float32": ctypes.c_float}


def call_kernel(lib: ctypes.CDLL, cs: CScop, sizes: Dict[str, int], arrays: Dict[str, np.ndarray],
                scalars: Dict[str, float], globals_: Dict[str, str]) -> Dict[str, np.ndarray]:
    """Run the region's function on copies of ``arrays``; return the arrays afterwards."""
    state = {k: v.copy() for k, v in arrays.items()}
    views = {}
    for name, accessor in globals_.items():
        getter = getattr(lib, accessor)
        getter.restype = ctypes.c_void_p
        arr = state[name]
        buf = (ctypes.c_char * arr.nbytes).from_address(getter())
        views[name] = np.frombuffer(buf, dtype=arr.dtype).reshape(arr.shape)
        views[name][...] = arr
    args, types = [], []
    for p in cs.signature:
        if p.kind == "int":
            args.append(int(sizes[p.name]))
        elif p.kind == "float":
            args.append(float(scalars.get(p.name, 1.5)))
        elif p.kind == "array":
            args.append(state[p.name].ctypes.data_as(ctypes.c_void_p))
        else:
            raise AssertionError(f"cannot pass parameter {p}")
        types.append(ctypes.c_void_p if p.kind == "array" else _CTYPES[p.dtype])
    fn = getattr(lib, cs.function)
    fn.argtypes, fn.restype = types, None
    fn(*args)
    for name, view in views.items():
        state[name] = view.copy()
    return state


def region_code(cs: CScop, how: str) -> str:
    scop = cs.scop
    if how == "parametric":
        # Scop.schedule is already a tree (the schedule data classes need concrete sizes).
        code, _ = generate_region(scop, scop.schedule)
        return code
    d = deps_mod.compute(scop)
    sched = initial(scop, d) if how == "original" else auto_parallel(automatic(scop, d, "smart"))
    code, _ = generate_region(scop, sched.tree())
    return code


# Inputs that keep the numerics tame (no NaN from sqrt of negatives, no huge quotients).
def _diag_dominant(name, shape, dtype, rng):
    a = rng.uniform(0.5, 1.5, shape)
    return a + shape[0] * np.eye(shape[0], shape[1]) if len(shape) == 2 else a


def _spd(name, shape, dtype, rng):
    if len(shape) != 2:
        return rng.uniform(0.5, 1.5, shape)
    m = rng.uniform(0.0, 1.0, shape)
    return m @ m.T + shape[0] * np.eye(shape[0])


#: kernel -> sizes (None: the file's macros), special inputs (init: floating arrays, ints: integer
#: arrays), scalar arguments, global arrays
SPECS: Dict[str, dict] = {
    "gemm.c": dict(sizes={"ni": 7, "nj": 6, "nk": 5}),
    "2mm.c": dict(sizes=None, assume_no_alias=True),
    "durbin.c": dict(sizes=None, init=lambda name, shape, dtype, rng: rng.uniform(0.0, 0.1, shape)),
    "syrk.c": dict(sizes={"n": 6, "m": 5}),
    "trmm.c": dict(sizes={"m": 6, "n": 5}),
    "lu.c": dict(sizes={"n": 7}, init=_diag_dominant),
    "cholesky.c": dict(sizes={"n": 7}, init=_spd),
    "trisolv.c": dict(sizes={"n": 8}, init=_diag_dominant),
    "jacobi-1d.c": dict(sizes={"tsteps": 4, "n": 12}),
    "jacobi-2d.c": dict(sizes={"tsteps": 3, "n": 9}),
    "seidel-2d.c": dict(sizes={"tsteps": 3, "n": 8}),
    "fdtd-2d.c": dict(sizes={"tmax": 4, "nx": 6, "ny": 7}),
    "heat-3d.c": dict(sizes=None, globals={"A": "heat_3d_A", "B": "heat_3d_B"}),
    "floyd-warshall.c": dict(sizes={"n": 8}),
    "covariance.c": dict(sizes={"m": 5, "n": 8}, scalars={"float_n": 8.0}),
    "features.c": dict(sizes={"n": 11}),
    "atax.c": dict(sizes={"m": 7, "n": 6}),
    "gesummv.c": dict(sizes={"n": 7}, scalars={"alpha": 1.5, "beta": 1.2}),
    "gramschmidt.c": dict(sizes={"m": 7, "n": 6}),
    "chained.c": dict(sizes={"n": 9}),
    "doitgen.c": dict(sizes={"nr": 3, "nq": 4, "np": 5}),
    "3mm.c": dict(sizes=None, assume_no_alias=True),
    "gemver.c": dict(sizes={"n": 7}, scalars={"alpha": 1.5, "beta": 1.2}),
    "mvt.c": dict(sizes={"n": 7}),
    "bicg.c": dict(sizes={"m": 7, "n": 6}),
    "symm.c": dict(sizes={"m": 6, "n": 7}, scalars={"alpha": 1.5, "beta": 1.2}),
    "syr2k.c": dict(sizes={"n": 6, "m": 5}, scalars={"alpha": 1.5, "beta": 1.2}),
    "ludcmp.c": dict(sizes={"n": 7}, init=_diag_dominant),
    "correlation.c": dict(sizes={"m": 5, "n": 8}, scalars={"float_n": 8.0}),
    "adi.c": dict(sizes={"tsteps": 3, "n": 9}),
    # bases 0..3 (A, C, G, U), so that some pairs sum to 3 and score
    "nussinov.c": dict(sizes={"n": 9}, ints=lambda name, shape, dtype, rng: rng.integers(0, 4, shape)),
    "deriche.c": dict(sizes={"w": 7, "h": 9}, scalars={"alpha": 0.25}),
    "gemm-split.c": dict(sizes={"ni": 7, "nj": 6, "nk": 5}, scalars={"alpha": 1.5, "beta": 1.2}),
    "2mm-init.c": dict(sizes={"ni": 6, "nj": 5, "nk": 7, "nl": 4}, scalars={"alpha": 1.5, "beta": 1.2}),
    "syrk-lower.c": dict(sizes={"n": 6, "m": 5}, scalars={"alpha": 1.5, "beta": 1.2}),
    "lu-temp.c": dict(sizes={"n": 7}, init=_diag_dominant),
}


def test_every_kernel_has_a_spec():
    assert sorted(p.name for p in KERNELS.glob("*.c")) == sorted(SPECS)


def _sizes(path: Path, spec: dict) -> Dict[str, int]:
    if spec["sizes"] is not None:
        return dict(spec["sizes"])
    return dict(extract(path, assume_no_alias=spec.get("assume_no_alias", False))[0].macros)


def _inputs(cs: CScop, spec: dict, rng) -> Dict[str, np.ndarray]:
    init: Callable = spec.get("init") or (lambda name, shape, dtype, rng: rng.uniform(0.5, 1.5, shape))
    ints: Callable = spec.get("ints") or (lambda name, shape, dtype, rng: rng.integers(1, 50, shape))
    out = {}
    for a in cs.scop.arrays:
        if not a.shape:
            continue  # a scalar of the function, not an argument
        if np.dtype(a.dtype).kind in "iu":
            out[a.name] = np.asarray(ints(a.name, a.shape, a.dtype, rng)).astype(a.dtype)
        else:
            out[a.name] = np.asarray(init(a.name, a.shape, a.dtype, rng), dtype=a.dtype)
    return out


# ---------------------------------------------------------------------------
# Round trips: original C vs. the region regenerated from the Scop
# ---------------------------------------------------------------------------


def _round_trip_cases():
    for kernel in sorted(SPECS):
        for how in ("original", "isl", "parametric"):
            yield pytest.param(kernel, how, id=f"{kernel}-{how}")


@needs_cc
@pytest.mark.parametrize("kernel, how", list(_round_trip_cases()))
def test_round_trip_identical(kernel, how, tmp_path, rng):
    path = KERNELS / kernel
    spec = SPECS[kernel]
    sizes = _sizes(path, spec)
    alias = spec.get("assume_no_alias", False)
    concrete = extract(path, params=sizes, assume_no_alias=alias)
    regions = concrete if how != "parametric" else extract(path, assume_no_alias=alias)
    for cs in regions:
        assert not cs.skipped
        if how == "parametric":
            assert cs.params and not cs.fixed
        else:
            assert not cs.params and cs.scop.domain.get_space().dim(isl.dim_type.param) == 0
    replaced = splice(path.read_bytes(), [(cs, cs.wrap(region_code(cs, how))) for cs in regions])
    original_lib = compile_lib(tmp_path, "original", path.read_bytes())
    new_lib = compile_lib(tmp_path, f"regenerated_{how}", replaced)
    # Shapes from the concrete Scop of the first region (every region of a file shares its arrays).
    arrays = {}
    for cs in concrete:
        arrays.update({k: v for k, v in _inputs(cs, spec, rng).items() if k not in arrays})
    want = call_kernel(original_lib, concrete[0], sizes, arrays, spec.get("scalars", {}), spec.get("globals", {}))
    got = call_kernel(new_lib, concrete[0], sizes, arrays, spec.get("scalars", {}), spec.get("globals", {}))
    for name in arrays:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{kernel} ({how}): array {name} differs")
    # The kernel did something: some array changed.
    assert any(not np.array_equal(want[n], arrays[n]) for n in arrays)


# ---------------------------------------------------------------------------
# Domains, accesses and original schedules against hand-written isl text
# ---------------------------------------------------------------------------


def test_gemm_polyhedral_model():
    cs = only(KERNELS / "gemm.c", params={"ni": 7, "nj": 6, "nk": 5})
    s = cs.scop
    check_statement(s, "S0", "{ S0[i, j] : 0 <= i < 7 and 0 <= j < 6 }", "{ S0[i, j] -> C[i, j] }",
                    "{ S0[i, j] -> C[i, j] }")
    check_statement(s, "S1", "{ S1[i, k, j] : 0 <= i < 7 and 0 <= k < 5 and 0 <= j < 6 }",
                    "{ S1[i, k, j] -> C[i, j] }",
                    "{ S1[i, k, j] -> C[i, j]; S1[i, k, j] -> A[i, k]; S1[i, k, j] -> B[k, j] }")
    check_schedule(s, "{ S0[i, j] -> [0, i, 0, j, 0, 0, 0]; S1[i, k, j] -> [0, i, 1, k, 0, j, 0] }")
    assert [(a.name, a.shape, a.dtype, a.kind) for a in s.arrays] == [
        ("C", (7, 6), "float64", "inout"), ("A", (7, 5), "float64", "inout"), ("B", (5, 6), "float64", "inout")]
    assert s.statement("S1").c_text == "C[i][j] += alpha * A[i][k] * B[k][j];"
    assert cs.iterators == ("i", "j", "k") and cs.fixed == {"ni": 7, "nj": 6, "nk": 5}


def test_2mm_macros_stay_parameters():
    """``#define NI 12`` is a parameter named NI (the file keeps compiling against it)."""
    cs = only(KERNELS / "2mm.c", assume_no_alias=True)
    s = cs.scop
    assert cs.params == ("NI", "NJ", "NK", "NL")
    assert cs.macros == {"NI": 12, "NJ": 10, "NK": 14, "NL": 9}
    ctx = "[NI, NJ, NK, NL] -> { : NI >= 1 and NJ >= 1 and NK >= 1 and NL >= 1 }"
    assert s.context.is_equal(isl.Set(ctx))
    p = "[NI, NJ, NK, NL] -> "
    check_statement(s, "S0", p + "{ S0[i, j] : 0 <= i < NI and 0 <= j < NJ }", p + "{ S0[i, j] -> tmp[i, j] }", "",
                    ctx)
    check_statement(s, "S1", p + "{ S1[i, j, k] : 0 <= i < NI and 0 <= j < NJ and 0 <= k < NK }",
                    p + "{ S1[i, j, k] -> tmp[i, j] }",
                    p + "{ S1[i, j, k] -> tmp[i, j]; S1[i, j, k] -> A[i, k]; S1[i, j, k] -> B[k, j] }", ctx)
    check_statement(s, "S2", p + "{ S2[i, j] : 0 <= i < NI and 0 <= j < NL }", p + "{ S2[i, j] -> D[i, j] }",
                    p + "{ S2[i, j] -> D[i, j] }", ctx)
    check_statement(s, "S3", p + "{ S3[i, j, k] : 0 <= i < NI and 0 <= j < NL and 0 <= k < NJ }",
                    p + "{ S3[i, j, k] -> D[i, j] }",
                    p + "{ S3[i, j, k] -> D[i, j]; S3[i, j, k] -> tmp[i, k]; S3[i, j, k] -> C[k, j] }", ctx)
    check_schedule(s, p + "{ S0[i, j] -> [0, i, 0, j, 0, 0, 0]; S1[i, j, k] -> [0, i, 0, j, 1, k, 0]; "
                          "S2[i, j] -> [1, i, 0, j, 0, 0, 0]; S3[i, j, k] -> [1, i, 0, j, 1, k, 0] }")
    # Fixing the macros makes the Scop concrete, with the declared shapes.
    conc = only(KERNELS / "2mm.c", assume_no_alias=True, params=cs.macros)
    assert conc.params == () and conc.scop.array("tmp").shape == (12, 10) and conc.scop.array("C").shape == (10, 9)


def test_derived_and_negative_macros(tmp_path):
    p = write(tmp_path, """#define N 8
#define N2 (N * 2)
#define OFF (-1)
#if N > 4
#define BIG 1
#endif
void f(double x[restrict N2]) {
#pragma scop
  for (int i = 0; i < N2 + OFF; i++)
    x[i] = BIG;
#pragma endscop
}
""")
    cs = only(p)
    assert cs.params == ("N", "OFF") and cs.macros == {"N": 8, "OFF": -1, "BIG": 1}
    assert cs.scop.context.is_equal(isl.Set("[N, OFF] -> { : N >= 1 }"))  # OFF's own value is -1: no assumption
    assert cs.scop.statement("S0").domain.is_equal(
        isl.Set("[N, OFF] -> { S0[i] : 0 <= i < 2N + OFF and N >= 1 }"))
    assert cs.scop.statement("S0").c_text == "x[i] = BIG;"  # the #if saw N: BIG is defined
    conc = only(p, params=cs.macros)
    assert conc.scop.statement("S0").domain.is_equal(isl.Set("{ S0[i] : 0 <= i < 15 }"))
    assert conc.scop.array("x").shape == (16,)


def test_syrk_triangular():
    s = only(KERNELS / "syrk.c", params={"n": 6, "m": 5}).scop
    check_statement(s, "S0", "{ S0[i, j] : 0 <= i < 6 and 0 <= j <= i }", "{ S0[i, j] -> C[i, j] }",
                    "{ S0[i, j] -> C[i, j] }")
    check_statement(s, "S1", "{ S1[i, k, j] : 0 <= i < 6 and 0 <= k < 5 and 0 <= j <= i }",
                    "{ S1[i, k, j] -> C[i, j] }",
                    "{ S1[i, k, j] -> C[i, j]; S1[i, k, j] -> A[i, k]; S1[i, k, j] -> A[j, k] }")
    check_schedule(s, "{ S0[i, j] -> [0, i, 0, j, 0, 0, 0]; S1[i, k, j] -> [0, i, 1, k, 0, j, 0] }")


def test_trmm():
    s = only(KERNELS / "trmm.c", params={"m": 6, "n": 5}).scop
    check_statement(s, "S0", "{ S0[i, j, k] : 0 <= i < 6 and 0 <= j < 5 and i < k < 6 }",
                    "{ S0[i, j, k] -> B[i, j] }",
                    "{ S0[i, j, k] -> B[i, j]; S0[i, j, k] -> A[k, i]; S0[i, j, k] -> B[k, j] }")
    check_statement(s, "S1", "{ S1[i, j] : 0 <= i < 6 and 0 <= j < 5 }", "{ S1[i, j] -> B[i, j] }",
                    "{ S1[i, j] -> B[i, j] }")
    check_schedule(s, "{ S0[i, j, k] -> [0, i, 0, j, 0, k, 0]; S1[i, j] -> [0, i, 0, j, 1, 0, 0] }")


def test_lu():
    s = only(KERNELS / "lu.c", params={"n": 7}).scop
    rd = "{ %s -> A[i, j]; %s -> A[i, k]; %s -> A[k, j] }"
    check_statement(s, "S0", "{ S0[i, j, k] : 0 <= i < 7 and 0 <= j < i and 0 <= k < j }",
                    "{ S0[i, j, k] -> A[i, j] }", rd % (("S0[i, j, k]",) * 3))
    check_statement(s, "S1", "{ S1[i, j] : 0 <= i < 7 and 0 <= j < i }", "{ S1[i, j] -> A[i, j] }",
                    "{ S1[i, j] -> A[i, j]; S1[i, j] -> A[j, j] }")
    check_statement(s, "S2", "{ S2[i, j, k] : 0 <= i < 7 and i <= j < 7 and 0 <= k < i }",
                    "{ S2[i, j, k] -> A[i, j] }", rd % (("S2[i, j, k]",) * 3))
    check_schedule(s, "{ S0[i, j, k] -> [0, i, 0, j, 0, k, 0]; S1[i, j] -> [0, i, 0, j, 1, 0, 0]; "
                      "S2[i, j, k] -> [0, i, 1, j, 0, k, 0] }")


def test_cholesky_with_sqrt_through_the_preprocessor():
    cs = only(KERNELS / "cholesky.c", params={"n": 7})
    s = cs.scop
    check_statement(s, "S0", "{ S0[i, j, k] : 0 <= i < 7 and 0 <= j < i and 0 <= k < j }",
                    "{ S0[i, j, k] -> A[i, j] }",
                    "{ S0[i, j, k] -> A[i, j]; S0[i, j, k] -> A[i, k]; S0[i, j, k] -> A[j, k] }")
    check_statement(s, "S1", "{ S1[i, j] : 0 <= i < 7 and 0 <= j < i }", "{ S1[i, j] -> A[i, j] }",
                    "{ S1[i, j] -> A[i, j]; S1[i, j] -> A[j, j] }")
    check_statement(s, "S2", "{ S2[i, k] : 0 <= i < 7 and 0 <= k < i }", "{ S2[i, k] -> A[i, i] }",
                    "{ S2[i, k] -> A[i, i]; S2[i, k] -> A[i, k] }")
    check_statement(s, "S3", "{ S3[i] : 0 <= i < 7 }", "{ S3[i] -> A[i, i] }", "{ S3[i] -> A[i, i] }")
    assert s.statement("S3").c_text == "A[i][i] = sqrt(A[i][i]);"
    check_schedule(s, "{ S0[i, j, k] -> [0, i, 0, j, 0, k, 0]; S1[i, j] -> [0, i, 0, j, 1, 0, 0]; "
                      "S2[i, k] -> [0, i, 1, k, 0, 0, 0]; S3[i] -> [0, i, 2, 0, 0, 0, 0] }")
    # Lines are the original file's, although cpp ran (#include <math.h>).
    assert s.statement("S3").loc.line == 18 and cs.lines == (7, 20)


def test_trisolv_decreasing_loop_and_scalar_temporary():
    cs = only(KERNELS / "trisolv.c", params={"n": 8})
    s = cs.scop
    check_statement(s, "S0", "{ S0[i] : 0 <= i < 8 }", "{ S0[i] -> s[] }", "{ S0[i] -> b[i] }")
    check_statement(s, "S1", "{ S1[i, j] : 0 <= i < 8 and i < j < 8 }", "{ S1[i, j] -> s[] }",
                    "{ S1[i, j] -> s[]; S1[i, j] -> U[i, j]; S1[i, j] -> x[j] }")
    check_statement(s, "S2", "{ S2[i] : 0 <= i < 8 }", "{ S2[i] -> x[i] }", "{ S2[i] -> s[]; S2[i] -> U[i, i] }")
    # i runs downwards: its time coordinate is -i.
    check_schedule(s, "{ S0[i] -> [0, -i, 0, 0, 0]; S1[i, j] -> [0, -i, 1, j, 0]; S2[i] -> [0, -i, 2, 0, 0] }")
    assert cs.declarations == ("double s;",) and cs.scalars == ("s",)
    assert s.array("s").shape == () and s.array("x").shape == (8,)
    assert s.statement("S0").c_text == "s = b[i];"


def test_gramschmidt_triangular_loop_and_scalar():
    s = only(KERNELS / "gramschmidt.c", params={"m": 7, "n": 6}).scop
    check_statement(s, "S0", "{ S0[k] : 0 <= k < 6 }", "{ S0[k] -> nrm[] }", "{ }")
    check_statement(s, "S1", "{ S1[k, i] : 0 <= k < 6 and 0 <= i < 7 }", "{ S1[k, i] -> nrm[] }",
                    "{ S1[k, i] -> nrm[]; S1[k, i] -> A[i, k] }")
    check_statement(s, "S2", "{ S2[k] : 0 <= k < 6 }", "{ S2[k] -> R[k, k] }", "{ S2[k] -> nrm[] }")
    check_statement(s, "S4", "{ S4[k, j] : 0 <= k < 6 and k < j < 6 }", "{ S4[k, j] -> R[k, j] }", "{ }")
    check_statement(s, "S5", "{ S5[k, j, i] : 0 <= k < 6 and k < j < 6 and 0 <= i < 7 }", "{ S5[k, j, i] -> R[k, j] }",
                    "{ S5[k, j, i] -> R[k, j]; S5[k, j, i] -> Q[i, k]; S5[k, j, i] -> A[i, j] }")
    check_statement(s, "S6", "{ S6[k, j, i] : 0 <= k < 6 and k < j < 6 and 0 <= i < 7 }", "{ S6[k, j, i] -> A[i, j] }",
                    "{ S6[k, j, i] -> A[i, j]; S6[k, j, i] -> Q[i, k]; S6[k, j, i] -> R[k, j] }")


def test_atax_two_nests_in_one_row_loop():
    s = only(KERNELS / "atax.c", params={"m": 7, "n": 6}).scop
    check_statement(s, "S0", "{ S0[i] : 0 <= i < 6 }", "{ S0[i] -> y[i] }", "{ }")
    check_statement(s, "S2", "{ S2[i, j] : 0 <= i < 7 and 0 <= j < 6 }", "{ S2[i, j] -> tmp[i] }",
                    "{ S2[i, j] -> tmp[i]; S2[i, j] -> A[i, j]; S2[i, j] -> x[j] }")
    check_statement(s, "S3", "{ S3[i, j] : 0 <= i < 7 and 0 <= j < 6 }", "{ S3[i, j] -> y[j] }",
                    "{ S3[i, j] -> y[j]; S3[i, j] -> A[i, j]; S3[i, j] -> tmp[i] }")
    check_schedule(s, "{ S0[i] -> [0, i, 0, 0, 0]; S1[i] -> [1, i, 0, 0, 0]; S2[i, j] -> [1, i, 1, j, 0]; "
                      "S3[i, j] -> [1, i, 2, j, 0] }")


def test_jacobi_1d_time_loop():
    s = only(KERNELS / "jacobi-1d.c", params={"tsteps": 4, "n": 12}).scop
    check_statement(s, "S0", "{ S0[t, i] : 0 <= t < 4 and 1 <= i <= 10 }", "{ S0[t, i] -> B[i] }",
                    "{ S0[t, i] -> A[i - 1]; S0[t, i] -> A[i]; S0[t, i] -> A[i + 1] }")
    check_statement(s, "S1", "{ S1[t, i] : 0 <= t < 4 and 1 <= i <= 10 }", "{ S1[t, i] -> A[i] }",
                    "{ S1[t, i] -> B[i - 1]; S1[t, i] -> B[i]; S1[t, i] -> B[i + 1] }")
    check_schedule(s, "{ S0[t, i] -> [0, t, 0, i, 0]; S1[t, i] -> [0, t, 1, i, 0] }")


def test_jacobi_2d_pointer_to_vla():
    s = only(KERNELS / "jacobi-2d.c", params={"tsteps": 3, "n": 9}).scop
    dom = "{ %s[t, i, j] : 0 <= t < 3 and 1 <= i <= 7 and 1 <= j <= 7 }"
    five = "{ %s -> %s[i, j]; %s -> %s[i, j - 1]; %s -> %s[i, j + 1]; %s -> %s[i + 1, j]; %s -> %s[i - 1, j] }"
    check_statement(s, "S0", dom % "S0", "{ S0[t, i, j] -> B[i, j] }", five % (("S0[t, i, j]", "A") * 5))
    check_statement(s, "S1", dom % "S1", "{ S1[t, i, j] -> A[i, j] }", five % (("S1[t, i, j]", "B") * 5))
    check_schedule(s, "{ S0[t, i, j] -> [0, t, 0, i, 0, j, 0]; S1[t, i, j] -> [0, t, 1, i, 0, j, 0] }")
    # double (*A)[n]: the row length comes from the type, the row count from the accesses.
    assert s.array("A").shape == (9, 9)


def test_seidel_2d_in_place():
    s = only(KERNELS / "seidel-2d.c", params={"tsteps": 3, "n": 8}).scop
    nine = "; ".join(f"S0[t, i, j] -> A[i + {a}, j + {b}]" for a in (-1, 0, 1) for b in (-1, 0, 1))
    check_statement(s, "S0", "{ S0[t, i, j] : 0 <= t < 3 and 1 <= i <= 6 and 1 <= j <= 6 }",
                    "{ S0[t, i, j] -> A[i, j] }", "{ " + nine + " }")
    check_schedule(s, "{ S0[t, i, j] -> [0, t, 0, i, 0, j, 0] }")


def test_fdtd_2d_four_statements_per_time_step():
    s = only(KERNELS / "fdtd-2d.c", params={"tmax": 4, "nx": 6, "ny": 7}).scop
    check_statement(s, "S0", "{ S0[t, j] : 0 <= t < 4 and 0 <= j < 7 }", "{ S0[t, j] -> ey[0, j] }",
                    "{ S0[t, j] -> fict[t] }")
    check_statement(s, "S1", "{ S1[t, i, j] : 0 <= t < 4 and 1 <= i < 6 and 0 <= j < 7 }",
                    "{ S1[t, i, j] -> ey[i, j] }",
                    "{ S1[t, i, j] -> ey[i, j]; S1[t, i, j] -> hz[i, j]; S1[t, i, j] -> hz[i - 1, j] }")
    check_statement(s, "S2", "{ S2[t, i, j] : 0 <= t < 4 and 0 <= i < 6 and 1 <= j < 7 }",
                    "{ S2[t, i, j] -> ex[i, j] }",
                    "{ S2[t, i, j] -> ex[i, j]; S2[t, i, j] -> hz[i, j]; S2[t, i, j] -> hz[i, j - 1] }")
    check_statement(s, "S3", "{ S3[t, i, j] : 0 <= t < 4 and 0 <= i < 5 and 0 <= j < 6 }",
                    "{ S3[t, i, j] -> hz[i, j] }",
                    "{ S3[t, i, j] -> hz[i, j]; S3[t, i, j] -> ex[i, j + 1]; S3[t, i, j] -> ex[i, j]; "
                    "S3[t, i, j] -> ey[i + 1, j]; S3[t, i, j] -> ey[i, j] }")
    check_schedule(s, "{ S0[t, j] -> [0, t, 0, j, 0, 0, 0]; S1[t, i, j] -> [0, t, 1, i, 0, j, 0]; "
                      "S2[t, i, j] -> [0, t, 2, i, 0, j, 0]; S3[t, i, j] -> [0, t, 3, i, 0, j, 0] }")
    assert s.array("fict").shape == (4,)  # double *fict: extent from the accesses


def test_floyd_warshall_int32():
    s = only(KERNELS / "floyd-warshall.c", params={"n": 8}).scop
    check_statement(s, "S0", "{ S0[k, i, j] : 0 <= k < 8 and 0 <= i < 8 and 0 <= j < 8 }",
                    "{ S0[k, i, j] -> path[i, j] }",
                    "{ S0[k, i, j] -> path[i, j]; S0[k, i, j] -> path[i, k]; S0[k, i, j] -> path[k, j] }")
    check_schedule(s, "{ S0[k, i, j] -> [0, k, 0, i, 0, j, 0] }")
    assert s.array("path").dtype == "int32"


def test_covariance_statements_in_order():
    s = only(KERNELS / "covariance.c", params={"m": 5, "n": 8}).scop
    assert len(s.statements) == 12
    check_statement(s, "S1", "{ S1[j, i] : 0 <= j < 5 and 0 <= i < 8 }", "{ S1[j, i] -> mean[j] }",
                    "{ S1[j, i] -> mean[j]; S1[j, i] -> data[i, j] }")
    check_statement(s, "S4", "{ S4[j, i] : 0 <= j < 5 and 0 <= i < 8 }", "{ S4[j, i] -> stddev[j] }",
                    "{ S4[j, i] -> stddev[j]; S4[j, i] -> data[i, j]; S4[j, i] -> mean[j] }")
    check_statement(s, "S6", "{ S6[j] : 0 <= j < 5 }", "{ S6[j] -> stddev[j] }", "{ S6[j] -> stddev[j] }")
    check_statement(s, "S8", "{ S8[i, j] : 0 <= i < 8 and 0 <= j < 5 }", "{ S8[i, j] -> data[i, j] }",
                    "{ S8[i, j] -> data[i, j]; S8[i, j] -> mean[j] }")
    check_statement(s, "S10", "{ S10[i, j, k] : 0 <= i < 5 and i <= j < 5 and 0 <= k < 8 }",
                    "{ S10[i, j, k] -> cov[i, j] }",
                    "{ S10[i, j, k] -> cov[i, j]; S10[i, j, k] -> data[k, i]; S10[i, j, k] -> data[k, j]; "
                    "S10[i, j, k] -> stddev[i] }")
    check_statement(s, "S11", "{ S11[i, j] : 0 <= i < 5 and i <= j < 5 }", "{ S11[i, j] -> cov[j, i] }",
                    "{ S11[i, j] -> cov[i, j] }")
    check_schedule(s, "{ S0[j] -> [0, j, 0, 0, 0, 0, 0]; S1[j, i] -> [0, j, 1, i, 0, 0, 0]; "
                      "S2[j] -> [0, j, 2, 0, 0, 0, 0]; S3[j] -> [1, j, 0, 0, 0, 0, 0]; "
                      "S4[j, i] -> [1, j, 1, i, 0, 0, 0]; S5[j] -> [1, j, 2, 0, 0, 0, 0]; "
                      "S6[j] -> [1, j, 3, 0, 0, 0, 0]; S7[j] -> [1, j, 4, 0, 0, 0, 0]; "
                      "S8[i, j] -> [2, i, 0, j, 0, 0, 0]; S9[i, j] -> [3, i, 0, j, 0, 0, 0]; "
                      "S10[i, j, k] -> [3, i, 0, j, 1, k, 0]; S11[i, j] -> [3, i, 0, j, 2, 0, 0] }")
    assert s.statement("S6").c_text == "stddev[j] = sqrt(stddev[j]);"


def test_features_min_max_stride_division_if_else():
    first, second = extract(KERNELS / "features.c", params={"n": 11})
    s = first.scop
    check_statement(s, "S0", "{ S0[i, j] : exists (e : i = 2e) and 0 <= i < 11 and j >= 0 and j >= i - 2 "
                             "and j <= i + 1 and j <= 10 }", "{ S0[i, j] -> M[i, j] }", "{ S0[i, j] -> x[j] }")
    # i = 10, 7, 4, 1; the 'then' branch needs i even and i > 11/2 = 5.
    check_statement(s, "S1", "{ S1[10] }", "{ S1[i] -> y[i] }", "{ S1[i] -> x[floor((i - 1)/2)] }")
    check_statement(s, "S2", "{ S2[i] : i = 1 or i = 4 or i = 7 }", "{ S2[i] -> y[i] }", "{ S2[i] -> x[i] }")
    check_statement(s, "S3", "{ S3[i] : 0 <= i < 11 }", "{ S3[i] -> acc[] }",
                    "{ S3[i] -> acc[]; S3[i] -> x[i]; S3[i] -> y[i] }")
    check_statement(s, "S4", "{ S4[i] : 2 <= i < 9 }", "{ S4[i] -> y[i] }", "{ S4[i] -> acc[] }")
    check_schedule(s, "{ S0[i, j] -> [0, i, 0, j, 0]; S1[i] -> [1, -i, 0, 0, 0]; S2[i] -> [1, -i, 1, 0, 0]; "
                      "S3[i] -> [2, i, 0, 0, 0]; S4[i] -> [2, i, 1, 0, 0] }")
    # The second region of the same function: floor((n + 1)/2) iterations.
    check_statement(second.scop, "S0", "{ S0[i] : 0 <= i < 6 }", "{ S0[i] -> x[2i] }", "{ S0[i] -> x[2i] }")
    assert second.scop.name == "kernel_features_1" and second.lines == (27, 30)


def test_chained_assignments_are_one_statement_each(tmp_path):
    """``a1 = a5 = k;`` (PolyBench's deriche) is ``a5 = k;`` then ``a1 = a5;``: the innermost assignment
    first, each outer one reading the target just written (C's value of ``a5 = k``, in a5's type)."""
    p = write(tmp_path, """void f(int n, double k, double A[restrict n], double B[restrict n], int I[restrict n]) {
  double a1, a5, c1, c2;
#pragma scop
  a1 = a5 = k;
  c1 = c2 = 1;
  for (int i = 0; i < n; i++)
    A[i] = B[n - 1 - i] = I[i] = a1 * A[i] + c2;
  c1 += a5 = A[0];
  double t = c2 = c1;
#pragma endscop
}
""")
    s = only(p, params={"n": 5}).scop
    assert [st.c_text for st in s.statements] == [
        "a5 = k;", "a1 = a5;", "c2 = 1;", "c1 = c2;", "I[i] = a1 * A[i] + c2;", "B[n - 1 - i] = I[i];",
        "A[i] = B[n - 1 - i];", "a5 = A[0];", "c1 += a5;", "c2 = c1;", "t = c2;"]
    check_statement(s, "S0", "{ S0[] }", "{ S0[] -> a5[] }", "")
    check_statement(s, "S1", "{ S1[] }", "{ S1[] -> a1[] }", "{ S1[] -> a5[] }")
    check_statement(s, "S3", "{ S3[] }", "{ S3[] -> c1[] }", "{ S3[] -> c2[] }")
    dom = "{ %s[i] : 0 <= i < 5 }"
    check_statement(s, "S4", dom % "S4", "{ S4[i] -> I[i] }", "{ S4[i] -> a1[]; S4[i] -> A[i]; S4[i] -> c2[] }")
    check_statement(s, "S5", dom % "S5", "{ S5[i] -> B[4 - i] }", "{ S5[i] -> I[i] }")
    check_statement(s, "S6", dom % "S6", "{ S6[i] -> A[i] }", "{ S6[i] -> B[4 - i] }")
    check_statement(s, "S7", "{ S7[] }", "{ S7[] -> a5[] }", "{ S7[] -> A[0] }")
    check_statement(s, "S8", "{ S8[] }", "{ S8[] -> c1[] }", "{ S8[] -> c1[]; S8[] -> a5[] }")
    check_statement(s, "S10", "{ S10[] }", "{ S10[] -> t[] }", "{ S10[] -> c2[] }")
    check_schedule(s, "{ S0[] -> [0, 0, 0]; S1[] -> [1, 0, 0]; S2[] -> [2, 0, 0]; S3[] -> [3, 0, 0]; "
                      "S4[i] -> [4, i, 0]; S5[i] -> [4, i, 1]; S6[i] -> [4, i, 2]; S7[] -> [5, 0, 0]; "
                      "S8[] -> [6, 0, 0]; S9[] -> [7, 0, 0]; S10[] -> [8, 0, 0] }")


def test_heat_3d_globals_and_macros():
    cs = only(KERNELS / "heat-3d.c", params={"N": 10, "TSTEPS": 4})
    s = cs.scop
    assert [(a.name, a.shape) for a in s.arrays] == [("B", (10, 10, 10)), ("A", (10, 10, 10))]
    dom = "{ %s[t, i, j, k] : 1 <= t <= 4 and 1 <= i <= 8 and 1 <= j <= 8 and 1 <= k <= 8 }"
    seven = "{ " + "; ".join(f"%s[t, i, j, k] -> %s[{c}]" for c in (
        "i + 1, j, k", "i - 1, j, k", "i, j + 1, k", "i, j - 1, k", "i, j, k + 1", "i, j, k - 1", "i, j, k")) + " }"
    check_statement(s, "S0", dom % "S0", "{ S0[t, i, j, k] -> B[i, j, k] }", seven % (("S0", "A") * 7))
    check_statement(s, "S1", dom % "S1", "{ S1[t, i, j, k] -> A[i, j, k] }", seven % (("S1", "B") * 7))
    check_schedule(s, "{ S0[t, i, j, k] -> [0, t, 0, i, 0, j, 0, k, 0]; S1[t, i, j, k] -> [0, t, 1, i, 0, j, 0, k, 0] }")
    assert cs.macros == {"N": 10, "TSTEPS": 4}


# ---------------------------------------------------------------------------
# Parameters, context, locations, byte ranges, function mode
# ---------------------------------------------------------------------------


def write(tmp_path: Path, text: str, name: str = "k.c") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_parametric_context_and_if_guards(tmp_path):
    p = write(tmp_path, """
void f(int n, int m, double *restrict x) {
  int i;
  if (n > 3 && m <= n) {
#pragma scop
    for (i = 0; i < n; i++)
      x[i] = x[i] + m;
#pragma endscop
  }
}
""")
    cs = only(p)
    assert cs.params == ("n",)  # m is read only inside the statement's C text
    assert cs.scop.context.is_equal(isl.Set("[n] -> { : n >= 4 }"))
    assert cs.scop.statement("S0").domain.is_equal(isl.Set("[n] -> { S0[i] : 0 <= i < n and n >= 4 }"))
    assert cs.scop.array("x").shape == (-1,)  # symbolic extent
    # Partially fixed: n given, the Scop is concrete.
    cs2 = only(p, params={"n": 5})
    assert cs2.params == () and cs2.scop.statement("S0").domain.is_equal(isl.Set("{ S0[i] : 0 <= i < 5 }"))
    assert cs2.scop.array("x").shape == (5,)


def test_guard_on_a_variable_changed_before_the_region_is_not_assumed(tmp_path):
    p = write(tmp_path, """
void f(int n, double *restrict x) {
  if (n > 3) {
    n = n - 5;
#pragma scop
    for (int i = 0; i < n; i++)
      x[i] = 0.0;
#pragma endscop
  }
}
""")
    assert only(p).scop.context.is_equal(isl.Set("[n] -> { : n >= 1 }"))


def test_byte_range_is_the_pragma_lines(tmp_path):
    text = "void f(int n, double *restrict x) {\n  /* über */\n#pragma scop\n  for (int i = 0; i < n; i++)\n" \
           "    x[i] = 1.0;\n#pragma endscop\n  x[0] = 2.0;\n}\n"
    p = write(tmp_path, text)
    cs = only(p)
    raw = p.read_bytes()
    assert raw[cs.start:cs.end] == b"#pragma scop\n  for (int i = 0; i < n; i++)\n    x[i] = 1.0;\n#pragma endscop\n"
    assert cs.lines == (3, 6)
    # Splicing with skipped or no replacements leaves the file byte-identical.
    assert splice(raw, []) == raw


def test_function_mode_whole_body(tmp_path):
    text = """double g(double v) { return v; }
int kernel(int n, double A[restrict n][n], double *restrict y)
{
  int i, j;
  double t;
  for (i = 0; i < n; i++) {
    t = 0.0;
    for (j = 0; j <= i; j++)
      t += A[i][j] * y[j];
    A[i][i] = t;
  }
  return 0;
}
"""
    p = write(tmp_path, text)
    assert extract(p) == []  # no pragmas
    cs = only(p, function="kernel", params={"n": 6})
    raw = p.read_bytes()
    region = raw[cs.start:cs.end].decode()
    assert region.startswith("  for (i = 0;") and region.rstrip().endswith("}") and "return" not in region
    assert [s.c_text for s in cs.scop.statements] == ["t = 0.0;", "t += A[i][j] * y[j];", "A[i][i] = t;"]
    with pytest.raises(CFrontendError, match="no function named 'nope'.*kernel"):
        extract(p, function="nope")


@needs_cc
def test_function_mode_round_trip(tmp_path, rng):
    text = """void kernel(int n, double A[restrict n][n], double *restrict y)
{
  int i, j;
  double t;
  for (i = 0; i < n; i++) {
    t = 0.0;
    for (j = 0; j <= i; j++)
      t += A[i][j] * y[j];
    y[i] = t / A[i][i];
  }
}
"""
    p = write(tmp_path, text)
    cs = only(p, function="kernel", params={"n": 6})
    new = splice(p.read_bytes(), [(cs, cs.wrap(region_code(cs, "original")))])
    arrays = {"A": rng.uniform(1, 2, (6, 6)), "y": rng.uniform(1, 2, 6)}
    want = call_kernel(compile_lib(tmp_path, "o", p.read_bytes()), cs, {"n": 6}, arrays, {}, {})
    got = call_kernel(compile_lib(tmp_path, "n", new), cs, {"n": 6}, arrays, {}, {})
    np.testing.assert_array_equal(got["y"], want["y"])


def test_comments_keep_columns_without_the_preprocessor(tmp_path, monkeypatch):
    """A file with no directive is not preprocessed: comments are blanked in place."""
    monkeypatch.setattr(source_mod, "_run_cpp", lambda *a, **k: pytest.fail("cpp should not run"))
    p = write(tmp_path, """void f(int n, double *restrict x, int *restrict idx) {
#pragma scop
  /* a comment */ for (int i = 0; i < n; i++) // another
    /* x */ x[idx[i]] = 1.0;
#pragma endscop
}
""")
    with pytest.raises(CFrontendError) as e:
        extract(p)
    assert (e.value.line, e.value.col) == (4, 15)  # the subscript idx[i], original column


def test_columns_map_back_through_the_preprocessor(tmp_path):
    """cpp collapses spaces and expands macros; columns still point into the original line."""
    p = write(tmp_path, """#define SCALE(v) (2.0 *   (v))
#define N 10
void f(double x[N], double *restrict y, int *restrict idx) {
#pragma scop
  for (int i = 0; i < N; i++)
    y[i]   =   SCALE(x[i]) + x[idx[i]];
#pragma endscop
}
""")
    with pytest.raises(CFrontendError) as e:
        extract(p)
    err = e.value
    assert (err.line, err.col) == (6, 32) and "idx" in str(err)  # 'idx' in the original line
    assert str(err).splitlines()[1].strip() == "y[i]   =   SCALE(x[i]) + x[idx[i]];"
    assert str(err).splitlines()[2].index("^") == 2 + 31


def test_iterators_with_reserved_names_are_renamed(tmp_path, rng):
    """``c0`` is a generated loop counter and ``floor`` an isl keyword: both get fresh names."""
    text = """void f(int n, double A[restrict n][n]) {
  int c0, floor;
#pragma scop
  for (c0 = 0; c0 < n; c0++)
    for (floor = 0; floor < n; floor++)
      A[c0][floor] = A[c0][floor] * 2.0 + c0 - floor;
#pragma endscop
}
"""
    p = write(tmp_path, text)
    cs = only(p, params={"n": 4})
    st = cs.scop.statement("S0")
    assert "c0" not in st.iters and "floor" not in st.iters and len(set(st.iters)) == 2
    assert cs.iterators == ("c0", "floor")
    for it in st.iters:
        assert it in st.c_text
    if CC is not None:
        new = splice(p.read_bytes(), [(cs, cs.wrap(region_code(cs, "original")))])
        arrays = {"A": rng.uniform(0, 1, (4, 4))}
        want = call_kernel(compile_lib(tmp_path, "o", p.read_bytes()), cs, {"n": 4}, arrays, {}, {})
        got = call_kernel(compile_lib(tmp_path, "n", new), cs, {"n": 4}, arrays, {}, {})
        np.testing.assert_array_equal(got["A"], want["A"])


def test_dtypes_and_signature(tmp_path):
    p = write(tmp_path, """void f(int n, long m, float s, float a[restrict n], int b[restrict n], long c[restrict n],
       double (*restrict d)[3]) {
#pragma scop
  for (int i = 0; i < n; i++) {
    a[i] = a[i] * s;
    b[i] = b[i] + 1;
    c[i] = c[i] + m;
    d[i][2] = a[i];
  }
#pragma endscop
}
""")
    cs = only(p, params={"n": 4})
    assert {a.name: a.dtype for a in cs.scop.arrays} == {"a": "float32", "b": "int32", "c": "int64", "d": "float64"}
    assert cs.scop.array("d").shape == (4, 3)
    sig = {q.name: (q.kind, q.dtype, q.dims, q.restrict) for q in cs.signature}
    assert sig["n"] == ("int", "int32", (), False) and sig["s"] == ("float", "float32", (), False)
    assert sig["d"] == ("array", "float64", (None, "3"), True) and sig["a"] == ("array", "float32", ("n",), True)


def test_show_and_notes(tmp_path):
    p = write(tmp_path, """void f(int n, double *restrict x) {
#pragma scop
  for (int i = 0; i < n; i++) {
#pragma omp simd
    x[i] = 2.0 * x[i];
  }
#pragma endscop
}
""")
    cs = only(p, params={"n": 3})
    text = show(cs)
    assert "S0 (line 5): x[i] = 2.0 * x[i];" in text and "domain: { S0[i] : 0 <= i <= 2 }" in text
    assert "read:" in text and "schedule:" in text and "fixed: n=3" in text
    assert any("omp simd" in n for n in cs.notes)


def test_empty_regions_and_empty_domains(tmp_path):
    p = write(tmp_path, "void f(int n, double *restrict x) {\n#pragma scop\n#pragma endscop\n#pragma scop\n"
                        "  for (int i = 0; i < 0; i++)\n    x[i] = 1.0;\n  ;\n#pragma endscop\n}\n")
    empty, never = extract(p)
    assert empty.scop.statements == () and empty.scop.domain.is_empty()
    assert never.scop.statement("S0").domain.is_empty() and never.scop.array("x").shape == (0,)
    code, _ = generate_region(never.scop, initial(never.scop, deps_mod.compute(never.scop)).tree())
    assert "x[i]" not in code


def test_crlf_tabs_and_comments(tmp_path):
    p = tmp_path / "crlf.c"
    p.write_bytes(b"void f(int n, double *restrict x) {\r\n#pragma scop\r\n  for (int i = 0; i < n; i++)\r\n"
                  b"\tx[i] = 1.0 + /* c */ i * x[i * i];\r\n#pragma endscop\r\n}\r\n")
    with pytest.raises(CFrontendError) as e:
        extract(p)
    assert (e.value.line, e.value.col) == (4, 29)  # the product i * i, counted in characters
    assert e.value.render().splitlines()[-1] == "  \t" + " " * 27 + "^"  # the tab is kept: the caret lines up
    p.write_bytes(p.read_bytes().replace(b"x[i * i]", b"x[i + i]"))
    cs = only(p, params={"n": 3})
    assert p.read_bytes()[cs.start:cs.end].endswith(b"#pragma endscop\r\n")
    assert cs.scop.statement("S0").c_text == "x[i] = 1.0 + (i * x[i + i]);" or \
        cs.scop.statement("S0").c_text == "x[i] = 1.0 + i * x[i + i];"


def test_notes_and_unknown_extents(tmp_path):
    p = write(tmp_path, """void f(int n, int lda, double *restrict A, double (*restrict B)[lda]) {
  int i;
#pragma scop
  for (i = 0; i < n; i++)
    B[i][0] = A[i];
#pragma endscop
  A[0] = i;
}
""")
    cs = only(p, params={"n": 4})
    assert cs.scop.array("B").shape == (4, -1)  # lda is not known: not guessed from the accesses
    assert cs.scop.array("A").shape == (4,)
    # i is read after the region: the optimised code replays the loop header to leave it at n.
    assert "for (i = 0; i < n; i++)" in cs.final_values
    assert only(p, params={"n": 4, "lda": 7}).scop.array("B").shape == (4, 7)


def test_region_errors_of_the_file_itself(tmp_path):
    p = write(tmp_path, "void f(void) {\n#pragma scop\n  ;\n}\n")
    with pytest.raises(CFrontendError, match="without a matching #pragma endscop") as e:
        extract(p, skip_nonaffine=True)  # file-level errors are never skipped
    assert e.value.line == 2
    p = write(tmp_path, "void f(void) {\n  int x = 1\n}\n")
    with pytest.raises(CFrontendError, match="cannot parse C") as e:
        extract(p)
    assert (e.value.line, e.value.col) == (3, 1)
    p = write(tmp_path, "void f(void) {\n  int x = ;\n}\n")
    with pytest.raises(CFrontendError, match="cannot parse C: Invalid expression") as e:
        extract(p)
    assert (e.value.line, e.value.col) == (2, 11)  # pycparser names only the file: its token stream says where
    # The same through a macro (Pluto's test/spu_k_classify_local_naive.c expands one to "{ ... }"):
    # located at the macro's use, on the user's line.
    p = write(tmp_path, "#define get(d) { a[d] }\nvoid f(float *a, int n) {\n  int i;\n"
                        "  for (i = 0; i < n; i++)\n    a[i] = get(i);\n}\n")
    with pytest.raises(CFrontendError, match="Invalid expression") as e:
        extract(p)
    assert e.value.line == 5 and "a[i] = get(i);" in str(e.value)
    # A loop nest alone in a file (Pluto's test fragments): C has no statements outside a function.
    p = write(tmp_path, "/* } */\n#pragma scop\nfor (i = 0; i < N; i++)\n  A[i] = 0.33 * B[i];\n#pragma endscop\n")
    with pytest.raises(CFrontendError, match="a statement outside any function") as e:
        extract(p)
    assert (e.value.line, e.value.col) == (3, 1)
    # Inside a function the same token is a plain syntax error (a missing ';'), without that hint.
    p = write(tmp_path, "void f(void) {\n  int x = 1\n  for (;;) ;\n}\n")
    with pytest.raises(CFrontendError, match="before: for") as e:
        extract(p)
    assert "outside any function" not in str(e.value)
    with pytest.raises(CFrontendError, match="no such C file"):
        extract(tmp_path / "missing.c")


# ---------------------------------------------------------------------------
# Non-affine programs: refused with the construct and its line, or skipped
# ---------------------------------------------------------------------------

_HEADER = "void f(int n, int m, double *restrict x, double *restrict y, int *restrict idx, " \
          "double A[restrict n][n], double *p, double *q) {\n  int i, j, k;\n#pragma scop\n"
_FOOTER = "#pragma endscop\n}\n"

#: name -> (region body (starts at line 4), line, column, words the message must contain)
NON_AFFINE = {
    "indirect subscript": ("  for (i = 0; i < n; i++)\n    x[idx[i]] = y[i];\n", 5, 7,
                           ["non-affine subscript of x", "data-dependent", "idx"]),
    "data-dependent bound": ("  for (i = 0; i < n; i++)\n    for (j = 0; j < idx[i]; j++)\n      x[j] += 1.0;\n",
                             5, 21, ["loop condition", "data-dependent", "idx"]),
    "while loop": ("  i = 0;\n  while (i < n) {\n    x[i] = 0;\n  }\n", 5, 3, ["'while' loop"]),
    "break": ("  for (i = 0; i < n; i++) {\n    if (i > 3)\n      break;\n    x[i] = 0;\n  }\n", 6, 7, ["'break'"]),
    "continue": ("  for (i = 0; i < n; i++) {\n    continue;\n  }\n", 5, 5, ["'continue'"]),
    "goto": ("  for (i = 0; i < n; i++)\n    goto out;\nout:\n  ;\n", 5, 5, ["'goto'"]),
    "return": ("  for (i = 0; i < n; i++)\n    x[i] = 1.0;\n  return;\n", 6, 3, ["'return'"]),
    "call with pointer argument": ("  for (i = 0; i < n; i++)\n    x[i] = g(y, i);\n", 5, 14,
                                   ["call to g() with a pointer argument", "(y)"]),
    "call as a statement": ("  for (i = 0; i < n; i++)\n    h(x[i]);\n", 5, 5, ["call to h() as a statement"]),
    "aliasing pointers": ("  for (i = 0; i < n; i++)\n    p[i] = q[i] + 1.0;\n", 5, 5,
                          ["p (pointer parameter) and q (pointer parameter) may overlap", "restrict",
                           "assume_no_alias"]),
    "product i*j in a subscript": ("  for (i = 0; i < n; i++)\n    for (j = 0; j < n; j++)\n      x[i * j] = 0;\n",
                                   6, 9, ["non-affine subscript of x", "product", "i", "j"]),
    "product in a bound": ("  for (i = 0; i < n; i++)\n    for (j = 0; j < i * i; j++)\n      x[j] = 0;\n",
                           5, 21, ["non-affine loop condition", "product"]),
    "iterator assigned in the body": ("  for (i = 0; i < n; i++)\n    i = i + 1;\n", 5, 5,
                                      ["assignment to loop iterator i"]),
    "pointer dereference": ("  for (i = 0; i < n; i++)\n    *x = y[i];\n", 5, 5, ["pointer dereference *x"]),
    "data-dependent if": ("  for (i = 0; i < n; i++)\n    if (y[i] > 0)\n      x[i] = 1;\n", 5, 9,
                          ["non-affine if condition", "y[...]"]),
    "scalar computed in the region used as bound": ("  k = n / 2;\n  for (i = 0; i < k; i++)\n    x[i] = 0;\n",
                                                    5, 19, ["data-dependent", "k is assigned inside the region"]),
    "condition that is not a bound": ("  for (i = 0; i != n; i += 2)\n    x[i] = 0;\n", 4, 15,
                                      ["not a bound on i"]),
    "unbounded loop": ("  for (i = 0; i >= 0; i++)\n    x[i] = 0;\n", 4, 15, ["no upper bound"]),
    "non-constant step": ("  for (i = 0; i < n; i += m)\n    x[i] = 0;\n", 4, 22, ["loop increment"]),
    "float iterator": ("  for (double d = 0; d < n; d++)\n    x[0] = d;\n", 4, 15, ["not an integer variable"]),
    "assignment inside an expression": ("  for (i = 0; i < n; i++)\n    x[i] = (y[i] = 2.0) + 1.0;\n", 5, 13,
                                        ["assignment inside an expression"]),
    "partial subscript": ("  for (i = 0; i < n; i++)\n    x[i] = k2(A[i]);\n", 5, 15, ["pointer argument"]),
    # C leaves the order of two stores of one chain open (C11 6.5.16p3): refused where they may differ.
    "chain writing one cell twice through an int": ("  for (i = 0; i < n; i++)\n    x[i] = k = x[n - 1 - i] = y[i];\n",
                                                    5, 16, ["x[i] and x[n - 1 - i] may be the same element",
                                                            "k between them is int32", "separate statements"]),
    "chain updating what it assigns": ("  y[0] += y[0] = 1.0;\n", 4, 11,
                                       ["y[0] is assigned twice", "'+=' on y[0]", "separate statements"]),
}


@pytest.mark.parametrize("case", sorted(NON_AFFINE))
def test_non_affine_programs_are_refused(case, tmp_path):
    body, line, col, words = NON_AFFINE[case]
    decls = "double g(double *v, int i);\nvoid h(double v);\ndouble k2(double *r);\n"
    text = decls + _HEADER + body + _FOOTER
    p = write(tmp_path, text)
    line += 3  # the declarations above the function
    with pytest.raises(CFrontendError) as e:
        extract(p)
    err = e.value
    assert isinstance(err, PolytileError)
    msg = str(err)
    for w in words:
        assert w in msg, f"{w!r} not in:\n{msg}"
    assert (err.line, err.col) == (line, col), msg
    # file:line:col, the source line, a caret under the column
    head, src_line, caret = msg.splitlines()[:3]
    assert head.startswith(f"{p}:{line}:{col}: error: ")
    assert src_line.strip() == text.splitlines()[line - 1].strip()
    assert caret.index("^") == 2 + col - 1
    # skip_nonaffine: the region comes back marked skipped, and splicing keeps the file identical.
    [cs] = extract(p, skip_nonaffine=True)
    assert cs.skipped and cs.scop is None and f":{line}:{col}:" in cs.reason
    assert splice(p.read_bytes(), [(cs, "garbage")]) == p.read_bytes()
    assert "skipped" in show(cs)


def test_assume_no_alias_accepts_overlapping_pointers(tmp_path):
    p = write(tmp_path, "void f(int n, double *p, double *q, double **rows) {\n#pragma scop\n"
                        "  for (int i = 0; i < n; i++)\n    p[i] = q[i] + rows[i][0];\n#pragma endscop\n}\n")
    with pytest.raises(CFrontendError, match="pointer to pointers"):
        extract(p)
    cs = only(p, assume_no_alias=True, params={"n": 3})
    assert cs.scop.statement("S0").reads().is_equal(
        isl.UnionMap("{ S0[i] -> q[i] : 0 <= i < 3; S0[i] -> rows[i, 0] : 0 <= i < 3 }"))


def test_global_array_and_pointer_parameter_may_alias(tmp_path):
    p = write(tmp_path, "double G[10];\nvoid f(double *x) {\n#pragma scop\n  for (int i = 0; i < 10; i++)\n"
                        "    G[i] = x[i];\n#pragma endscop\n}\n")
    with pytest.raises(CFrontendError, match="G .* and x .* may overlap"):
        extract(p)
    p2 = write(tmp_path, "double G[10];\nvoid f(double *restrict x) {\n#pragma scop\n"
                         "  for (int i = 0; i < 10; i++)\n    G[i] = x[i];\n#pragma endscop\n}\n", "k2.c")
    assert only(p2).scop.array("G").shape == (10,)


def test_skip_keeps_good_regions(tmp_path):
    text = """void f(int n, double *restrict x, int *restrict idx) {
#pragma scop
  for (int i = 0; i < n; i++)
    x[i] = 1.0;
#pragma endscop
#pragma scop
  for (int i = 0; i < n; i++)
    x[idx[i]] = 2.0;
#pragma endscop
}
"""
    p = write(tmp_path, text)
    good, bad = extract(p, skip_nonaffine=True)
    assert not good.skipped and bad.skipped
    assert bad.lines == (6, 9) and ":8:" in bad.reason
    out = splice(p.read_bytes(), [(good, "/* new */\n"), (bad, "/* must not appear */\n")]).decode()
    assert "/* new */" in out and "must not appear" not in out and "x[idx[i]] = 2.0;" in out
