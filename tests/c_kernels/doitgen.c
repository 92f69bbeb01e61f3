/* doitgen: multiresolution analysis kernel, PolyBench 4.2.1's loops: for every (r, q), a vector-matrix
 * product into the temporary sum[] (which every outer loop carries), copied back into A. */
void kernel_doitgen(int nr, int nq, int np, double A[restrict nr][nq][np], double C4[restrict np][np],
                    double sum[restrict np])
{
  int r, q, p, s;
#pragma scop
  for (r = 0; r < nr; r++)
    for (q = 0; q < nq; q++) {
      for (p = 0; p < np; p++) {
        sum[p] = 0.0;
        for (s = 0; s < np; s++)
          sum[p] += A[r][q][s] * C4[s][p];
      }
      for (p = 0; p < np; p++)
        A[r][q][p] = sum[p];
    }
#pragma endscop
}
