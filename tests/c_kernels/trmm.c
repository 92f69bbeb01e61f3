/* trmm: B = alpha * A^T * B with A unit lower triangular (in place on B). */
void kernel_trmm(int m, int n, double alpha, double A[restrict m][m], double B[restrict m][n])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++) {
      for (k = i + 1; k < m; k++)
        B[i][j] += A[k][i] * B[k][j];
      B[i][j] = alpha * B[i][j];
    }
#pragma endscop
}
