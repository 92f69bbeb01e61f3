/* mvt: x1 += A y1 (rows of A) and x2 += A' y2 (columns of A), two independent sweeps. */
void kernel_mvt(int n, double x1[restrict n], double x2[restrict n], double y_1[restrict n],
                double y_2[restrict n], double A[restrict n][n])
{
  int i, j;
#pragma scop
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      x1[i] = x1[i] + A[i][j] * y_1[j];
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      x2[i] = x2[i] + A[j][i] * y_2[j];
#pragma endscop
}
