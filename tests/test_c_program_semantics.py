"""``polytile opt`` keeps what the rest of the program sees: whole programs, original vs optimised output.

``opt --verify`` (:func:`polytile.c_runner.verify`) compares the arrays a region writes; these tests
build and run complete programs and compare everything they print, so they also catch what happens
around the regions: an iterator's value after its loop, the helper macros of the generated code
leaking into the code after it, the C type an iterator computes with, a helper the output calls but
does not define.  Each was a silent wrong result or a broken build found by fuzzing ``opt``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from polytile.cli import main as cli_main

GCC = shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(GCC is None, reason="no C compiler")


def outputs(tmp_path: Path, text: str, *opt_args: str) -> tuple:
    """What the program ``text`` prints when built as written and after ``polytile opt`` (2 threads)."""
    src = tmp_path / "p.c"
    src.write_text(text)
    opt = tmp_path / "p.opt.c"
    assert cli_main(["opt", str(src), "-o", str(opt), *opt_args]) == 0
    assert b"polytile opt:" in opt.read_bytes(), "the region was not optimised"
    printed = []
    for c in (src, opt):
        exe = tmp_path / (c.stem + ".bin")
        subprocess.run([GCC, "-O2", "-fopenmp", str(c), "-o", str(exe), "-lm"], check=True, capture_output=True)
        run = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                             env={**os.environ, "OMP_NUM_THREADS": "2"})
        printed.append(run.stdout)
    return tuple(printed)


def test_iterators_keep_their_final_values(tmp_path):
    # A local read after the region, a global iterator, and an inner loop's iterator whose final value
    # comes from the last outer iteration; j2 is local and never read again (no replay for it).
    original, optimised = outputs(tmp_path, """
#include <stdio.h>
#define N 40
double A[N][N], B[N];
int g;
int main(void) {
  int i = -1, j = -1, j2;
  for (i = 0; i < N; i++) { B[i] = i; for (j = 0; j < N; j++) A[i][j] = i - j; }
  i = j = -7;
#pragma scop
  for (i = 0; i < N; i++)
    for (j = 0; j < i; j++)
      A[i][j] = A[i][j] * 0.5 + B[j];
  for (g = 3; g < N - 1; g += 2)
    for (j2 = 0; j2 < N; j2++)
      A[g][j2] += 1.0;
#pragma endscop
  double s = 0; for (int a = 0; a < N; a++) for (int b = 0; b < N; b++) s += A[a][b] * (a + 1);
  printf("i=%d j=%d g=%d s=%.17g\\n", i, j, g, s);
  return 0;
}
""")
    assert original == optimised
    assert "i=40 j=39 g=39" in original


def test_helper_macros_do_not_leak_past_the_region(tmp_path):
    # The program's own max() after the region; before the fix it called opt's macro and counted twice.
    original, optimised = outputs(tmp_path, """
#include <stdio.h>
static int max(int a, int b) { return a > b ? a : b; }
double A[300][300];
int main(void) {
  int i, j, cnt = 0;
#pragma scop
  for (i = 0; i < 300; i++)
    for (j = 0; j < 300; j++)
      A[i][j] = A[i][j] + i * j;
#pragma endscop
  int m = max(cnt++, -1);
  printf("m=%d cnt=%d %g\\n", m, cnt, A[299][7]);
  return 0;
}
""")
    assert original == optimised == "m=0 cnt=1 2093\n"


@pytest.mark.parametrize("decl, stmt", [
    ("unsigned i", "A[i] = -i;"),                          # an unsigned iterator wraps
    ("int i", "A[i] = i * 3000000000u / 7;"),             # unsigned int arithmetic, not long
    ("int i", "A[i] = sizeof(i) + i;"),                   # the iterator's size
    ("unsigned char i", "A[i] = i - 300u;"),              # promoted to int, then unsigned int arithmetic
    ("int i", "A[i] = i * 0x80000000;"),                  # an unsuffixed hex constant above INT_MAX is unsigned
])
def test_statements_compute_with_the_iterators_declared_type(tmp_path, decl, stmt):
    original, optimised = outputs(tmp_path, f"""
#include <stdio.h>
double A[200];
int main(void) {{
  {decl};
#pragma scop
  for (i = 0; i < 200; i++)
    {stmt}
#pragma endscop
  for (int k = 0; k < 200; k += 37) printf("%.17g ", A[k]);
  printf("\\n");
  return 0;
}}
""")
    assert original == optimised


def test_the_expected_time_helper_is_defined_wherever_it_is_called(tmp_path):
    # A region whose team estimate is announced (pt_threads_expect) although no loop of its code ended up
    # parallel: the output called the helper without its definition and did not link.
    original, optimised = outputs(tmp_path, """
#include <stdio.h>
#define N 150
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
double A[N][N], x[N], y[N];
int main(void) {
  int i, j, k;
  for (i = 0; i < N; i++) { x[i] = i % 7; y[i] = i % 5; for (j = 0; j < N; j++) A[i][j] = (i + j) % 3; }
#pragma scop
  for (i = 0; i < N; i++)
    for (j = max(0, i - 5); j <= min(N - 1, i + 7); j++)
      A[i][j] = A[i][j] * x[j] + y[i];
  for (i = 0; i < N; i++)
    for (j = 0; j < i; j++)
      for (k = j; k < 2 * j && k < N; k++)
        A[i][k] += A[j][k] * 0.125;
#pragma endscop
  double s = 0; for (i = 0; i < N; i++) for (j = 0; j < N; j++) s += A[i][j] * (i + 1);
  printf("%.17g\\n", s);
  return 0;
}
""")
    assert original == optimised


def test_division_and_remainder_of_negative_values_truncate_as_in_c(tmp_path):
    # isl's floor and mod round toward minus infinity, C's / and % toward zero: (i - 7) / 3 == 0 holds
    # for 5 <= i <= 9 in C.  The model used floor and set A only for 7 <= i <= 9.
    original, optimised = outputs(tmp_path, """
#include <stdio.h>
double A[64], B[64], C[64], D[64];
int main(void) {
  int i;
#pragma scop
  for (i = 0; i < 40; i++) {
    if ((i - 7) / 3 == 0) A[i] = 1;
    if ((i - 20) % 4 == -1) B[i] = 2;
    C[(i - 11) / 4 + 10] += i;
    if ((5 - i) % 3 != 0 && i > 2) D[i] = 3;
  }
#pragma endscop
  for (i = 0; i < 64; i++) printf("%g %g %g %g|", A[i], B[i], C[i], D[i]);
  printf("\\n");
  return 0;
}
""")
    assert original == optimised


@pytest.mark.parametrize("ctype", ["unsigned", "size_t", "unsigned long"])
def test_comparisons_with_unsigned_values_are_cs(tmp_path, ctype):
    # int i < unsigned n compares as unsigned: i = -3 converts to 2^32 - 3 and the loop never runs.  The
    # model compared as integers and ran i from 0.  Now that loop is refused (its condition is no bound
    # for the domain) while the usual loops over unsigned sizes are optimised and agree.
    bad = tmp_path / "bad.c"
    bad.write_text(f"#include <stddef.h>\ndouble A[20];\nvoid k({ctype} n) {{\n  int i;\n#pragma scop\n"
                   f"  for (i = -3; i < n; i++)\n    A[i + 3] = 1;\n#pragma endscop\n}}\n")
    with pytest.raises(Exception, match="not a bound"):
        from polytile.frontends.c import extract
        extract(bad)
    original, optimised = outputs(tmp_path, f"""
#include <stdio.h>
#include <stddef.h>
double A[400], B[400];
void k({ctype} n) {{
  int i, j;
#pragma scop
  for (i = 0; i + 1 < n; i++)
    for (j = 0; 2 * j < n; j++)
      A[i] += B[j] * (i - j);
#pragma endscop
}}
int main(void) {{
  for (int i = 0; i < 400; i++) B[i] = i % 7;
  k(300); k(7);
  double s = 0; for (int i = 0; i < 400; i++) s += A[i] * (i + 1);
  printf("%.17g\\n", s);
  return 0;
}}
""")
    assert original == optimised


def test_a_file_naming_a_generated_helper_gets_a_located_error(tmp_path, capsys):
    # int pt_threads = 3; clashed with the thread-count helper at file scope: the output did not compile.
    src = tmp_path / "k.c"
    src.write_text("double A[2000][2000];\nint pt_threads = 3;\nvoid k(void) {\n  int i, j;\n#pragma scop\n"
                   "  for (i = 0; i < 2000; i++)\n    for (j = 0; j < 2000; j++)\n"
                   "      A[i][j] = A[i][j] * 0.5 + pt_threads;\n#pragma endscop\n}\n")
    code = cli_main(["opt", str(src), "-o", str(tmp_path / "out.c")])
    err = capsys.readouterr().err
    assert code == 1 and f"{src}:2:5:" in err and "pt_threads" in err and "Traceback" not in err, err
    assert not (tmp_path / "out.c").exists()


@pytest.mark.parametrize("loop, stmt", [
    ("for (unsigned i = 0; i < 10; i++)", "A[i] = -i;"),
    ("for (int i = 0; i < 10; i++)", "A[i] = i * 3000000000u;"),
    ("for (unsigned i = 0; i < 10; i++)", "if (i - 5 < 3) A[i] = 1;"),
    ("for (int i = 0; i < 10; i++)", "if (i - 5 < 'u') A[i] = 2;"),
    ("for (int i = 0; i < 10; i++)", "if (i - 5 < 0x80000000) A[i] = 3;"),
])
def test_iterators_declared_in_the_loop_header_keep_their_type(tmp_path, loop, stmt):
    # for (unsigned i = ...) declares an iterator the function's scope does not have: it was read as
    # long (and compared signed), and a character constant 'u' read as an unsigned suffix.
    original, optimised = outputs(tmp_path, f"""
#include <stdio.h>
double A[10];
int main(void) {{
#pragma scop
  {loop}
    {stmt}
#pragma endscop
  for (int k = 0; k < 10; k++) printf("%.17g ", A[k]);
  printf("\\n");
  return 0;
}}
""")
    assert original == optimised


def test_a_final_value_survives_a_loop_that_declares_the_same_name(tmp_path):
    # for (int i ...) declares its own i; the function's i, set by the next loop, must still end at 7.
    original, optimised = outputs(tmp_path, """
#include <stdio.h>
#define N 10
double A[N];
int main(void) {
  int i = -1;
#pragma scop
  for (int i = 0; i < N; i++)
    A[i] = i;
  for (i = 0; i < N - 3; i++)
    A[i] += 1;
#pragma endscop
  printf("i=%d %g\\n", i, A[3]);
  return 0;
}
""")
    assert original == optimised == "i=7 4\n"


def test_a_file_may_use_pt_names_the_generated_code_does_not(tmp_path):
    original, optimised = outputs(tmp_path, """
#include <stdio.h>
double pt_data[300][300];
int main(void) {
  int i, j;
  for (i = 0; i < 300; i++) for (j = 0; j < 300; j++) pt_data[i][j] = i - j;
#pragma scop
  for (i = 0; i < 300; i++)
    for (j = 0; j < 300; j++)
      pt_data[i][j] = pt_data[i][j] * 2 + 1;
#pragma endscop
  printf("%g %g\\n", pt_data[7][3], pt_data[299][0]);
  return 0;
}
""")
    assert original == optimised == "9 599\n"


@pytest.mark.parametrize("decl", ["unsigned n = 300;", "size_t n = 300;"])
def test_loops_bounded_by_an_unsigned_size_less_one_are_optimised(tmp_path, decl):
    # i < n - 1 with an unsigned n wraps only at n = 0, where the original loop overflows its int
    # iterator (undefined): the loop is modelled as C runs it for every n >= 1, not refused.
    original, optimised = outputs(tmp_path, f"""
#include <stdio.h>
#include <stddef.h>
double A[400][400];
int main(void) {{
  {decl}
  int i, j;
#pragma scop
  for (i = 0; i < n - 1; i++)
    for (j = 0; j < n - 2; j++)
      A[i][j] = A[i][j] * 0.5 + i - j;
#pragma endscop
  double s = 0; for (i = 0; i < 400; i++) for (j = 0; j < 400; j++) s += A[i][j] * (i + 1);
  printf("%.17g\\n", s);
  return 0;
}}
""")
    assert original == optimised


@pytest.mark.parametrize("ctype", ["unsigned", "int", "long"])
def test_a_function_called_with_an_empty_size_runs_as_written(tmp_path, ctype):
    # A function argument that bounds the loops is assumed >= 1 by the schedule and code generation
    # (tiles of `n - 1`, a peeled first iteration); f(0, ...) crashed at (n - 1) / 32 with an unsigned n.
    # The optimised code now runs behind a test of that assumption, the original statements elsewhere.
    original, optimised = outputs(tmp_path, f"""
#include <stdio.h>
static void mm({ctype} n, double A[restrict 64][64], double B[restrict 64][64], double C[restrict 64][64]) {{
#pragma scop
  for ({ctype} i = 0; i < n; i++)
    for ({ctype} j = 0; j < n; j++) {{
      C[i][j] = 0.0;
      for ({ctype} l = 0; l < n; l++)
        C[i][j] += A[i][l] * B[l][j];
    }}
#pragma endscop
}}
static void tri({ctype} n, double A[restrict 64][64], double B[restrict 64]) {{
  int i, j;
#pragma scop
  for (i = 0; i < n; i++)
    for (j = 0; j <= i; j++)
      A[i][j] = A[i][j] + B[j] * A[j][i];
  B[0] = 1.5;
  for (i = 1; i < n; i++)
    B[i] = B[i - 1] * 0.5 + A[i][0];
#pragma endscop
  printf("i=%d\\n", i);
}}
static double A[64][64], B[64][64], C[64][64], D[64];
static void show(void) {{
  double t = 0;
  for (int i = 0; i < 64; i++) {{ t += D[i]; for (int j = 0; j < 64; j++) t += (C[i][j] + A[i][j]) * (i + 1); }}
  printf("%.17g\\n", t);
}}
int main(void) {{
  for (int i = 0; i < 64; i++) {{ D[i] = i; for (int j = 0; j < 64; j++) {{ A[i][j] = i - j; B[i][j] = i + j; C[i][j] = 7; }} }}
  mm(0, A, B, C); tri(0, A, D); show();
  mm(1, A, B, C); tri(1, A, D); show();
  mm(50, A, B, C); tri(37, A, D); show();
  return 0;
}}
""")
    assert original == optimised
    assert original.count("\n") == 6
    text = (tmp_path / "p.opt.c").read_text()
    assert text.count("if (n >= 1)\n") == 2


def test_no_run_time_test_where_the_code_shows_the_size_is_positive(tmp_path):
    # An affine guard around the region already says n >= 1: nothing to test at run time.
    original, optimised = outputs(tmp_path, """
#include <stdio.h>
static void f(int n, double A[restrict 100]) {
  if (n > 0) {
#pragma scop
    for (int i = 0; i < n; i++)
      A[i] = A[i] * 2.0 + 1.0;
#pragma endscop
  }
}
int main(void) {
  double A[100];
  for (int i = 0; i < 100; i++) A[i] = i;
  f(0, A); f(77, A);
  double t = 0; for (int i = 0; i < 100; i++) t += A[i] * (i + 1);
  printf("%.17g\\n", t);
  return 0;
}
""")
    assert original == optimised
    assert "if (n >= 1)\n" not in (tmp_path / "p.opt.c").read_text()


_GUARDED_MM = """
#include <stdio.h>
static void shrink(unsigned *p) {{ *p -= 1; }}
static unsigned g;
static void mm(unsigned n, double A[restrict 64][64], double B[restrict 64][64], double C[restrict 64][64]) {{
  if ({guard}) {{
    {between}
#pragma scop
  for (unsigned i = 0; i < {n}; i++)
    for (unsigned j = 0; j < {n}; j++) {{
      C[i][j] = 0.0;
      for (unsigned l = 0; l < {n}; l++)
        C[i][j] += A[i][l] * B[l][j];
    }}
#pragma endscop
  }}
}}
static double A[64][64], B[64][64], C[64][64];
int main(void) {{
  for (int i = 0; i < 64; i++) for (int j = 0; j < 64; j++) {{ A[i][j] = i - j; B[i][j] = i + j; C[i][j] = 7; }}
  mm(0, A, B, C); mm(1, A, B, C); mm(50, A, B, C);
  double t = 0; for (int i = 0; i < 64; i++) for (int j = 0; j < 64; j++) t += C[i][j] * (i + 1);
  printf("%.17g\\n", t);
  return 0;
}}
"""


@pytest.mark.parametrize("guard, between, n", [
    ("n > 0", "shrink(&n);", "n"),          # the guard held before the call changed n through its address
    ("n - 1 >= 0", "", "n"),                # unsigned: true for every n, 0 included
    ("g > 0", "g = n - 1 + 0 * shrink_g();", "g"),  # a global: any call may change it
])
def test_a_guard_that_may_not_hold_at_the_region_proves_nothing(tmp_path, guard, between, n):
    # An enclosing `if` gives the region's context its facts (and spares the run-time `n >= 1` test); these
    # three do not hold where the region starts, and the optimised code segfaulted at n = 0.
    text = _GUARDED_MM.format(guard=guard, between=between, n=n)
    if n == "g":
        text = text.replace("static unsigned g;", "static unsigned g = 5;\nstatic int shrink_g(void) { return 0; }")
        text = text.replace("g = n - 1 + 0 * shrink_g();", "g = n;")
    original, optimised = outputs(tmp_path, text)
    assert original == optimised


def test_unsigned_sizes_in_generated_loop_bounds_do_not_wrap(tmp_path):
    # isl computes with integers: a bound `m - 3` (from i < m - 2) is -1 at m = 2, but with a size_t m the
    # generated loops computed 2^64 - 1 and ran off the arrays.  They now read unsigned parameters as long
    # copies; the statements cast them back (`+ m` stays size_t arithmetic).
    original, optimised = outputs(tmp_path, """#include <stdio.h>
#include <stddef.h>
static void f(size_t n, size_t m, double A[restrict 300][300], double B[restrict 300][300], double x[restrict 300]) {
#pragma scop
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++)
      A[i][j] = A[i][j] * 0.5 + B[j][i];
  for (size_t i = 0; i < m - 2; i++)
    for (size_t k = 0; k < m - 2; k++)
      x[i] += B[i][k] * 0.25 + m;
#pragma endscop
}
static double A[300][300], B[300][300], x[300];
int main(void) {
  for (int i = 0; i < 300; i++) { x[i] = i; for (int j = 0; j < 300; j++) { A[i][j] = i - j; B[i][j] = i + j; } }
  f(280, 2, A, B, x); f(250, 40, A, B, x);
  double t = 0; for (int i = 0; i < 300; i++) { t += x[i]; for (int j = 0; j < 300; j++) t += A[i][j] * (i + 1); }
  printf("%.17g\\n", t);
  return 0;
}
""")
    assert original == optimised
    text = (tmp_path / "p.opt.c").read_text()
    assert "const long m = pt_sp_m;" in text and "((size_t)m)" in text


def test_a_function_argument_fixed_by_dims_is_tested_at_run_time(tmp_path):
    # --dims n=50 generates loops for n = 50 only (a fixed macro gets an #if/#error guard): other calls
    # computed with 50 silently.  Now `if (n == 50)`, the region as written elsewhere.
    original, optimised = outputs(tmp_path, """
#include <stdio.h>
static void f(int n, double A[restrict 100], double B[restrict 100]) {
#pragma scop
  double s;
  for (int i = 0; i < n; i++) {
    s = A[i] * 2.0;
    B[i] = s + 1.0;
  }
#pragma endscop
}
int main(void) {
  double A[100], B[100];
  for (int i = 0; i < 100; i++) { A[i] = i; B[i] = -1; }
  f(0, A, B); f(-3, A, B); f(7, A, B); f(50, A, B);
  double t = 0; for (int i = 0; i < 100; i++) t += B[i] * (i + 1);
  printf("%.17g\\n", t);
  return 0;
}
""", "--dims", "n=50")
    assert original == optimised
    assert "if (n == 50)\n" in (tmp_path / "p.opt.c").read_text()


def test_a_mark_on_a_statement_without_instances_marks_no_other_statements_loop(tmp_path):
    # B[k] += i over an empty i loop: isl placed the empty statement beside S1, and the simd mark checked
    # for it alone (no instances, no dependences) landed on S1's k loop, which carries a dependence, around
    # a parallel loop (gcc refused the nesting; without it the lanes would have run k = 0 and k = 2 together).
    original, optimised = outputs(tmp_path, """#include <stdio.h>
long A[24][24][24];
long B[96];
void kern(int m) {
#pragma scop
  for (int i = 2; i < (m + 1) / 2; i++) {
    for (int j = 2; j < 4; j++)
      A[j + 1][2 * i][j] += A[j - 1][i + j][i + 1];
    for (int k = 0; k <= 6; k++)
      for (int j = 0; j < 2 * m; j++)
        A[3][k + i + 1][j + 2] = i + A[k + 1][i + 1][m + 3];
  }
  for (int k = 2; k < 10; k++)
    for (int i = k; i < k; i++)
      B[k] += i;
#pragma endscop
}
int main(void) {
  for (int i = 0; i < 24; i++) for (int j = 0; j < 24; j++) for (int k = 0; k < 24; k++) A[i][j][k] = (i * 5 + j * 7 + k * 9) % 11;
  for (int m = 0; m < 10; m++) kern(m);
  long s = 0;
  for (int i = 0; i < 24; i++) for (int j = 0; j < 24; j++) for (int k = 0; k < 24; k++) s += A[i][j][k] * ((i * 3 + j * 5 + k * 7) % 13 + 1);
  printf("%ld\\n", s);
  return 0;
}
""")
    assert original == optimised


def test_a_scalar_isl_cannot_take_the_exact_dataflow_of_is_not_expanded(tmp_path):
    # isl's compute_flow with must sources fails on some strided domains ("affine expression involves some
    # of the domain dimensions"): the scalar expansion asked it and stopped opt with an internal error.
    original, optimised = outputs(tmp_path, """#include <stdio.h>
#include <stddef.h>
double A[64], s;
void kern(int n) {
#pragma scop
  if (n > 2)
    for (long k = n - 1; k >= 0; k -= 2)
      for (long j = 0; j < 3 && j < n / 2; j++)
        for (long l = k; l <= 10; l++)
          s -= A[j];
#pragma endscop
}
int main(void) {
  for (int i = 0; i < 64; i++) A[i] = i % 7;
  for (int n = 0; n < 8; n++) kern(n);
  printf("%.17g\\n", s);
  return 0;
}
""")
    assert original == optimised


@pytest.mark.parametrize("itype", ["unsigned", "int"])
def test_a_wrapped_unsigned_bound_beside_another_bound_is_modelled_exactly(tmp_path, itype):
    # j < N - 2 with N = 1 compares against UINT_MAX (always true): the loop runs to j < 10. Loop conditions
    # were modelled with operands of one sign only (the wrapped case of a lone bound runs a signed
    # iterator into overflow), which made this loop empty: a silent wrong result found by fuzzing.
    original, optimised = outputs(tmp_path, f"""
#include <stdio.h>
#define N 1
unsigned A[64][64];
void kern(long m) {{
  {itype} j, l;
#pragma scop
  for (l = 1; l <= 10; l++)
    for (j = l; j < 10 && j < N - 2; j++)
      A[l + 1][2 * j + 1] -= A[3][l] + m;
#pragma endscop
}}
int main(void) {{
  for (int a = 0; a < 64; a++) for (int b = 0; b < 64; b++) A[a][b] = (a * 5 + b * 7) % 11;
  kern(2); kern(5);
  unsigned long s = 0;
  for (int a = 0; a < 64; a++) for (int b = 0; b < 64; b++) s = s * 3 + A[a][b];
  printf("%lu\\n", s);
  return 0;
}}
""")
    assert original == optimised
