#version 450
// reduce.comp: SUM MEAN MAX MIN over the reduced axes of a strided view. The host permutes the
// reduced axes last and merges axes that are contiguous with each other, so the shader sees
//   outer coords (oshape, ost): which output element,   inner coords (ishape, ist): which term.
// Two variants, both with a fixed (deterministic) order of additions:
//   (default) one thread per output, a serial loop over its k terms (short rows);
//   ROW       one workgroup of 256 per output row: thread t folds terms t, t+256, ... then a
//             shared-memory tree halves 256 partials in 8 steps (long rows);
//   ROW PART  the first of two passes for few, very long rows: `parts` workgroups per row, each
//             folding one chunk of the row into a partial of the accumulator type (a scratch buffer);
//   ROW FINAL the second pass: reduces each row's `parts` partials (read as ACC) and finishes
//             (MEAN divides by `kdiv`, the length of the original row);
//   COLS      when neighbouring outputs are neighbours in memory and the terms are not (a sum over
//             axis 0): a workgroup of 32 outputs x 8 slices, so each step of a warp reads 32
//             consecutive elements; the 8 slice partials are combined in shared memory;
//   COLS PART the first pass of a split COLS reduction (partials laid out like ROW PART's).
// f16 accumulates in f32, f64 in double, ints exactly in their own width (wrapping), bool SUM is OR. MAX/MIN
// propagate NaN. The host never launches k == 0 (an empty reduction is a FILL of the identity).
// lavapipe stops an invocation's loops after 65,535 trips in total, silently: fold takes 4 terms per
// trip, and the host adds PART workgroups until one thread's share of a row fits (kernels.LOOP_BUDGET).
#include "common.glsl"
#ifdef COLS
layout(local_size_x = 32, local_size_y = 8) in;
#else
layout(local_size_x = 256) in;
#endif

#define R_SUM 0
#define R_MEAN 1
#define R_MAX 2
#define R_MIN 3

layout(push_constant) uniform PC {
    uint n;          // output elements
    uint k;          // terms per output
    uint op;         // R_*
    uint oshape[4];  // outer (kept) shape, left-padded
    int  ost[4];     // outer strides in x
    uint ishape[4];  // inner (reduced) shape, left-padded
    int  ist[4];     // inner strides in x
    int  x_off;
    uint z_off;
    uint parts;      // workgroups per row (PART); 1 otherwise
    uint chunk;      // terms per workgroup (PART); k otherwise
    uint kdiv;       // MEAN's divisor: the original row length
} pc;

#ifdef PART
layout(std430, set = 0, binding = 0) writeonly buffer Z { ACC z[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };
#endif
#ifdef FINAL
layout(std430, set = 0, binding = 1) readonly buffer X { ACC x[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer X { T x[]; };
#endif

ACC identity() {
    if (pc.op <= R_MEAN) return ACC(0);
#if defined(T_FLOAT)
    return pc.op == R_MAX ? F_NINF : F_INF;
#elif defined(T_I64)
    return pc.op == R_MAX ? int64_t(0x8000000000000000ul) : int64_t(0x7ffffffffffffffful);
#elif defined(T_I32)
    return pc.op == R_MAX ? int(0x80000000u) : 0x7fffffff;
#else
    return pc.op == R_MAX ? 0u : 1u;
#endif
}

ACC combine(ACC a, ACC v) {
#if defined(T_FLOAT)
    if (pc.op <= R_MEAN) return a + v;
    if (pc.op == R_MAX) return (isnan(v) || v > a) ? v : a;   // NaN sticks: NaN > x and x > NaN are false
    return (isnan(v) || v < a) ? v : a;
#elif defined(T_B8)
    if (pc.op <= R_MEAN) return a | v;
    return pc.op == R_MAX ? max(a, v) : min(a, v);
#else
    if (pc.op <= R_MEAN) return a + v;
    return pc.op == R_MAX ? max(a, v) : min(a, v);
#endif
}

// The element offset in x of term j of the row whose base offset is `base`.
int term(int base, uint j) {
    if (pc.ishape[2] == 1u && pc.ishape[1] == 1u && pc.ishape[0] == 1u) return base + int(j) * pc.ist[3];
    uvec4 c = coords4(j, pc.ishape[1], pc.ishape[2], pc.ishape[3]);
    return base + AT4(c, pc.ist, 0);
}

// Fold terms j, j + stride, ... (< end) of the row at `base`. Four independent accumulators keep four
// loads in flight per thread (a GPU needs many bytes in flight to reach its bandwidth); they are
// combined in a fixed order, so the result is still the same bits every time.
ACC fold(int base, uint j, uint end, uint stride) {
    ACC a0 = identity(), a1 = a0, a2 = a0, a3 = a0;
    for (; j + 3u * stride < end; j += 4u * stride) {
        a0 = combine(a0, ACC(x[term(base, j)]));
        a1 = combine(a1, ACC(x[term(base, j + stride)]));
        a2 = combine(a2, ACC(x[term(base, j + 2u * stride)]));
        a3 = combine(a3, ACC(x[term(base, j + 3u * stride)]));
    }
    for (; j < end; j += stride) a0 = combine(a0, ACC(x[term(base, j)]));
    return combine(combine(a0, a1), combine(a2, a3));
}

T finish(ACC a) {
#if defined(T_FLOAT)
    if (pc.op == R_MEAN) a = a / ACC(pc.kdiv);
#elif defined(T_B8)
    a = a != 0u ? 1u : 0u;
#endif
    return T(a);
}

#if defined(COLS)
shared ACC part[8][32];
void main() {
    uint g = WGID, p = g % pc.parts, tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint o = (g / pc.parts) * 32u + tx, j0 = p * pc.chunk, j1 = min(pc.k, j0 + pc.chunk);
    bool live = o < pc.n;
    ACC a = identity();
    if (live) {
        int base = AT4(coords4(o, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
        a = fold(base, j0 + ty, j1, 8u);
    }
    part[ty][tx] = a;
    barrier();
    if (ty == 0u && live) {
        for (uint s = 1u; s < 8u; ++s) a = combine(a, part[s][tx]);
#ifdef PART
        z[pc.z_off + o * pc.parts + p] = a;
#else
        z[pc.z_off + o] = finish(a);
#endif
    }
}
#elif defined(ROW)
shared ACC part[256];
void main() {
    uint g = WGID, t = gl_LocalInvocationID.x;
    uint row = g / pc.parts, j0 = (g % pc.parts) * pc.chunk, j1 = min(pc.k, j0 + pc.chunk);
    if (row >= pc.n) return;   // uniform across the workgroup: the barriers below stay uniform
    int base = AT4(coords4(row, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
    ACC a = fold(base, j0 + t, j1, 256u);
    part[t] = a;
    for (uint s = 128u; s > 0u; s >>= 1) {
        barrier();
        if (t < s) part[t] = combine(part[t], part[t + s]);
    }
#ifdef PART
    if (t == 0u) z[pc.z_off + g] = part[0];
#else
    if (t == 0u) z[pc.z_off + row] = finish(part[0]);
#endif
}
#else
void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    int base = AT4(coords4(gid, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
    z[pc.z_off + gid] = finish(fold(base, 0u, pc.k, 1u));
}
#endif
