#include "_fake_types.h"
int usleep(unsigned int usec);
unsigned int sleep(unsigned int seconds);
