/* syr2k: C = alpha * (A * B^T + B * A^T) + beta * C on the lower triangle (j <= i); each row is scaled,
 * then the rank-2 updates are added in k order. */
void kernel_syr2k(int n, int m, double alpha, double beta, double C[restrict n][n], double A[restrict n][m],
                  double B[restrict n][m])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < n; i++) {
    for (j = 0; j <= i; j++)
      C[i][j] *= beta;
    for (k = 0; k < m; k++)
      for (j = 0; j <= i; j++)
        C[i][j] += A[j][k] * alpha * B[i][k] + B[j][k] * alpha * A[i][k];
  }
#pragma endscop
}
