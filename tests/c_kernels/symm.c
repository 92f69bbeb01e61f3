/* symm: C = alpha * A * B + beta * C with A symmetric and only its lower triangle read.  Row i of A
 * contributes A[i][k] (k < i) twice: to the rows k < i of C as the upper triangle's A[k][i], and to
 * row i through the scalar accumulator acc.  The scalar makes the j loop carry nothing but the k loop
 * carry acc; C[k][j] is updated by every later i (a chain along i). */
void kernel_symm(int m, int n, double alpha, double beta, double C[restrict m][n], double A[restrict m][m],
                 double B[restrict m][n])
{
  double acc;
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      acc = 0.0;
      for (int k = 0; k < i; k++) {
        C[k][j] += alpha * B[i][j] * A[i][k];
        acc += B[k][j] * A[i][k];
      }
      C[i][j] = beta * C[i][j] + alpha * B[i][j] * A[i][i] + alpha * acc;
    }
#pragma endscop
}
