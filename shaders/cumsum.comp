#version 450
// cumsum.comp: inclusive prefix sum along one axis. Default: one thread per line, in index order (the
// same order as numpy's cumsum). ROW: a workgroup per line, tiled scans (long lines). f16
// accumulates in f32 (numpy accumulates f16 in f16: the f16 bound is looser), ints wrap, bool is a
// running OR.
#include "common.glsl"
layout(local_size_x = 256) in;

layout(push_constant) uniform PC {
    uint n;          // lines
    uint k;          // extent of the axis
    uint lshape[4];  // the shape with the axis set to 1, left-padded
    int  x_st[4];    // x strides of the line coordinates
    int  x_kst;      // x stride along the axis
    int  x_off;
    int  z_st[4];    // z (contiguous) strides of the line coordinates
    int  z_kst;      // z stride along the axis
    uint z_off;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { T x[]; };

#if defined(T_B8)
  #define OP(a, b) ((a) | (b))
#else
  #define OP(a, b) ((a) + (b))
#endif
// The identity of the running sum: -0.0 for floats (-0 + x is x for every x, -0 included: numpy's cumsum
// of [-0, -0] is [-0, -0], where a start at +0 would give +0), 0 for the rest.
#if defined(T_FLOAT)
  #define ZERO ACC(-0.0)
#else
  #define ZERO ACC(0)
#endif

#ifdef ROW
// A workgroup per line, in tiles of 2048 = 256 threads x 8: the tile is staged through shared memory
// (coalesced loads: thread t reads elements t, t+256, ...), thread t scans its 8 consecutive elements
// serially, a Hillis-Steele scan over the 256 thread totals (8 steps) gives each thread the sum of
// the threads before it, and the carry of earlier tiles is added. A fixed order: the same bits every
// run. lavapipe stops a shader's loops after 65,535 iterations in total, silently: every inner loop
// here is unrolled (no loop), so a line takes k / 2048 trips of the one real loop; the host refuses
// lines of more than CUMSUM_MAX_K terms (beyond a 128 MiB binding of bool).
#extension GL_EXT_control_flow_attributes : require
#define PER 8u
shared ACC buf[256u * PER];
shared ACC sh[256];
void main() {
    uint line = WGID, t = gl_LocalInvocationID.x;
    if (line >= pc.n) return;   // uniform across the workgroup
    uvec4 c = coords4(line, pc.lshape[1], pc.lshape[2], pc.lshape[3]);
    int xi = AT4(c, pc.x_st, pc.x_off), zi = AT4(c, pc.z_st, pc.z_off);
    ACC carry = ZERO;
    for (uint j0 = 0u; j0 < pc.k; j0 += 256u * PER) {
        [[unroll]] for (uint u = 0u; u < PER; ++u) {
            uint j = j0 + u * 256u + t;
            buf[u * 256u + t] = j < pc.k ? ACC(x[xi + int(j) * pc.x_kst]) : ZERO;
        }
        barrier();
        ACC run = ZERO;
        ACC loc[PER];
        [[unroll]] for (uint u = 0u; u < PER; ++u) { run = OP(run, buf[t * PER + u]); loc[u] = run; }
        ACC v = run;
        sh[t] = v;
        [[unroll]] for (uint e = 0u; e < 8u; ++e) {
            uint s = 1u << e;
            barrier();
            ACC w = ZERO;
            if (t >= s) w = sh[t - s];
            barrier();
            v = OP(v, w);
            sh[t] = v;
        }
        barrier();
        ACC before = t > 0u ? OP(carry, sh[t - 1u]) : carry;   // everything left of this thread's 8
        [[unroll]] for (uint u = 0u; u < PER; ++u) buf[t * PER + u] = OP(before, loc[u]);
        barrier();
        [[unroll]] for (uint u = 0u; u < PER; ++u) {
            uint j = j0 + u * 256u + t;
            if (j < pc.k) z[zi + int(j) * pc.z_kst] = T(buf[u * 256u + t]);
        }
        carry = OP(carry, sh[255]);
        barrier();   // everyone has read sh and buf before the next tile overwrites them
    }
}
#else
void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    uvec4 c = SHAPE_C(pc.lshape);
    int xi = AT4(c, pc.x_st, pc.x_off), zi = AT4(c, pc.z_st, pc.z_off);
    ACC a = ZERO;
    for (uint j = 0u; j < pc.k; ++j) {
#if defined(T_B8)
        a |= uint(x[xi]);
#else
        a += ACC(x[xi]);
#endif
        z[zi] = T(a);
        xi += pc.x_kst; zi += pc.z_kst;
    }
}
#endif
