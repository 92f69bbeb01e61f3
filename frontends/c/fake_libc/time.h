#include "_fake_types.h"
#define CLOCKS_PER_SEC 1000000L
struct timespec { time_t tv_sec; long tv_nsec; };
clock_t clock(void);
time_t time(time_t *t);
int clock_gettime(int clk, struct timespec *ts);
#define CLOCK_MONOTONIC 1
#define CLOCK_REALTIME 0
