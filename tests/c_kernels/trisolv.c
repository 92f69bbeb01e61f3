/* trisolv: back substitution U x = b, rows from the bottom (decreasing loop, a scalar temporary). */
void kernel_trisolv(int n, double U[restrict n][n], double *restrict x, double *restrict b)
{
#pragma scop
  for (int i = n - 1; i >= 0; i--) {
    double s = b[i];
    for (int j = i + 1; j < n; j++)
      s -= U[i][j] * x[j];
    x[i] = s / U[i][i];
  }
#pragma endscop
}
