/* atax: y = A^T (A x); per row an in-order dot product, then a row update of y. */
void kernel_atax(int m, int n, double A[restrict m][n], double x[restrict n], double y[restrict n], double tmp[restrict m])
{
#pragma scop
  for (int i = 0; i < n; i++)
    y[i] = 0;
  for (int i = 0; i < m; i++) {
    tmp[i] = 0.0;
    for (int j = 0; j < n; j++)
      tmp[i] = tmp[i] + A[i][j] * x[j];
    for (int j = 0; j < n; j++)
      y[j] = y[j] + A[i][j] * tmp[i];
  }
#pragma endscop
}
