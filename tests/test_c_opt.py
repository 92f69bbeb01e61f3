"""``polytile opt``: source-to-source optimisation of C SCoPs (isl's scheduler, tiling, wavefronts, OpenMP).

* Every PolyBench-style kernel of ``tests/c_kernels`` is optimised (tiled,
  parallel, simd marks), the output compiled with ``-O2 -fopenmp`` and its
  function run on random inputs; the arrays must be bitwise identical to the
  original function's.  Every C statement's update of a cell is a read and a
  write in the Scop (no reduction dependence is relaxed), so each legal
  schedule performs the same operations on each cell in the same order.
  Sizes are chosen so that loops span several 32-wide tiles and partial tiles.
* Stencils with a time loop are tiled (time-skewed by isl's scheduler) and
  parallelised by a wavefront over their tile loops.
* Files without regions, and non-affine regions with ``skip_nonaffine``, come
  out byte-identical; the CLI writes ``-o`` and ``show`` reads C.
"""
from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Optional

import numpy as np
import pytest

from polytile.cli import main as cli_main
from polytile.c_optimiser import optimize_c, optimize_regions
from polytile.c_optimiser.team import FORCE_PARALLEL, FORCE_SERIAL
from polytile.errors import PolytileError
from polytile.frontends.c import extract

from test_c_extract import SPECS, _inputs, _sizes, call_kernel

KERNELS = Path(__file__).resolve().parent / "c_kernels"
GCC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(GCC is None, reason="no C compiler")

#: kernel -> sizes at which the optimised function is run (None: the file's macros): larger than the
#: extraction tests' so loops span several 32-wide tiles and partial tiles.  Inputs, scalars, globals and
#: aliasing assumptions are the extraction tests' (test_c_extract.SPECS).
OPT_SIZES: Dict[str, Optional[Dict[str, int]]] = {
    "gemm.c": {"ni": 37, "nj": 41, "nk": 35},
    "2mm.c": None,
    "durbin.c": None,
    "syrk.c": {"n": 40, "m": 35},
    "trmm.c": {"m": 40, "n": 37},
    "lu.c": {"n": 45},
    "cholesky.c": {"n": 45},
    "trisolv.c": {"n": 50},
    "jacobi-1d.c": {"tsteps": 20, "n": 70},
    "jacobi-2d.c": {"tsteps": 10, "n": 40},
    "seidel-2d.c": {"tsteps": 10, "n": 40},
    "fdtd-2d.c": {"tmax": 10, "nx": 38, "ny": 43},
    "heat-3d.c": None,
    "floyd-warshall.c": {"n": 45},
    "covariance.c": {"m": 33, "n": 40},
    "features.c": {"n": 45},
    "atax.c": {"m": 45, "n": 38},
    "gesummv.c": {"n": 45},
    "gramschmidt.c": {"m": 45, "n": 38},
    "doitgen.c": {"nr": 5, "nq": 7, "np": 37},
    "chained.c": {"n": 45},
    "3mm.c": None,
    "gemver.c": {"n": 45},
    "mvt.c": {"n": 45},
    "bicg.c": {"m": 45, "n": 38},
    "symm.c": {"m": 40, "n": 37},
    "syr2k.c": {"n": 40, "m": 35},
    "ludcmp.c": {"n": 45},
    "correlation.c": {"m": 33, "n": 40},
    "adi.c": {"tsteps": 5, "n": 40},
    "nussinov.c": {"n": 45},
    "deriche.c": {"w": 45, "h": 38},
    "gemm-split.c": {"ni": 37, "nj": 41, "nk": 35},
    "2mm-init.c": {"ni": 37, "nj": 41, "nk": 35, "nl": 39},
    "syrk-lower.c": {"n": 40, "m": 35},
    "lu-temp.c": {"n": 45},
}
#: scalar arguments that follow the sizes (covariance's and correlation's float_n is n as a double)
OPT_SCALARS = {"covariance.c": {"float_n": 40.0}, "correlation.c": {"float_n": 40.0}}
CASES: Dict[str, dict] = {k: {**SPECS[k], "sizes": OPT_SIZES[k], **({"scalars": OPT_SCALARS[k]} if k in OPT_SCALARS else {})}
                          for k in SPECS}
STENCILS = ("jacobi-1d.c", "jacobi-2d.c", "seidel-2d.c", "fdtd-2d.c", "heat-3d.c")


def compile_so(tmp_path: Path, name: str, text: bytes, flags=("-O2", "-fopenmp", "-ffp-contract=off"),
               team: str = FORCE_PARALLEL) -> ctypes.CDLL:
    """Build ``text`` into a library.  A region versioned on the thread team's pay runs its optimised,
    parallel copy whatever the test's sizes (``team``; FORCE_SERIAL for the other copy)."""
    src, so = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_bytes(text)
    cmd = [GCC, *flags, team, "-fPIC", "-shared", "-o", str(so), str(src), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{r.stderr}\n--- source ---\n{text.decode()}"
    return ctypes.CDLL(str(so))


@pytest.fixture(scope="module")
def optimised():
    """Each kernel optimised once (default options: tile, parallel, isl's scheduler with smart fusion),
    through the session's ``opt`` cache so that other tests (and xdist workers) optimising the same file
    with the same options reuse the result (a hit is the same bytes: the cache checks its hash)."""
    cache = {}

    def get(kernel: str):
        if kernel not in cache:
            case = CASES[kernel]
            alias = case.get("assume_no_alias", False)
            got = optimize_regions(KERNELS / kernel, assume_no_alias=alias, cache=True)
            if any(r.text is not None and r.schedule is None for r in got[1]):
                # Served from the cache (another test optimised it first): text and notes only, and
                # these tests read the schedules too.
                got = optimize_regions(KERNELS / kernel, assume_no_alias=alias, cache=False)
            cache[kernel] = got
        return cache[kernel]

    return get


def test_every_kernel_is_covered():
    assert sorted(p.name for p in KERNELS.glob("*.c")) == sorted(CASES)


def _run_both(kernel: str, out: bytes, results, tmp_path: Path, rng, team: str = FORCE_PARALLEL):
    """Inputs, and the arrays after the original and after the optimised file's function (its parallel
    copy, or with ``team=FORCE_SERIAL`` its serial copy, where a region has both)."""
    path = KERNELS / kernel
    case = CASES[kernel]
    sizes = _sizes(path, case)
    assert results and all(r.text is not None for r in results)
    # Only the regions changed: the bytes before the first and after the last are the original's
    # (after the thread-count helper, put at the top exactly when some loop is parallel).
    from polytile.codegen.c_threads import THREADS_CLAUSE, THREADS_PRELUDE

    raw = path.read_bytes()
    helper = THREADS_PRELUDE.encode()
    assert out.startswith(helper) == (THREADS_CLAUSE.encode() in out)
    body = out[len(helper):] if out.startswith(helper) else out
    assert body.startswith(raw[:results[0].cscop.start]) and body.endswith(raw[results[-1].cscop.end:])
    original = compile_so(tmp_path, "original", raw)
    new = compile_so(tmp_path, "optimised", out, team=team)
    concrete = extract(path, params=sizes, assume_no_alias=case.get("assume_no_alias", False))
    arrays = {}
    for cs in concrete:
        arrays.update({k: v for k, v in _inputs(cs, case, rng).items() if k not in arrays})
    scalars, globals_ = case.get("scalars", {}), case.get("globals", {})
    want = call_kernel(original, concrete[0], sizes, arrays, scalars, globals_)
    got = call_kernel(new, concrete[0], sizes, arrays, scalars, globals_)
    assert any(not np.array_equal(want[n], arrays[n]) for n in arrays)
    return arrays, want, got


@needs_cc
@pytest.mark.parametrize("kernel", sorted(CASES))
@pytest.mark.parametrize("team", [FORCE_PARALLEL, FORCE_SERIAL], ids=["parallel", "serial"])
def test_optimised_kernel_is_bitwise_identical(kernel, optimised, tmp_path, rng, team):
    # Both copies of a region versioned on the thread team's pay (the test's sizes would pick one).
    arrays, want, got = _run_both(kernel, *optimised(kernel), tmp_path, rng, team=team)
    for name in arrays:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{kernel}: array {name} differs")


#: Tolerance of reassociated output (float64): every element within REL of its array's largest
#: magnitude.  The kernels sum at most ~50 terms of size ~1 here, so reordering moves a result by a
#: few ulps of the largest partial sum (~1e-14 relative); a missing or doubled term moves it by ~1e-2.
REASSOC_REL = 1e-11


@needs_cc
@pytest.mark.parametrize("kernel", sorted(CASES))
def test_reassociated_kernel_matches_within_tolerance(kernel, tmp_path, rng):
    case = CASES[kernel]
    out, results = optimize_regions(KERNELS / kernel, assume_no_alias=case.get("assume_no_alias", False),
                                    reassociate=True, cache=True)
    arrays, want, got = _run_both(kernel, out, results, tmp_path, rng)
    for name in arrays:
        if np.dtype(want[name].dtype).kind in "iu":  # integer sums reassociate exactly
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{kernel}: array {name} differs")
            continue
        scale = float(np.max(np.abs(want[name]))) or 1.0
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=REASSOC_REL * scale,
                                   err_msg=f"{kernel}: array {name} differs beyond the stated tolerance")


CONVERSIONS = """void kernel_conv(int n, double x[restrict n], int q[restrict n], double y[restrict n],
                 double z[restrict n], double out[restrict 3])
{
  int a, k;
  double b;
  float c;
#pragma scop
  a = b = 2.5;
  for (int i = 0; i < n; i++) {
    q[i] = y[i] = x[i] * 2.5;
    z[i] = c = y[i] / 3.0 + q[i];
    x[i] = k = z[i] * 2.0;
  }
  out[0] = a;
  out[1] = b;
  out[2] = a = b = a + b;
#pragma endscop
}
"""


@needs_cc
def test_chained_assignment_converts_through_each_target(tmp_path, rng):
    """The value of ``b = e`` is b's after the store, in b's type: ``int a; double b; a = b = 2.5`` leaves
    b == 2.5 and a == 2.  Each outer statement reads its inner target back, so the optimised file
    converts through the same types and is bitwise identical to the original."""
    path = tmp_path / "conv.c"
    path.write_text(CONVERSIONS)
    out, results = optimize_regions(path)
    assert [st.c_text for st in results[0].cscop.scop.statements][:2] == ["b = 2.5;", "a = b;"]
    n = 40
    [cs] = extract(path, params={"n": n})
    x = rng.uniform(0.5, 1.5, n)
    arrays = {"x": x, "q": np.zeros(n, np.int32), "y": np.zeros(n), "z": np.zeros(n), "out": np.zeros(3)}
    want = call_kernel(compile_so(tmp_path, "original", path.read_bytes()), cs, {"n": n}, arrays, {}, {})
    got = call_kernel(compile_so(tmp_path, "optimised", out), cs, {"n": n}, arrays, {}, {})
    for name in arrays:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"array {name} differs")
    # What C says, computed here: truncation to int, rounding to float.
    y = x * 2.5
    q = np.trunc(y).astype(np.int32)
    z = (y / 3.0 + q).astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(want["out"], [2.0, 2.5, 4.0])  # b = 2 + 2.5, a = (int)4.5
    np.testing.assert_array_equal(want["y"], y)
    np.testing.assert_array_equal(want["q"], q)
    np.testing.assert_array_equal(want["z"], z)
    np.testing.assert_array_equal(want["x"], np.trunc(z * 2.0))


@pytest.mark.parametrize("kernel", STENCILS)
def test_stencils_are_tiled(kernel, optimised):
    out, [res] = optimised(kernel)
    ops = [st.op for st in res.schedule.steps]
    assert "tile" in ops, res.notes
    # Tile loops show up as divisions by the tile size in the loop bounds.
    assert b"/ 32" in out or b"floord(" in out


def test_stencils_get_wavefront_parallelism(optimised):
    parallel = []
    for kernel in STENCILS:
        out, [res] = optimised(kernel)
        ops = [st.op for st in res.schedule.steps]
        if "skew" in ops and b"#pragma omp parallel for" in out:
            parallel.append(kernel)
            # The parallel loop is a tile loop (the wavefront's inner one), not a point loop.
            marked = {m[1] for m in res.schedule.marks if m[2] == "parallel"}
            assert marked and all(name.endswith("_t") or "_t" in name for name in marked), marked
    assert "jacobi-2d.c" in parallel and len(parallel) >= 3, parallel


def test_gemm_tiles_and_parallel_outer_tile_loop(optimised):
    out, [res] = optimised("gemm.c")
    assert [st.op for st in res.schedule.steps][:2] == ["base", "tile"]
    assert any(m[1] == "i_t" and m[2] == "parallel" for m in res.schedule.marks)
    assert b"#pragma omp parallel for" in out


def test_no_tile_no_parallel():
    text = optimize_c(KERNELS / "jacobi-2d.c", tile=False, parallel=False)
    assert "#pragma omp" not in text and "tile(" not in text
    assert "polytile opt: base(kind='isl'" in text


def test_illegal_tilings_are_refused_and_reported(optimised):
    from polytile import deps as deps_mod
    from polytile.c_optimiser import tile_bands
    from polytile.c_optimiser.machine import CMachine
    from polytile.scheduling import initial

    # floyd-warshall in its original order: k carries everything, so no band of k with i, j tiles;
    # each refusal is noted and the band retried one loop shallower, down to no tiling.
    [cs] = extract(KERNELS / "floyd-warshall.c")
    notes = []
    s, tiled = tile_bands(initial(cs.scop, deps_mod.compute(cs.scop)), CMachine(), notes)
    assert tiled == [] and [n for n in notes if "refused" in n], notes
    s.check("again")
    _, [res] = optimised("floyd-warshall.c")
    res.schedule.check("again")  # the emitted schedule is legal


def test_file_without_region_is_byte_identical(tmp_path):
    p = tmp_path / "plain.c"
    p.write_bytes(b"/* no scop here */\nint f(int x) { return x + 1; }\r\n\tint y;\n")
    assert optimize_c(p).encode() == p.read_bytes()
    out = tmp_path / "out.c"
    assert cli_main(["opt", str(p), "-o", str(out)]) == 0
    assert out.read_bytes() == p.read_bytes()


NONAFFINE = b"""void f(int n, double *restrict a, int *restrict idx) {
  int i;
#pragma scop
  for (i = 0; i < n; i++)
    a[idx[i]] = a[idx[i]] + 1.0;
#pragma endscop
}
"""


def test_skip_nonaffine_leaves_the_file_byte_identical(tmp_path):
    p = tmp_path / "indirect.c"
    p.write_bytes(NONAFFINE)
    with pytest.raises(PolytileError):
        optimize_c(p)
    assert optimize_c(p, skip_nonaffine=True).encode() == NONAFFINE
    out = tmp_path / "out.c"
    assert cli_main(["opt", str(p), "-o", str(out), "--skip-nonaffine"]) == 0
    assert out.read_bytes() == NONAFFINE
    assert cli_main(["opt", str(p), "-o", str(tmp_path / "x.c")]) == 1


@needs_cc
def test_cli_writes_output_and_options(tmp_path, capsys):
    out = tmp_path / "seidel_opt.c"
    assert cli_main(["opt", str(KERNELS / "seidel-2d.c"), "-o", str(out), "--fusion", "max",
                     "--hardware", "host"]) == 0
    text = out.read_text()
    assert "#pragma omp parallel for" in text and "tile(" in text
    r = subprocess.run([GCC, "-O2", "-fopenmp", "-c", "-o", str(tmp_path / "s.o"), str(out)], capture_output=True)
    assert r.returncode == 0, r.stderr
    # Fixed parameters: the region is specialised (no tsteps/n left in its loop bounds), behind a run-time
    # test of those values (the region as written runs for others).
    out2 = tmp_path / "seidel_fixed.c"
    assert cli_main(["opt", str(KERNELS / "seidel-2d.c"), "-o", str(out2), "--no-tile", "--no-parallel",
                     "--param", "n=20", "--param", "tsteps=3"]) == 0
    assert "if (n == 20 && tsteps == 3)\n" in out2.read_text()
    region = out2.read_text().split("polytile opt:")[1].split("\nelse\n")[0]
    assert "tsteps" not in region and "#pragma omp" not in region
    # --dims is the same option, in the comma-separated syntax of the other commands.
    out3 = tmp_path / "seidel_dims.c"
    assert cli_main(["opt", str(KERNELS / "seidel-2d.c"), "-o", str(out3), "--no-tile", "--no-parallel",
                     "--dims", "n=20,tsteps=3"]) == 0
    assert out3.read_text() == out2.read_text()
    assert cli_main(["opt", str(KERNELS / "seidel-2d.c"), "--dims", "n=20,tsteps"]) == 2
    # Without -o the file goes to stdout.
    capsys.readouterr()
    assert cli_main(["opt", str(KERNELS / "jacobi-1d.c")]) == 0
    assert "kernel_jacobi_1d" in capsys.readouterr().out


HUGE_STATIC = b"""int u[2][1000][1000][400];  /* 3.2 GB of .bss: only its start must be within the small code model's reach */

int main(void) {
  int t, i, j, k;
#pragma scop
  for (t = 1; t < 8; t++)
    for (i = 1; i < 999; i++)
      for (j = 1; j < 999; j++)
        for (k = 1; k < 399; k++)
          u[t % 2][i][j][k] = u[(t - 1) % 2][i - 1][j][k] + u[(t - 1) % 2][i][j + 1][k] + 1;
#pragma endscop
  return u[1][5][5][5] & 1;
}
"""


@needs_cc
def test_a_file_with_static_arrays_past_2gib_still_links(tmp_path):
    # Pluto's test/jacobi-3d-25pt.c: the original links, and the thread helper's zero-initialised statics
    # (.bss, placed after the user's arrays) once made the optimised file fail with "relocation truncated
    # to fit".  Linked, not run: the program would touch gigabytes.
    src = tmp_path / "huge.c"
    src.write_bytes(HUGE_STATIC)
    out = tmp_path / "huge.opt.c"
    assert cli_main(["opt", str(src), "-o", str(out)]) == 0
    assert "pt_threads()" in out.read_text()
    for source in (src, out):
        r = subprocess.run([GCC, "-O2", "-fopenmp", "-o", str(tmp_path / "a.out"), str(source)], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr


def test_cli_schedule_file_replays_steps(tmp_path):
    steps = tmp_path / "s.json"
    steps.write_text(json.dumps([{"op": "base", "kind": "original"}, {"op": "tile", "stmt": "S1",
                                                                     "sizes": {"j": 8, "k": 8}}]))
    out = tmp_path / "gemm_opt.c"
    assert cli_main(["opt", str(KERNELS / "gemm.c"), "-o", str(out), "--schedule", str(steps)]) == 0
    assert "tile(stmt='S1'" in out.read_text()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"op": "base", "kind": "original"}, {"op": "parallel", "stmt": "S1", "loop": "k"}]))
    assert cli_main(["opt", str(KERNELS / "gemm.c"), "-o", str(out), "--schedule", str(bad)]) == 1


def test_cli_show_reads_c(capsys):
    assert cli_main(["show", str(KERNELS / "jacobi-1d.c")]) == 0
    text = capsys.readouterr().out
    assert "domain:" in text and "read:" in text and "flow" in text and "S0[t, i]" in text


def test_unknown_fusion_is_an_error():
    with pytest.raises(PolytileError):
        optimize_c(KERNELS / "gemm.c", fusion="everything")


def _innermost_loop_bodies(text: str):
    """The bodies of the ``for`` loops of generated C that contain no other loop."""
    bodies = []
    pos = 0
    while True:
        at = text.find("for (long ", pos)
        if at < 0:
            return bodies
        open_ = text.index("{", text.index(")", at))
        depth, k = 0, open_
        while True:
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                break
            k += 1
        body = text[open_ + 1:k]
        if "for (long " not in body:
            bodies.append(body)
        pos = at + 1


@pytest.mark.parametrize("kernel", ["jacobi-1d.c", "jacobi-2d.c", "fdtd-2d.c", "heat-3d.c"])
def test_time_tiled_stencil_vector_loops_are_guard_free_single_statements(kernel, optimised):
    # Fused sweeps shifted against each other used to share one innermost loop with an `if` per
    # statement (GCC leaves such loops scalar); now isl separates the innermost loops and each
    # statement has its own, so every innermost loop is a plain one-statement loop.
    out, [res] = optimised(kernel)
    region = out.decode().split("polytile opt:")[1]
    bodies = _innermost_loop_bodies(region)
    assert bodies
    for body in bodies:
        assert "if (" not in body, body
        assert body.count("const long") and body.count("; }") == 1, body
    # The innermost band loop of the time tile is the long vector tile.
    from polytile.c_optimiser.tiling import VECTOR_TILE
    assert any(f"={VECTOR_TILE}" in n for n in res.notes if n.startswith("tiled")), res.notes


def test_unit_stride_dim_sees_through_skewing():
    from polytile import deps as deps_mod
    from polytile.c_optimiser import unit_stride_dim, vectorisable
    from polytile.scheduling import automatic

    scop = extract(KERNELS / "jacobi-2d.c")[0].scop
    s = automatic(scop, deps_mod.compute(scop), "smart")
    dims = [d for d, _ in s.table["S0"].loops()]
    # isl skews i and j by 2t: with t fixed, 2t + j walks j (unit stride), 2t + i walks rows.
    assert [unit_stride_dim(s, "S0", d) for d in dims] == [False, False, True]
    assert vectorisable(s, "S0", dims[-1])
    seidel = extract(KERNELS / "seidel-2d.c")[0].scop
    s2 = automatic(seidel, deps_mod.compute(seidel), "smart")
    # seidel-2d reads A[i][j-1] of the same sweep: its innermost loop is a chain, never a vector loop.
    assert not vectorisable(s2, "S0", s2.table["S0"].loops()[-1][0])


def test_fusion_choice_keeps_the_hot_loops_vectorisable(optimised):
    from polytile.c_optimiser import stride_penalty

    out, [res] = optimised("covariance.c")
    # isl's smart fusion skews the column means into a column walk; the unfused schedule wins.
    assert any("chosen over isl's smart fusion" in n for n in res.notes), res.notes
    assert stride_penalty(res.schedule) == 0
    for kernel in ("jacobi-2d.c", "lu.c"):
        _, [r] = optimised(kernel)
        assert r.schedule.steps[0].kwargs() == {"kind": "isl", "fusion": "smart"}, (kernel, r.notes)
    # gemm: fused, C[i][j] *= beta shares the band of the update, which then cannot hold its running
    # values in a register block; unfused, it can (one more sweep over C, against one per k tile).
    _, [r] = optimised("gemm.c")
    assert r.schedule.steps[0].kwargs() == {"kind": "isl", "fusion": "none"}, r.notes
    assert any(st.op == "regtile" for st in r.schedule.steps), r.schedule.steps


@needs_cc
@pytest.mark.parametrize("kernel", ["jacobi-1d.c", "jacobi-2d.c", "fdtd-2d.c", "heat-3d.c"])
def test_vectorised_stencils_with_partial_vector_tiles_are_bitwise_identical(kernel, tmp_path, rng, monkeypatch):
    # At the default vector tile the test sizes fit in one tile; 16 makes loops span several
    # vector tiles and partial ones, and -O3 -march=native makes GCC vectorise them.
    import polytile.c_optimiser.tiling as tiling

    monkeypatch.setattr(tiling, "VECTOR_TILE", 16)
    path = KERNELS / kernel
    case = CASES[kernel]
    sizes = _sizes(path, case)
    out, [res] = optimize_regions(path)
    assert any("=16" in n for n in res.notes if n.startswith("tiled")), res.notes
    flags = ["-O3", "-march=native", "-fopenmp", "-ffp-contract=off"]
    original = compile_so(tmp_path, "original", path.read_bytes(), flags)
    new = compile_so(tmp_path, "optimised", out, flags)
    concrete = extract(path, params=sizes)
    arrays = _inputs(concrete[0], case, rng)
    scalars, globals_ = case.get("scalars", {}), case.get("globals", {})
    want = call_kernel(original, concrete[0], sizes, arrays, scalars, globals_)
    got = call_kernel(new, concrete[0], sizes, arrays, scalars, globals_)
    for name in arrays:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{kernel}: array {name} differs")


def test_index_set_splitting_vectorises_floyd_warshall(optimised):
    from polytile.c_optimiser import stride_penalty

    out, [res] = optimised("floyd-warshall.c")
    # path[i][k] is rewritten only at j == k (and path[k][j] only at i == k): split there, each part's
    # j loop carries nothing and becomes a simd loop; program order between the parts is kept
    # (bitwise identity is checked by test_optimised_kernel_is_bitwise_identical).
    assert any(n.startswith("index sets of S0 split at i = ") and "j = " in n for n in res.notes), res.notes
    assert stride_penalty(res.schedule) == 0
    assert b"#pragma omp simd" in out
    # isl's fused schedule shares one row loop among all parts (no loop is parallel); the unfused
    # one, as vectorisable, runs each part's rows in parallel, so it wins the tie.
    assert any("none chosen over isl's smart fusion" in n for n in res.notes), res.notes
    assert b"#pragma omp parallel for" in out
    for kernel in ("gemm.c", "covariance.c", "trisolv.c", "lu.c"):
        _, [r] = optimised(kernel)
        assert not any(n.startswith("index sets") for n in r.notes), (kernel, r.notes)


def test_elementwise_bands_are_not_tiled(optimised):
    # covariance's centring data[i][j] -= mean[j] re-reads only the vector mean: no tiles; its
    # O(n^3) product keeps them (data[k][j] is re-read for every i).
    _, [res] = optimised("covariance.c")
    untiled = [n for n in res.notes if "left untiled: no array is re-read" in n]
    assert untiled and any(n.startswith("tiled S10 loops") for n in res.notes), res.notes
    # gesummv's in-order dot products keep their tiles: the CPU overlaps the tile-long chains of rows.
    _, [res] = optimised("gesummv.c")
    assert any(n.startswith("tiled S2 loops i, j") for n in res.notes), res.notes


def test_parallel_loops_too_small_for_a_region_stay_sequential(tmp_path):
    """durbin's vector updates (at most N - 1 instances per execution, inside the sequential k loop)
    cannot pay for a parallel region at N = 400 (the file's macro).  At N = 40000 each loop pays for
    its own region, but not the region's 2 (N - 1) fork/joins (about 4 us saved per k against 6 us:
    the thread team rule of polytile.c_optimiser.team), so it stays serial; at N = 200000 both pay.
    With the size a parameter the loops stay parallel behind a run-time work test.  A region whose every
    parallel loop is too small runs its original order (what a team that does not pay runs)."""
    text = optimize_c(KERNELS / "durbin.c")
    assert "#pragma omp parallel" not in text and "#pragma omp simd" not in text
    _, [res] = optimize_regions(KERNELS / "durbin.c", cache=False)
    assert any(n.startswith("region runs serially, its original order: each of its parallel loops has too "
                            "little work") for n in res.notes), res.notes
    for n, loops in ((40000, 0), (200000, 2)):
        big = tmp_path / f"durbin_{n}.c"
        big.write_text((KERNELS / "durbin.c").read_text().replace("#define N 400", f"#define N {n}"))
        assert optimize_c(big).count("#pragma omp parallel for") == loops, n
    param = tmp_path / "durbin_n.c"
    param.write_text((KERNELS / "durbin.c").read_text().replace("#define N 400\n", "")
                     .replace("void kernel_durbin(", "void kernel_durbin(int N, "))
    # Unknown N: each loop starts its parallel region only for enough work, decided as it is reached.
    guarded = optimize_c(param)
    assert guarded.count("#pragma omp parallel for") == 2 and guarded.count("if (c0 >= 12000)") == 2
    out = tmp_path / "durbin_n_opt.c"
    out.write_text(guarded)
    r = subprocess.run([GCC, "-O2", "-fopenmp", "-Werror", "-c", "-o", str(tmp_path / "d.o"), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_an_untiled_nest_gets_a_unit_stride_innermost_loop():
    """doitgen's sum[] carries every outer loop, so nothing is tiled or parallel; the reduction's loops
    are permuted so the innermost walks C4 and sum with unit stride (bitwise: each sum[p] still adds
    s = 0, 1, ... in order; test_optimised_kernel_is_bitwise_identical[doitgen.c] runs it)."""
    import re

    text = optimize_c(KERNELS / "doitgen.c")
    assert "reorder(stmt='S1'" in text
    for m in re.finditer(r"\{ (const long [^{}]*?)sum\[p\] \+= A", text):
        inner = re.findall(r"for \(long (c\d+) ", text[:m.start()])[-1]
        binds = dict(re.findall(r"const long (\w+) = ([^;]+);", m.group(1)))
        assert inner in binds["p"] and inner not in binds["s"], (inner, binds)


@needs_cc
def test_the_thread_count_helper_builds_warning_free_and_obeys_its_settings(tmp_path):
    """codegen.c_threads.THREADS_PRELUDE, as polytile opt puts it at the top of a file: -Wall -Wextra
    -Werror clean; POLYTILE_NUM_THREADS pins the count; OMP_NUM_THREADS caps it; the count is at least 1."""
    import os
    import subprocess

    from polytile.codegen.c_threads import THREADS_PRELUDE

    src = tmp_path / "probe.c"
    src.write_text(THREADS_PRELUDE + """
int main(void)
{
  int i, n = 0;
  for (i = 0; i < 3; i++) {  /* the first call, then re-estimates after the window */
    struct timespec t = {0, 120000000};
    n = pt_threads();
    nanosleep(&t, 0);
  }
  printf("%d %d\\n", n, omp_get_max_threads());
  return 0;
}
""")
    exe = tmp_path / "probe"
    subprocess.run([GCC, "-O2", "-Wall", "-Wextra", "-Werror", "-fopenmp", str(src), "-o", str(exe)], check=True)

    def run(**env):
        base = {k: v for k, v in os.environ.items() if k not in ("POLYTILE_NUM_THREADS", "OMP_NUM_THREADS")}
        out = subprocess.run([str(exe)], env={**base, **env}, capture_output=True, text=True, check=True)
        return tuple(int(x) for x in out.stdout.split())

    n, most = run()
    assert 1 <= n <= most
    assert run(POLYTILE_NUM_THREADS="3")[0] == 3
    assert run(OMP_NUM_THREADS="1") == (1, 1)


def test_a_version_whose_dependences_cost_too_much_is_left_out(monkeypatch):
    # floyd-warshall's split version wins (test above); when its dependence analysis is over the isl
    # operation budget, the region as written is optimised instead and a note says why.
    from polytile.c_optimiser import strategy

    path = KERNELS / "floyd-warshall.c"
    scop = extract(path)[0].scop
    assert strategy.version_deps(scop, 1000) is None
    assert strategy.version_deps(scop) is not None
    monkeypatch.setattr(strategy, "VERSION_DEPS_OPERATIONS", 1000)
    out, [res] = optimize_regions(path)
    assert any("version 'split' not considered: its dependence analysis ran past 1,000 isl operations" in n
               for n in res.notes), res.notes
    assert not any(n.startswith("index sets") for n in res.notes) and b"polytile opt:" in out
    assert not res.timed_out


def test_no_further_version_once_the_regions_time_is_spent(monkeypatch):
    from polytile.c_optimiser import region as region_mod

    monkeypatch.setattr(region_mod, "OPTIONS_SECONDS", 0.0)
    out, [res] = optimize_regions(KERNELS / "floyd-warshall.c")
    assert any("version 'split' not considered: the region's choices ran past 0 s" in n for n in res.notes), res.notes
    assert res.timed_out and b"polytile opt:" in out  # the region as written is still optimised; not cached


def test_a_region_whose_dependences_cost_too_much_is_left_as_written(monkeypatch):
    from polytile.c_optimiser import strategy

    monkeypatch.setattr(strategy, "REGION_DEPS_OPERATIONS", 1000)
    path = KERNELS / "floyd-warshall.c"
    out, [res] = optimize_regions(path)
    assert out == path.read_bytes() and res.text is None
    assert any("left as written: its dependence analysis ran past 1,000 isl operations" in n for n in res.notes)


def test_the_dependence_budget_never_ends_in_an_isl_error():
    # Where the quota runs out decides which isl call fails: sometimes a later one on the NULL it got back
    # ("isl_union_flow_get_may_dependence failed: <no message>"), which escaped as an internal error.
    from polytile.c_optimiser import strategy

    for kernel in ("seidel-2d.c", "jacobi-2d.c"):
        scop = extract(KERNELS / kernel)[0].scop
        results = [strategy.version_deps(scop, m) for m in [31496] + list(range(1000, 100000, 2500))]
        assert results[-1] is None or results[-1].flow is not None
        assert any(r is None for r in results)
