#version 450
// compare.comp: z = a (cmp) b -> bool (stored as uint8 0/1) over two strided views of one shape.
// IEEE semantics: every comparison with NaN is false except NOT_EQUAL, written !(a == b) so that it
// is true for NaN whichever way the compiler lowers `!=`. f16 compares exactly after widening to f32.
#include "common.glsl"
layout(local_size_x = 256) in;

// op codes: vkml.vulkan.kernels.COMPARE_CODE mirrors these
#define C_EQ 0
#define C_NE 1
#define C_LT 2
#define C_LE 3
#define C_GT 4
#define C_GE 5

layout(push_constant) uniform PC {
    uint n;
    uint op;         // C_*
    uint shape[4];
    int  a_st[4];
    int  a_off;
    int  b_st[4];
    int  b_off;
    uint z_off;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Z { uint8_t z[]; };
layout(std430, set = 0, binding = 1) readonly buffer A { T a[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { T b[]; };

bool f(ACC u, ACC v) {
    switch (pc.op) {
    case C_EQ: return u == v;
    case C_NE: return !(u == v);
    case C_LT: return u < v;
    case C_LE: return u <= v;
    case C_GT: return u > v;
    case C_GE: return u >= v;
    }
    return false;
}

void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    uvec4 c = SHAPE_C(pc.shape);
    z[pc.z_off + gid] = uint8_t(f(ACC(a[AT4(c, pc.a_st, pc.a_off)]), ACC(b[AT4(c, pc.b_st, pc.b_off)])) ? 1u : 0u);
}
