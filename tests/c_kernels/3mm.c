/* 3mm: G = (A * B) * (C * D), three products with two temporaries; sizes as macros. */
#define NI 11
#define NJ 13
#define NK 9
#define NL 10
#define NM 12

void kernel_3mm(double E[NI][NJ], double A[NI][NK], double B[NK][NJ], double F[NJ][NL], double C[NJ][NM],
                double D[NM][NL], double G[NI][NL])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < NI; i++)
    for (j = 0; j < NJ; j++) {
      E[i][j] = 0.0;
      for (k = 0; k < NK; ++k)
        E[i][j] += A[i][k] * B[k][j];
    }
  for (i = 0; i < NJ; i++)
    for (j = 0; j < NL; j++) {
      F[i][j] = 0.0;
      for (k = 0; k < NM; ++k)
        F[i][j] += C[i][k] * D[k][j];
    }
  for (i = 0; i < NI; i++)
    for (j = 0; j < NL; j++) {
      G[i][j] = 0.0;
      for (k = 0; k < NJ; ++k)
        G[i][j] += E[i][k] * F[k][j];
    }
#pragma endscop
}
