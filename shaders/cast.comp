#version 450
// cast.comp: z = S -> T conversion of a strided view, z contiguous. The source type is picked by one
// of S_F32 S_F16 S_I32 S_I64 S_B8, the target by T_*. Semantics of numpy's astype: floats to ints
// truncate toward zero (out of range / NaN: undefined, as in numpy and C), ints narrow by keeping the
// low bits, anything to bool is x != 0 (NaN is true), bool is 0/1.
#include "common.glsl"
layout(local_size_x = 256) in;

#if defined(S_F32)
  #define S float
  #define S_FLOAT 1
#elif defined(S_F16)
  #define S float16_t
  #define S_FLOAT 1
#elif defined(S_I32)
  #define S int
#elif defined(S_I64)
  #define S int64_t
#elif defined(S_B8)
  #define S uint8_t
#else
  #error "define one of S_F32 S_F16 S_I32 S_I64 S_B8"
#endif

layout(push_constant) uniform PC {
    uint n;
    uint shape[4];
    int  st[4];
    int  x_off;
    uint z_off;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { S x[]; };

void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    uvec4 c = SHAPE_C(pc.shape);
    S v = x[AT4(c, pc.st, pc.x_off)];
#if defined(T_B8)
  #if defined(S_FLOAT)
    z[pc.z_off + gid] = uint8_t(!(float(v) == 0.0) ? 1u : 0u);
  #else
    z[pc.z_off + gid] = uint8_t(v != S(0) ? 1u : 0u);
  #endif
#elif defined(S_B8)
    z[pc.z_off + gid] = T(uint(v));
#elif defined(S_F16) && !defined(T_FLOAT)
    z[pc.z_off + gid] = T(float(v));
#elif defined(S_I64) && defined(T_F16)
    z[pc.z_off + gid] = T(float(v));
#else
    z[pc.z_off + gid] = T(v);
#endif
}
