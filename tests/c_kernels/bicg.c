/* bicg: the two matrix-vector products of a BiCG step, s = A^T r and q = A p, taken in one pass over
 * the rows of A (s gathers column sums across rows; q is one in-order dot product per row). */
void kernel_bicg(int m, int n, double A[restrict n][m], double s[restrict m], double q[restrict n],
                 double p[restrict m], double r[restrict n])
{
#pragma scop
  for (int j = 0; j < m; j++)
    s[j] = 0.0;
  for (int i = 0; i < n; i++) {
    q[i] = 0.0;
    for (int j = 0; j < m; j++) {
      s[j] = s[j] + r[i] * A[i][j];
      q[i] = q[i] + A[i][j] * p[j];
    }
  }
#pragma endscop
}
