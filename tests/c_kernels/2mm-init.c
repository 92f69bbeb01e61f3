/* 2mm, initialised apart: D = alpha * A * B * C + beta * D with run-time sizes, tmp zeroed and D scaled
 * in loop nests of their own, and both products accumulated in i-k-j order (the reduction loop k in
 * the middle, so the innermost j loop updates a whole row). */
void kernel_2mm_init(int ni, int nj, int nk, int nl, double alpha, double beta, double tmp[restrict ni][nj],
                     double A[restrict ni][nk], double B[restrict nk][nj], double C[restrict nj][nl],
                     double D[restrict ni][nl])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < ni; i++)
    for (j = 0; j < nj; j++)
      tmp[i][j] = 0.0;
  for (i = 0; i < ni; i++)
    for (k = 0; k < nk; k++)
      for (j = 0; j < nj; j++)
        tmp[i][j] += alpha * A[i][k] * B[k][j];
  for (i = 0; i < ni; i++)
    for (j = 0; j < nl; j++)
      D[i][j] *= beta;
  for (i = 0; i < ni; i++)
    for (k = 0; k < nj; k++)
      for (j = 0; j < nl; j++)
        D[i][j] += tmp[i][k] * C[k][j];
#pragma endscop
}
