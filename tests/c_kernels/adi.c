/* adi: alternating-direction implicit solver of 2-D heat diffusion.  Each time step solves one
 * tridiagonal system per column (into v), then one per row (back into u), each by a forward
 * elimination (p, q along j) and a back substitution (j decreasing).  The coefficients are scalars
 * computed inside the region (from the sizes, through casts), so every statement reads them. */
void kernel_adi(int tsteps, int n, double u[restrict n][n], double v[restrict n][n], double p[restrict n][n],
                double q[restrict n][n])
{
  double dx, dy, dt, b1, b2, mul1, mul2, a, b, c, d, e, f;
  int t, i, j;
#pragma scop
  dx = 1.0 / (double)n;
  dy = 1.0 / (double)n;
  dt = 1.0 / (double)tsteps;
  b1 = 2.0;
  b2 = 1.0;
  mul1 = b1 * dt / (dx * dx);
  mul2 = b2 * dt / (dy * dy);
  a = -mul1 / 2.0;
  b = 1.0 + mul1;
  c = a;
  d = -mul2 / 2.0;
  e = 1.0 + mul2;
  f = d;
  for (t = 1; t <= tsteps; t++) {
    /* columns: u's column i (read across rows j) gives v's column i */
    for (i = 1; i < n - 1; i++) {
      v[0][i] = 1.0;
      p[i][0] = 0.0;
      q[i][0] = v[0][i];
      for (j = 1; j < n - 1; j++) {
        p[i][j] = -c / (a * p[i][j - 1] + b);
        q[i][j] = (-d * u[j][i - 1] + (1.0 + 2.0 * d) * u[j][i] - f * u[j][i + 1] - a * q[i][j - 1])
                  / (a * p[i][j - 1] + b);
      }
      v[n - 1][i] = 1.0;
      for (j = n - 2; j >= 1; j--)
        v[j][i] = p[i][j] * v[j + 1][i] + q[i][j];
    }
    /* rows: v's row i gives u's row i */
    for (i = 1; i < n - 1; i++) {
      u[i][0] = 1.0;
      p[i][0] = 0.0;
      q[i][0] = u[i][0];
      for (j = 1; j < n - 1; j++) {
        p[i][j] = -f / (d * p[i][j - 1] + e);
        q[i][j] = (-a * v[i - 1][j] + (1.0 + 2.0 * a) * v[i][j] - c * v[i + 1][j] - d * q[i][j - 1])
                  / (d * p[i][j - 1] + e);
      }
      u[i][n - 1] = 1.0;
      for (j = n - 2; j >= 1; j--)
        u[i][j] = p[i][j] * u[i][j + 1] + q[i][j];
    }
  }
#pragma endscop
}
