typedef unsigned short dlc_bf16;
typedef unsigned short dlc_f16;
#define DLC_RESTRICT __restrict__
static __device__ __forceinline__ float dlc_clamp(float x, float a, float b) { return x < a ? a : (x > b ? b : x); }
static __device__ __forceinline__ unsigned long long dlc_splitmix(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static __device__ __forceinline__ float dlc_exp(float x0) {
  float x = dlc_clamp(x0, -87.3f, 88.7f);
  float n = (x * 1.442695f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.69314575f - n * 1.4286068e-6f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.16666667f + r * (0.041666668f + r * (0.008333334f + r * 0.0013888889f)))));
  int e = (int)n;
  float y = p * __uint_as_float((unsigned int)(e + 127) << 23);
  return x0 < -87.3f ? 0.0f : (x0 > 88.7f ? __int_as_float(0x7f800000) : y);
}
static __device__ __forceinline__ float dlc_erf(float x) {
  x = dlc_clamp(x, -3.9f, 3.9f);
  float z = x * x;
  float pz = 2.0148377e-8f;
  pz = fmaf(pz, z, -1.963202e-6f);
  pz = fmaf(pz, z, 0.00014059673f);
  pz = fmaf(pz, z, 0.0036321722f);
  pz = fmaf(pz, z, 0.050344553f);
  pz = fmaf(pz, z, 0.19817947f);
  pz = fmaf(pz, z, 1.1283791f);
  float qz = 0.0009405549f;
  qz = fmaf(qz, z, 0.01420763f);
  qz = fmaf(qz, z, 0.11427974f);
  qz = fmaf(qz, z, 0.5089637f);
  qz = fmaf(qz, z, 1.0f);
  return dlc_clamp(x * pz / qz, -1.0f, 1.0f);
}
static __device__ __forceinline__ float dlc_tanh(float x) {
  x = dlc_clamp(x, -9.1f, 9.1f);
  float z = x * x;
  float pz = -8.2284806e-14f;
  pz = fmaf(pz, z, 5.177697e-11f);
  pz = fmaf(pz, z, -2.0019163e-8f);
  pz = fmaf(pz, z, 1.1103934e-5f);
  pz = fmaf(pz, z, 0.0030991628f);
  pz = fmaf(pz, z, 0.13079725f);
  pz = fmaf(pz, z, 1.0f);
  float qz = 0.00025391518f;
  qz = fmaf(qz, z, 0.02447611f);
  qz = fmaf(qz, z, 0.46413052f);
  qz = fmaf(qz, z, 1.0f);
  return dlc_clamp(x * pz / qz, -1.0f, 1.0f);
}
static __device__ __forceinline__ float dlc_log(float x) {
  int tiny = x < 1.17549435e-38f;
  float xs = tiny ? x * 8388608.0f : x;
  int bits = (int)__float_as_uint(xs);
  float m = __uint_as_float((unsigned int)((bits & 0x007fffff) | 0x3f800000));
  int big = m > 1.4142135f;
  m = big ? m * 0.5f : m;
  int e = ((bits >> 23) & 0xff) - 127 + big - (tiny ? 23 : 0);
  float fr = m - 1.0f;
  float r = 0.08672198f;
  r = fmaf(r, fr, -0.1437901f);
  r = fmaf(r, fr, 0.1497799f);
  r = fmaf(r, fr, -0.16564426f);
  r = fmaf(r, fr, 0.19954877f);
  r = fmaf(r, fr, -0.250017f);
  r = fmaf(r, fr, 0.33334166f);
  float f2 = fr * fr;
  float y = fmaf(f2 * fr, r, fmaf(-0.5f, f2, fr));
  float ef = (float)e;
  float v = fmaf(ef, 0.6933594f, fmaf(ef, -0.00021219444f, y));
  if (x == 0.0f) return __int_as_float((int)0xff800000);
  if (x != x || x < 0.0f) return __int_as_float(0x7fc00000);
  if (x == __int_as_float(0x7f800000)) return x;
  return v;
}
static __device__ __forceinline__ float dlc_max(float x, float y) { return (x != x || x > y) ? x : y; }
static __device__ __forceinline__ float dlc_min(float x, float y) { return (x != x || x < y) ? x : y; }
static __device__ __forceinline__ float dlc_mod(float x, float y) { float r = fmodf(x, y); return (r != 0.0f && ((r < 0.0f) != (y < 0.0f))) ? r + y : r; }
static __device__ __forceinline__ unsigned short dlc_to_bf16(float v) {
  unsigned int b = __float_as_uint(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b | 0x00400000u) >> 16);
  return (unsigned short)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
static __device__ __forceinline__ float dlc_from_bf16(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }
#ifdef __CUDA_ARCH__
static __device__ __forceinline__ unsigned short dlc_to_f16(float v) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); return h; }
static __device__ __forceinline__ float dlc_from_f16(unsigned short h) { float v; asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(h)); return v; }
#else
static __device__ __forceinline__ unsigned short dlc_to_f16(float v) {
  unsigned int b = __float_as_uint(v);
  unsigned short sign = (unsigned short)((b >> 16) & 0x8000u);
  int exp = (int)((b >> 23) & 0xff);
  unsigned int man = b & 0x7fffffu;
  if (exp == 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
  int e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    unsigned int m = man | 0x800000u;
    unsigned int shift = (unsigned int)(14 - e);
    unsigned int half = 1u << (shift - 1);
    unsigned int rem = m & ((1u << shift) - 1);
    unsigned int h = m >> shift;
    if (rem > half || (rem == half && (h & 1))) h += 1;
    return sign | (unsigned short)h;
  }
  unsigned int h = ((unsigned int)e << 10) | (man >> 13);
  unsigned int rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h += 1;
  return sign | (unsigned short)h;
}
static __device__ __forceinline__ float dlc_from_f16(unsigned short h) {
  unsigned int sign = (unsigned int)(h & 0x8000) << 16;
  unsigned int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return __uint_as_float(sign);
    int e = 127 - 15 + 1;
    while (!(man & 0x400)) { man <<= 1; e -= 1; }
    return __uint_as_float(sign | ((unsigned int)e << 23) | ((man & 0x3ff) << 13));
  }
  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (man << 13));
  return __uint_as_float(sign | ((exp + 127 - 15) << 23) | (man << 13));
}
#endif
