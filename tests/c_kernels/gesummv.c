/* gesummv: y = alpha A x + beta B x; two in-order dot products per row, in one loop. */
void kernel_gesummv(int n, double alpha, double beta, double A[restrict n][n], double B[restrict n][n], double tmp[restrict n], double x[restrict n], double y[restrict n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    tmp[i] = 0.0;
    y[i] = 0.0;
    for (int j = 0; j < n; j++) {
      tmp[i] = A[i][j] * x[j] + tmp[i];
      y[i] = B[i][j] * x[j] + y[i];
    }
    y[i] = alpha * tmp[i] + beta * y[i];
  }
#pragma endscop
}
