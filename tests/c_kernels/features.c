/* Constructs beyond the PolyBench set: min/max and ternary bounds, strides, floor division,
 * decreasing loops, affine if/else, scalar temporaries, two regions in one function. */
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static inline int max(int a, int b) { return a > b ? a : b; }

void kernel_features(int n, double *restrict x, double *restrict y, double (*restrict M)[n])
{
  int i, j;
  double acc = 0.0;
#pragma scop
  for (i = 0; i < n; i += 2)
    for (j = max(0, i - 2); j <= MIN(i + 1, n - 1); j++)
      M[i][j] = x[j] + i;
  for (i = n - 1; i >= 1; i -= 3)
    if (i % 2 == 0 && i > n / 2)
      y[i] = x[(i - 1) / 2];
    else
      y[i] = -x[i];
  for (i = 0; i < n; i++) {
    acc += x[i] * y[i];
    if (!(i < 2 || i >= n - 2))
      y[i] = acc;
  }
#pragma endscop
  x[0] = acc;
#pragma scop
  for (i = 0; i < (n + 1) / 2; i++)
    x[2 * i] = x[2 * i] * 0.5;
#pragma endscop
}
