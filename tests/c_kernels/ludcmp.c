/* ludcmp: solve A x = b by an in-place LU factorisation (no pivoting) followed by forward substitution
 * (L y = b, L unit lower) and backward substitution (U x = y).  Every inner product runs through the
 * one scalar w, so the statements around each k / j loop are ordered by w as well as by A. */
void kernel_ludcmp(int n, double A[restrict n][n], double b[restrict n], double x[restrict n],
                   double y[restrict n])
{
  int i, j, k;
  double w;
#pragma scop
  for (i = 0; i < n; i++) {
    for (j = 0; j < i; j++) {  /* L's row i */
      w = A[i][j];
      for (k = 0; k < j; k++)
        w -= A[i][k] * A[k][j];
      A[i][j] = w / A[j][j];
    }
    for (j = i; j < n; j++) {  /* U's row i */
      w = A[i][j];
      for (k = 0; k < i; k++)
        w -= A[i][k] * A[k][j];
      A[i][j] = w;
    }
  }
  for (i = 0; i < n; i++) {
    w = b[i];
    for (j = 0; j < i; j++)
      w -= A[i][j] * y[j];
    y[i] = w;
  }
  for (i = n - 1; i >= 0; i--) {
    w = y[i];
    for (j = i + 1; j < n; j++)
      w -= A[i][j] * x[j];
    x[i] = w / A[i][i];
  }
#pragma endscop
}
