/* lu-temp: an in-place LU factorisation and a forward solve, every dot product accumulated in one
 * scalar temporary t.  The columns c of a row of U are independent, but all share t's cell: only
 * expanding t (one cell per column) lets the q loop run outside c with c unit-stride innermost. */
void kernel_lu_temp(int n, double M[restrict n][n], double rhs[restrict n], double z[restrict n])
{
  double t;
#pragma scop
  for (int r = 0; r < n; r++) {
    for (int c = 0; c < r; c++) {
      t = M[r][c];
      for (int q = 0; q < c; q++)
        t -= M[r][q] * M[q][c];
      M[r][c] = t / M[c][c];
    }
    for (int c = r; c < n; c++) {
      t = M[r][c];
      for (int q = 0; q < r; q++)
        t -= M[r][q] * M[q][c];
      M[r][c] = t;
    }
  }
  for (int r = 0; r < n; r++) {
    t = rhs[r];
    for (int c = 0; c < r; c++)
      t -= M[r][c] * z[c];
    z[r] = t;
  }
#pragma endscop
}
