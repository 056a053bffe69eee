#version 450
// where.comp: z = cond ? a : b, three strided views of one shape (cond is bool = uint8), z contiguous.
#include "common.glsl"
layout(local_size_x = 256) in;

layout(push_constant) uniform PC {
    uint n;
    uint shape[4];
    int  c_st[4];
    int  c_off;
    int  a_st[4];
    int  a_off;
    int  b_st[4];
    int  b_off;
    uint z_off;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };
layout(std430, set = 0, binding = 1) readonly buffer C { uint8_t cond[]; };
layout(std430, set = 0, binding = 2) readonly buffer A { T a[]; };
layout(std430, set = 0, binding = 3) readonly buffer B { T b[]; };

void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    uvec4 c = SHAPE_C(pc.shape);
    bool k = uint(cond[AT4(c, pc.c_st, pc.c_off)]) != 0u;
    z[pc.z_off + gid] = k ? a[AT4(c, pc.a_st, pc.a_off)] : b[AT4(c, pc.b_st, pc.b_off)];
}
