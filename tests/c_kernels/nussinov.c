/* nussinov: RNA secondary structure by dynamic programming.  table[i][j] (i < j) is the best score of
 * the subsequence i..j: the best of dropping either end, pairing i with j (bases b1, b2 pair when
 * b1 + b2 == 3, never when adjacent), or splitting at k.  Integer data, max-of reductions through
 * ternary macros, affine ifs on the loop counters, and i decreasing. */
#define PAIR(b1, b2) ((b1) + (b2) == 3 ? 1 : 0)
#define BEST(s1, s2) ((s1) >= (s2) ? (s1) : (s2))

void kernel_nussinov(int n, char seq[restrict n], int table[restrict n][n])
{
  int i, j, k;
#pragma scop
  for (i = n - 1; i >= 0; i--)
    for (j = i + 1; j < n; j++) {
      if (j - 1 >= 0)
        table[i][j] = BEST(table[i][j], table[i][j - 1]);
      if (i + 1 < n)
        table[i][j] = BEST(table[i][j], table[i + 1][j]);
      if (j - 1 >= 0 && i + 1 < n) {
        if (i < j - 1)
          table[i][j] = BEST(table[i][j], table[i + 1][j - 1] + PAIR(seq[i], seq[j]));
        else
          table[i][j] = BEST(table[i][j], table[i + 1][j - 1]);
      }
      for (k = i + 1; k < j; k++)
        table[i][j] = BEST(table[i][j], table[i][k] + table[k + 1][j]);
    }
#pragma endscop
}
