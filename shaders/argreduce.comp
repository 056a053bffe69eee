#version 450
// argreduce.comp: ARGMAX / ARGMIN along one axis -> int64 indices, the FIRST occurrence of the
// extreme, NaN counting as the extreme (torch and numpy: the index of the first NaN).
// Default variant: one thread per output, a serial scan. ROW: one workgroup of 256 per output, each
// thread scans terms t, t+256, ..., then (value, index) pairs are combined, ties to the lower index:
// a butterfly of subgroup shuffles inside each subgroup, then the subgroups' pairs in order.
// COLS: when neighbouring outputs are neighbours in memory (argmax over axis 0): a workgroup of
// 32 x 8, thread (tx, ty) scans output tx's terms ty, ty+8, ... (each load of a subgroup reads
// consecutive memory), and the 8 slices' pairs are combined in shared memory.
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef COLS
layout(local_size_x = 32, local_size_y = 8) in;
#else
layout(local_size_x = 256) in;
#endif

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

// Should the pair (v, i) replace (bv, bi)? Better, or equally good (equal, or both NaN) at a lower index.
bool takes(ACC v, uint i, ACC bv, uint bi) {
    bool eq = (v == bv);
#if defined(T_FLOAT)
    eq = eq || (isnan(v) && isnan(bv));
#endif
    return better(v, bv) || (eq && i < bi);
}

ACC shuffle_xor(ACC a, uint d) {
#if defined(T_I64)
    uvec2 h = unpackUint2x32(uint64_t(a));
    return int64_t(packUint2x32(uvec2(subgroupShuffleXor(h.x, d), subgroupShuffleXor(h.y, d))));
#else
    return subgroupShuffleXor(a, d);
#endif
}

#if defined(ROW)
shared ACC sv[64];
shared uint si[64];
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
    // partners end with the same pair: `takes` is a strict order on (value, index) pairs
    for (uint d = gl_SubgroupSize >> 1; d > 0u; d >>= 1) {
        ACC v = shuffle_xor(bv, d); uint i = subgroupShuffleXor(bi, d);
        if (takes(v, i, bv, bi)) { bv = v; bi = i; }
    }
    if (gl_SubgroupInvocationID == 0u) { sv[gl_SubgroupID] = bv; si[gl_SubgroupID] = bi; }
    barrier();
    if (t == 0u) {
        bv = sv[0]; bi = si[0];
        for (uint s = 1u; s < gl_NumSubgroups; ++s) if (takes(sv[s], si[s], bv, bi)) { bv = sv[s]; bi = si[s]; }
        z[pc.z_off + row] = int64_t(bi);
    }
}
#elif defined(COLS)
shared ACC sv[8][32];
shared uint si[8][32];
void main() {
    uint g = WGID, tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint o = g * 32u + tx;
    bool live = o < pc.n;
    ACC bv = ACC(0);
    uint bi = 0xffffffffu;     // no term yet (a slice past the end): never taken over a real one
    if (live && ty < pc.k) {
        int base = AT4(coords4(o, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
        bi = ty; bv = ACC(x[base + int(ty) * pc.kst]);
        uint j = ty + 8u;
        for (; j + 7u * 8u < pc.k; j += 64u) {
            [[unroll]] for (uint u = 0u; u < 8u; ++u) {
                ACC v = ACC(x[base + int(j + u * 8u) * pc.kst]);
                if (better(v, bv)) { bv = v; bi = j + u * 8u; }
            }
        }
        for (; j < pc.k; j += 8u) {
            ACC v = ACC(x[base + int(j) * pc.kst]);
            if (better(v, bv)) { bv = v; bi = j; }
        }
    }
    sv[ty][tx] = bv; si[ty][tx] = bi;
    barrier();
    if (ty == 0u && live) {
        for (uint s = 1u; s < 8u; ++s)
            if (si[s][tx] != 0xffffffffu && takes(sv[s][tx], si[s][tx], bv, bi)) { bv = sv[s][tx]; bi = si[s][tx]; }
        z[pc.z_off + o] = int64_t(bi);
    }
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
