/* gemver: A += u1 v1' + u2 v2'; x += beta A' y + z; w += alpha A x.  Four sweeps over A, the
   second one down its columns; the size as a function argument. */
void kernel_gemver(int n, double alpha, double beta, double A[restrict n][n], double u1[restrict n],
                   double v1[restrict n], double u2[restrict n], double v2[restrict n], double w[restrict n],
                   double x[restrict n], double y[restrict n], double z[restrict n])
{
  int i, j;
#pragma scop
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      A[i][j] = A[i][j] + u1[i] * v1[j] + u2[i] * v2[j];
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      x[i] = x[i] + beta * A[j][i] * y[j];
  for (i = 0; i < n; i++)
    x[i] = x[i] + z[i];
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      w[i] = w[i] + alpha * A[i][j] * x[j];
#pragma endscop
}
