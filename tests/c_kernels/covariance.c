/* covariance-style statistics: column means, standard deviations (sqrt), normalised covariance. */
#include <math.h>

void kernel_covariance(int m, int n, double float_n, double data[restrict n][m], double cov[restrict m][m],
                       double mean[restrict m], double stddev[restrict m])
{
  int i, j, k;
  double eps = 0.1;
#pragma scop
  for (j = 0; j < m; j++) {
    mean[j] = 0.0;
    for (i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] /= float_n;
  }
  for (j = 0; j < m; j++) {
    stddev[j] = 0.0;
    for (i = 0; i < n; i++)
      stddev[j] += (data[i][j] - mean[j]) * (data[i][j] - mean[j]);
    stddev[j] /= float_n;
    stddev[j] = sqrt(stddev[j]);
    stddev[j] = stddev[j] <= eps ? 1.0 : stddev[j];
  }
  for (i = 0; i < n; i++)
    for (j = 0; j < m; j++)
      data[i][j] -= mean[j];
  for (i = 0; i < m; i++)
    for (j = i; j < m; j++) {
      cov[i][j] = 0.0;
      for (k = 0; k < n; k++)
        cov[i][j] += data[k][i] * data[k][j] / stddev[i];
      cov[j][i] = cov[i][j];
    }
#pragma endscop
}
