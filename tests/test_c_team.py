"""Whether a region's parallel loops pay for the thread team (:mod:`polytile.c_optimiser.team`).

At sizes the file fixes the optimiser decides; where they are parameters the output tests the same
inequality at run time.  The run-time test is checked against the model's own numbers at many sizes
(the C expression and :meth:`Team.value` must agree), and both copies of a versioned region against
the original elsewhere (tests/test_c_opt.py builds each alone).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from polytile import deps as deps_mod
from polytile.c_optimiser import optimize_c, optimize_regions, strategy
from polytile.c_optimiser import team as T
from polytile.c_optimiser.machine import CMachine
from polytile.frontends.c import extract

from test_c_opt import GCC, KERNELS, needs_cc

JACOBI = (KERNELS / "jacobi-1d.c").read_text()


def _first_candidate(path: Path, sizes=None):
    [cs] = extract(path, params=sizes)
    scop = cs.scop
    s, _ = next(strategy._candidates(scop, deps_mod.compute(scop), tile=True, parallel=True, fusion="smart",
                                     machine=CMachine(), notes=[], sizes=cs.macros))
    return cs, s


def test_a_small_fixed_region_runs_in_its_original_order():
    # mvt at n = 40: 3200 multiply-adds, a few microseconds against the team's 0.1 ms start-up.
    _, [res] = optimize_regions(KERNELS / "mvt.c", params={"n": 40}, cache=False)
    assert "#pragma omp parallel" not in res.text and T.TEAM_MACRO not in res.text
    assert any(n.startswith("region runs serially, its original order") for n in res.notes), res.notes
    # At n = 2000 (8M multiply-adds, in-order chains) the saving covers the team many times over.
    _, [res] = optimize_regions(KERNELS / "mvt.c", params={"n": 2000}, cache=False)
    assert "#pragma omp parallel for" in res.text and T.TEAM_MACRO not in res.text


def test_parametric_sizes_get_a_run_time_test():
    text = optimize_c(KERNELS / "mvt.c", cache=False)
    assert text.count(f"if ({T.TEAM_MACRO}(") == 1 and "#pragma omp parallel for" in text
    head, _, serial = text.partition(f"if ({T.TEAM_MACRO}(")[2].partition("\nelse\n")
    assert "#pragma omp parallel" in head and "#pragma omp parallel" not in serial


def test_team_value_is_none_until_every_size_is_known():
    _, s = _first_candidate(KERNELS / "jacobi-1d.c")
    t = T.team(s, CMachine())
    assert t is not None and t.value() is None and T.pays(t) is None
    known = T.team(s, CMachine(), {"n": 2000, "tsteps": 500}).value()
    assert known is not None and known[0] < T.PAYBACK * known[1]
    assert T.pays(None) is True


@needs_cc
def test_the_run_time_test_agrees_with_the_model(tmp_path):
    """The C expression of the test, compiled and evaluated at many sizes, says what Team.value says."""
    path = KERNELS / "jacobi-1d.c"
    cs, s = _first_candidate(path)
    t = T.team(s, CMachine())
    cond = t.c_condition(cs.scop.context)
    sizes = [(n, ts) for n in (3, 4, 50, 700, 2000, 9000, 40000) for ts in (1, 7, 100, 500, 3000)]
    prog = tmp_path / "cond.c"
    prog.write_text("#include <stdio.h>\n#define min(a, b) ((a) < (b) ? (a) : (b))\n"
                    "#define max(a, b) ((a) > (b) ? (a) : (b))\n"
                    "#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))\n"
                    "static int pays(long n, long tsteps) { return " + cond + "; }\n"
                    "int main(void) {\n"
                    + "".join(f"  printf(\"%d\\n\", pays({n}, {ts}));\n" for n, ts in sizes) + "  return 0;\n}\n")
    exe = tmp_path / "cond"
    r = subprocess.run([GCC, "-O1", "-o", str(exe), str(prog)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    want = []
    for n, ts in sizes:
        saving, cost = T.team(s, CMachine(), {"n": n, "tsteps": ts}).value()
        want.append(int(saving >= T.PAYBACK * cost))
    assert got == want
    assert 0 in got and 1 in got  # both sides of the line are among the sizes


def test_with_sizes_replaces_parameters():
    import islpy as isl

    st = T.with_sizes(isl.Set("[n, m] -> { [i] : 0 <= i < n + m }"), {"n": 4, "k": 9})
    assert st.dim(isl.dim_type.param) == 1 and st.is_equal(isl.Set("[m] -> { [i] : 0 <= i < 4 + m }"))


def test_instance_prices_follow_the_innermost_loop():
    # jacobi-1d's sweeps vectorise (3 operations per instance); trisolv's in-order dot product is a
    # chain of one FMA latency per instance.
    _, s = _first_candidate(KERNELS / "jacobi-1d.c")
    vec = T.instance_seconds(s, "S0", CMachine(ghz=2.0))
    assert vec == pytest.approx(3 / (4 * T.FMA_UNITS * 0.4 * 2e9))
    [cs] = extract(KERNELS / "trisolv.c")
    from polytile.scheduling import initial

    s = initial(cs.scop, deps_mod.compute(cs.scop))
    chained = [n for n, _ in s.stmts if not s.carried([n], s.table[n].loops()[-1][0],
                                                       s.deps.all(include_reductions=True)).is_empty()
               if s.table[n].loops()]
    assert chained and T.instance_seconds(s, chained[0], CMachine(ghz=2.0)) == pytest.approx(4 / 2e9)


def test_a_better_serial_schedule_is_kept_without_its_parallel_loops():
    # lu's A[i][j] -= A[i][k] * A[k][j] runs k innermost in the original order (one chain of FMA
    # latencies per element; no register block: the operand reads A); the chosen schedule walks j
    # innermost.  Where the team does not pay, that schedule runs without its parallel loops.
    out, [res] = optimize_regions(KERNELS / "lu.c", cache=False)
    assert any("its schedule without parallel loops, serially" in n for n in res.notes), res.notes
    serial = out.decode().partition(f"if ({T.TEAM_MACRO}(")[2].partition("\nelse\n")[2]
    assert serial and "#pragma omp parallel" not in serial


def test_the_original_order_serial_copy_keeps_expansion_and_blocks():
    # ludcmp's serial copy is the original order of the expanded region: w_x[j] -= A[i][k] * A[k][j]
    # in a register block over j (PolyBench LARGE: 1.8x over gcc -O3, where the team does not pay;
    # 1.0x in the unexpanded original order, one chain per element).
    out, [res] = optimize_regions(KERNELS / "ludcmp.c", cache=False)
    assert any("its original order, serially" in n for n in res.notes), res.notes
    serial = out.decode().partition(f"if ({T.TEAM_MACRO}(")[2].partition("\nelse\n")[2]
    assert "w_x[j]" in serial and "pt_a0_0" in serial and "#pragma omp parallel" not in serial


def test_a_replayed_schedule_that_unmarks_its_parallel_loops_is_kept():
    # An unmark step the user wrote is the user's choice, not the cost model's verdict that the loops are
    # too small: the region runs the replayed schedule (tiled), not its original order.
    steps = [{"op": "base", "kind": "original"}, {"op": "auto_parallel"},
             {"op": "tile", "stmt": "S0", "sizes": {"i": 8, "j": 8}},
             {"op": "unmark", "stmt": "S0", "loop": "i_t", "kind": "parallel"},
             {"op": "unmark", "stmt": "S1", "loop": "i", "kind": "parallel"}]
    _, [res] = optimize_regions(KERNELS / "mvt.c", params={"n": 40}, schedule=steps, cache=False)
    assert "#pragma omp parallel" not in res.text
    assert "tile(stmt='S0'" in res.text
    assert not any(n.startswith("region runs serially, its original order") for n in res.notes), res.notes
