/* syrk, scaled apart: C = alpha * A * A^T + beta * C on the lower triangle, the beta scaling in its own
 * triangular loop nest, then each cell a dot product in i-j-k order (k innermost, j <= i bounded by
 * the outer counter). */
void kernel_syrk_lower(int n, int m, double alpha, double beta, double C[restrict n][n], double A[restrict n][m])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < n; i++)
    for (j = 0; j <= i; j++)
      C[i][j] *= beta;
  for (i = 0; i < n; i++)
    for (j = 0; j <= i; j++)
      for (k = 0; k < m; k++)
        C[i][j] += alpha * A[i][k] * A[j][k];
#pragma endscop
}
