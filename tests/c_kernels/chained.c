/* Chained assignments, as in PolyBench's deriche ('a1 = a5 = k;'): one statement per assignment, the
 * innermost first, each outer one storing the value the inner target now holds (converted to its type). */
void kernel_chained(int n, double x[restrict n], double y[restrict n], int q[restrict n], double A[restrict n][n])
{
  double s, t;
  float f;
  int k;
#pragma scop
  s = t = 0.25;
  for (int i = 0; i < n; i++) {
    y[i] = q[i] = x[i] * 3.7 - y[i] + s;  /* through an int: y[i] gets the truncated value */
    s = t = t * 0.5 + y[i];
    k = q[i] += 3;
    x[i] = f = x[i] / 3.0 + k;            /* through a float */
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      A[i][j] = A[j][i] = A[i][j] * 0.5 + x[j];  /* one cell when i == j: the same value twice */
  y[0] += s = t = s + f;
#pragma endscop
}
