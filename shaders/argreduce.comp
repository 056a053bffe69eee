#version 450
// argreduce.comp: ARGMAX / ARGMIN along one axis -> int64 indices, the FIRST occurrence of the
// extreme, NaN counting as the extreme (torch and numpy: the index of the first NaN).
// Default variant: one thread per output, a serial scan. ROW: one workgroup of 256 per output, each
// thread scans terms t, t+256, ... and a shared tree keeps (value, index) pairs, ties to the lower index.
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256) in;

layout(push_constant) uniform PC {
    uint n;          // outputs
    uint k;          // extent of the axis (>= 1: the host refuses empty ones)
    uint op;         // 0 ARGMAX, 1 ARGMIN
    uint oshape[4];  // the other axes, left-padded
    int  ost[4];     // their strides in x
    int  kst;        // stride of the axis in x
    int  x_off;
    uint z_off;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Z { int64_t z[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { T x[]; };

// Is v (at a later index) strictly better than the best so far?
bool better(ACC v, ACC best) {
#if defined(T_FLOAT)
    if (isnan(best)) return false;
    if (isnan(v)) return true;
#endif
    return pc.op == 0u ? v > best : v < best;
}

#ifdef ROW
shared ACC sv[256];
shared uint si[256];
void main() {
    uint row = WGID, t = gl_LocalInvocationID.x;
    if (row >= pc.n) return;
    int base = AT4(coords4(row, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
    uint bi = t < pc.k ? t : 0u;
    ACC bv = ACC(x[base + int(bi) * pc.kst]);
    // lavapipe stops a shader's loops after 65,535 iterations in total, silently: 8 terms per trip
    // (the inner loop is unrolled, so it is no loop) lets one row hold 256 * 8 * 65,535 terms, more
    // than a 128 MiB binding; the host refuses longer rows. Still ascending j: the first extreme wins.
    uint j = t + 256u;
    for (; j + 7u * 256u < pc.k; j += 8u * 256u) {
        [[unroll]] for (uint u = 0u; u < 8u; ++u) {
            ACC v = ACC(x[base + int(j + u * 256u) * pc.kst]);
            if (better(v, bv)) { bv = v; bi = j + u * 256u; }
        }
    }
    for (; j < pc.k; j += 256u) {
        ACC v = ACC(x[base + int(j) * pc.kst]);
        if (better(v, bv)) { bv = v; bi = j; }
    }
    sv[t] = bv; si[t] = bi;
    for (uint s = 128u; s > 0u; s >>= 1) {
        barrier();
        if (t < s) {
            ACC v = sv[t + s]; uint i = si[t + s];
            // take the partner's pair when it is better, or equally good (both NaN, or equal) at a lower index
            bool eq = (v == sv[t]);
#if defined(T_FLOAT)
            eq = eq || (isnan(v) && isnan(sv[t]));
#endif
            if (better(v, sv[t]) || (eq && i < si[t])) { sv[t] = v; si[t] = i; }
        }
    }
    if (t == 0u) z[pc.z_off + row] = int64_t(si[0]);
}
#else
void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    int base = AT4(coords4(gid, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
    ACC bv = ACC(x[base]);
    uint bi = 0u;
    for (uint j = 1u; j < pc.k; ++j) {
        ACC v = ACC(x[base + int(j) * pc.kst]);
        if (better(v, bv)) { bv = v; bi = j; }
    }
    z[pc.z_off + gid] = int64_t(bi);
}
#endif
