/* gemm, split: C = alpha * A * B + beta * C with the beta scaling in its own loop nest before the
 * product, and the product in i-k-j order with alpha * A[i][k] held in a scalar across the j loop
 * (the scalar is written in the k loop and read in the j loop below it; same rounding as
 * alpha * A[i][k] * B[k][j], which C evaluates left to right). */
void kernel_gemm_split(int ni, int nj, int nk, double alpha, double beta, double C[restrict ni][nj],
                       double A[restrict ni][nk], double B[restrict nk][nj])
{
  double t;
#pragma scop
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++)
      C[i][j] = beta * C[i][j];
  for (int i = 0; i < ni; i++)
    for (int k = 0; k < nk; k++) {
      t = alpha * A[i][k];
      for (int j = 0; j < nj; j++)
        C[i][j] += t * B[k][j];
    }
#pragma endscop
}
