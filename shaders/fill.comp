#version 450
// fill.comp: z[i] = value for every element of a contiguous z: the identity of an empty reduction,
// or a pad of an empty tensor. The value arrives as two words: float bits, an int, an int64 or a
// double as (low, high), bool 0/1. (The graph's own sources, FULL, ARANGE and RAND, are generated kernels.)
#include "common.glsl"
layout(local_size_x = 256) in;

layout(push_constant) uniform PC {
    uint n;
    uint v[2];
    uint z_off;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };

void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
#if defined(T_F64)
    z[pc.z_off + gid] = F64(pc.v[0], pc.v[1]);
#elif defined(T_FLOAT)
    z[pc.z_off + gid] = T(uintBitsToFloat(pc.v[0]));
#elif defined(T_I64)
    z[pc.z_off + gid] = I64(pc.v[0], pc.v[1]);
#elif defined(T_I32)
    z[pc.z_off + gid] = int(pc.v[0]);
#else
    z[pc.z_off + gid] = uint8_t(pc.v[0] != 0u ? 1u : 0u);
#endif
}
