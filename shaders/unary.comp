#version 450
// unary.comp: y = f(x) for the unary graph ops, one op code per op (a uniform switch: one pipeline
// per dtype instead of one per op). x is read through its strided view (stride 0 = broadcast, negative
// = flipped); y is written contiguously. Float dtypes compute in f32; int dtypes get the int ops only.
// VEC4 (not bool): x contiguous, n % 4 == 0 and both offsets multiples of 4; each thread does 4 elements.
#include "common.glsl"
#include "math.glsl"
layout(local_size_x = 256) in;

// op codes: vkml.vulkan.kernels.UNARY_CODE mirrors these (tests/test_spirv.py checks they agree)
#define U_NEG 0
#define U_ABS 1
#define U_SIGN 2
#define U_RELU 3
#define U_CLAMP 4
#define U_EXP 5
#define U_LOG 6
#define U_SQRT 7
#define U_RSQRT 8
#define U_RECIPROCAL 9
#define U_SIN 10
#define U_COS 11
#define U_TANH 12
#define U_SIGMOID 13
#define U_GELU 14
#define U_GELU_TANH 15
#define U_SILU 16
#define U_LEAKY_RELU 17
#define U_ELU 18
#define U_SOFTPLUS 19
#define U_ERF 20
#define U_ERFC 21

layout(push_constant) uniform PC {
    uint n;          // elements
    uint op;         // U_*
    uint shape[4];   // the shape, left-padded with 1 to rank 4
    int  st[4];      // x's element strides (0-padded)
    int  x_off;      // x's element offset
    uint y_off;      // y's element offset
    uint p[4];       // op parameters: float bits (or int words for the int clamp)
    uint flags;      // CLAMP: bit 0 has lo, bit 1 has hi
} pc;

#ifdef VEC4
layout(std430, set = 0, binding = 0) writeonly buffer Y { TV4 y[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { TV4 x[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer Y { T y[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { T x[]; };
#endif

#ifdef T_FLOAT
float P(uint i) { return uintBitsToFloat(pc.p[i]); }
float f(float v) {
    switch (pc.op) {
    case U_NEG: return -v;
    case U_ABS: return abs(v);
    case U_SIGN: return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : v);   // keeps 0, -0 and NaN
    // NaN stays NaN: written with isnan, because a driver may turn `v < 0 ? 0 : v` into a max()
    // that drops NaN (NVIDIA's does)
    case U_RELU: return isnan(v) ? v : max(v, 0.0);
    case U_CLAMP: {                                              // min(max(v, lo), hi)
        if (isnan(v)) return v;
        if ((pc.flags & 1u) != 0u) v = max(v, P(0));
        if ((pc.flags & 2u) != 0u) v = min(v, P(1));
        return v; }
    case U_EXP: return vexp(v);
    case U_LOG: return vlog(v);
    case U_SQRT: return v < 0.0 ? F_NAN : sqrt(v);
    case U_RSQRT: return v < 0.0 ? F_NAN : 1.0 / sqrt(v);
    case U_RECIPROCAL: return 1.0 / v;
    case U_SIN: return vsincos(v, false);
    case U_COS: return vsincos(v, true);
    case U_TANH: return vtanh(v);
    case U_SIGMOID: return vsigmoid(v);
    case U_GELU: return 0.5 * v * verfc(-v * 0.7071067811865476);  // = x/2 (1 + erf(x/sqrt2)), no cancellation
    case U_GELU_TANH: return 0.5 * v * (1.0 + vtanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    case U_SILU: return v / (1.0 + vexp(-v));
    case U_LEAKY_RELU: return v > 0.0 ? v : v * P(0);
    case U_ELU: return v > 0.0 ? v : P(0) * vexpm1(v);
    case U_SOFTPLUS: { float bx = P(0) * v;                        // torch: x where beta x > threshold
        return bx > P(1) ? v : vlog1p(vexp(bx)) / P(0); }
    case U_ERF: return verf(v);
    case U_ERFC: return verfc(v);
    }
    return F_NAN;
}
#else
ACC f(ACC v) {
    switch (pc.op) {
    case U_NEG: return -v;
    case U_ABS: return v < ACC(0) ? -v : v;
    case U_SIGN: return v > ACC(0) ? ACC(1) : (v < ACC(0) ? ACC(-1) : ACC(0));
    case U_RELU: return v < ACC(0) ? ACC(0) : v;
    case U_CLAMP: {
#ifdef T_I64
        ACC lo = I64(pc.p[0], pc.p[1]), hi = I64(pc.p[2], pc.p[3]);
#else
        ACC lo = int(pc.p[0]), hi = int(pc.p[2]);
#endif
        if ((pc.flags & 1u) != 0u && v < lo) v = lo;
        if ((pc.flags & 2u) != 0u && v > hi) v = hi;
        return v; }
    }
    return v;
}
#endif

void main() {
    uint gid = GID;
#ifdef VEC4
    if (gid >= pc.n / 4u) return;
    TV4 v = x[uint(pc.x_off) / 4u + gid];
    y[pc.y_off / 4u + gid] = TV4(f(ACC(v.x)), f(ACC(v.y)), f(ACC(v.z)), f(ACC(v.w)));
#else
    if (gid >= pc.n) return;
    uvec4 c = SHAPE_C(pc.shape);
    y[pc.y_off + gid] = T(f(ACC(x[AT4(c, pc.st, pc.x_off)])));
#endif
}
