#include "_fake_types.h"
#define offsetof(type, member) ((size_t)0)
