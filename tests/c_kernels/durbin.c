/* durbin: Levinson-Durbin recursion, PolyBench 4.2.1's loops with fixed bounds (POLYBENCH_USE_SCALAR_LB):
 * a reduction and two vector updates of at most N - 1 elements inside the sequential k loop. */
#define N 400

void kernel_durbin(double r[restrict N], double y[restrict N])
{
  double z[N];
  double alpha, beta, sum;
  int i, k;
#pragma scop
  y[0] = -r[0];
  beta = 1.0;
  alpha = -r[0];
  for (k = 1; k < N; k++) {
    beta = (1 - alpha * alpha) * beta;
    sum = 0.0;
    for (i = 0; i < k; i++)
      sum += r[k - i - 1] * y[i];
    alpha = -(r[k] + sum) / beta;
    for (i = 0; i < k; i++)
      z[i] = y[i] + alpha * y[k - i - 1];
    for (i = 0; i < k; i++)
      y[i] = z[i];
    y[k] = alpha;
  }
#pragma endscop
}
