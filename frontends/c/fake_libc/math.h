#define M_E 2.7182818284590452354
#define M_PI 3.14159265358979323846
#define M_SQRT2 1.41421356237309504880
#define HUGE_VAL (1e308 * 10.0)
#define INFINITY (1e308 * 10.0)
#define NAN (0.0 / 0.0)
double sqrt(double x);    float sqrtf(float x);
double cbrt(double x);    float cbrtf(float x);
double exp(double x);     float expf(float x);
double exp2(double x);    float exp2f(float x);
double expm1(double x);   float expm1f(float x);
double log(double x);     float logf(float x);
double log2(double x);    float log2f(float x);
double log10(double x);   float log10f(float x);
double log1p(double x);   float log1pf(float x);
double pow(double x, double y);   float powf(float x, float y);
double sin(double x);     float sinf(float x);
double cos(double x);     float cosf(float x);
double tan(double x);     float tanf(float x);
double asin(double x);    float asinf(float x);
double acos(double x);    float acosf(float x);
double atan(double x);    float atanf(float x);
double atan2(double y, double x); float atan2f(float y, float x);
double sinh(double x);    float sinhf(float x);
double cosh(double x);    float coshf(float x);
double tanh(double x);    float tanhf(float x);
double fabs(double x);    float fabsf(float x);
double floor(double x);   float floorf(float x);
double ceil(double x);    float ceilf(float x);
double round(double x);   float roundf(float x);
double trunc(double x);   float truncf(float x);
double rint(double x);    float rintf(float x);
double fmod(double x, double y);  float fmodf(float x, float y);
double fmin(double x, double y);  float fminf(float x, float y);
double fmax(double x, double y);  float fmaxf(float x, float y);
double fma(double x, double y, double z); float fmaf(float x, float y, float z);
double hypot(double x, double y); float hypotf(float x, float y);
double erf(double x);     float erff(float x);
double copysign(double x, double y); float copysignf(float x, float y);
