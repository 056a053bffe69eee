#version 450
// binary.comp: z = a (op) b for ADD SUB MUL DIV POW MAXIMUM MINIMUM over two strided views of one
// shape (broadcasting arrives as stride-0 views), z contiguous. Floats compute in f32 (an f16 result
// rounded once from f32 is the correctly rounded f16 result for + - * /). Ints wrap like numpy.
// MAXIMUM/MINIMUM propagate NaN (GLSL max/min may return either operand). VEC4: see unary.comp.
#include "common.glsl"
#include "math.glsl"
layout(local_size_x = 256) in;

// op codes: vkml.vulkan.kernels.BINARY_CODE mirrors these
#define B_ADD 0
#define B_SUB 1
#define B_MUL 2
#define B_DIV 3
#define B_POW 4
#define B_MAXIMUM 5
#define B_MINIMUM 6

layout(push_constant) uniform PC {
    uint n;          // elements
    uint op;         // B_*
    uint shape[4];   // the shape, left-padded with 1
    int  a_st[4];    // a's element strides
    int  a_off;
    int  b_st[4];    // b's element strides
    int  b_off;
    uint z_off;
} pc;

#ifdef VEC4
layout(std430, set = 0, binding = 0) writeonly buffer Z { TV4 z[]; };
layout(std430, set = 0, binding = 1) readonly buffer A { TV4 a[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { TV4 b[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };
layout(std430, set = 0, binding = 1) readonly buffer A { T a[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { T b[]; };
#endif

ACC f(ACC u, ACC v) {
    switch (pc.op) {
    case B_ADD: return u + v;
    case B_SUB: return u - v;
    case B_MUL: return u * v;
#ifdef T_FLOAT
    case B_DIV: return u / v;
    case B_POW: return vpow(u, v);
    case B_MAXIMUM: return (isnan(u) || isnan(v)) ? u + v : max(u, v);
    case B_MINIMUM: return (isnan(u) || isnan(v)) ? u + v : min(u, v);
#else
    case B_MAXIMUM: return max(u, v);
    case B_MINIMUM: return min(u, v);
#endif
    }
    return u;
}

void main() {
    uint gid = GID;
#ifdef VEC4
    if (gid >= pc.n / 4u) return;
    TV4 u = a[uint(pc.a_off) / 4u + gid], v = b[uint(pc.b_off) / 4u + gid];
    z[pc.z_off / 4u + gid] = TV4(f(ACC(u.x), ACC(v.x)), f(ACC(u.y), ACC(v.y)), f(ACC(u.z), ACC(v.z)), f(ACC(u.w), ACC(v.w)));
#else
    if (gid >= pc.n) return;
    uvec4 c = SHAPE_C(pc.shape);
    z[pc.z_off + gid] = T(f(ACC(a[AT4(c, pc.a_st, pc.a_off)]), ACC(b[AT4(c, pc.b_st, pc.b_off)])));
#endif
}
