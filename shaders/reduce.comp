#version 450
// reduce.comp: SUM MEAN MAX MIN over the reduced axes of a strided view. The host permutes the
// reduced axes last and merges axes that are contiguous with each other, so the shader sees
//   outer coords (oshape, ost): which output element,   inner coords (ishape, ist): which term.
// Variants, all with a fixed (deterministic) order of combination:
//   (default) one thread per output, a serial loop over its k terms (short rows);
//   ROW       one workgroup of 256 per output row (or per chunk of one, PART): thread t folds terms
//             t, t+256, ... (VEC: 4 consecutive terms per load, when the row's last axis is
//             contiguous, 16-byte aligned, and a multiple of 4 long if other axes come before it),
//             then the workgroup combines its 256 partials: a butterfly of
//             subgroup shuffles inside each subgroup, then the subgroups' results in order;
//   ROW PART  the first of two passes for few, very long rows: `parts` workgroups per row, each
//             folding one chunk of the row into a partial of the accumulator type (a scratch buffer);
//   ROW FINAL the second pass: reduces each row's `parts` partials (read as ACC) and finishes
//             (MEAN divides by `kdiv`, the length of the original row);
//   COLS      when neighbouring outputs are neighbours in memory and the terms are not (a sum over
//             axis 0): a workgroup of 32 x 8 threads; thread (tx, ty) owns output(s) tx (VEC: 4
//             neighbouring outputs, one 16-byte load) and folds slice ty, ty+8, ... of the terms, so
//             each load instruction of a subgroup reads consecutive memory; the 8 slices are
//             combined in shared memory, in order;
//   COLS PART the first pass of a split COLS reduction: partials laid out (parts, n), so that
//   COLS FINAL (the second pass, the same kernel over ACC partials) reads them coalesced too.
//   SLABS FINAL a thread per output adds its few ACC partials (laid out (parts, n): coalesced) in order, one load
//             each: a split product's partial slabs, where the COLS FINAL kernel's 32 x 8 threads would leave most
//             of the 8 idle and wait at a barrier.
// f16 accumulates in f32, f64 in double, ints exactly in their own width (wrapping), bool SUM is OR. MAX/MIN
// propagate NaN. The host never launches k == 0 (an empty reduction is a FILL of the identity).
// lavapipe stops an invocation's loops after 65,535 trips in total, silently: fold takes 4 terms
// (VEC: 4 vectors) per trip, and the host adds PART workgroups until one thread's share of a row
// fits (kernels.LOOP_BUDGET).
#include "common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
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

#ifdef FINAL
#define TX ACC
#if defined(T_F16)
#define TXV4 vec4
#else
#define TXV4 TV4
#endif
#else
#define TX T
#define TXV4 TV4
#endif
#ifdef PART
layout(std430, set = 0, binding = 0) writeonly buffer Z { ACC z[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer X { TX x[]; };
#ifdef VEC
layout(std430, set = 0, binding = 1) readonly buffer X4 { TXV4 x4[]; };   // the same memory, 4 at a time
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

// Lane i's value combined with lane (i ^ d)'s. int64 travels as two 32-bit halves (no extended
// subgroup types needed).
ACC shuffle_xor(ACC a, uint d) {
#if defined(T_I64)
    uvec2 h = unpackUint2x32(uint64_t(a));
    return int64_t(packUint2x32(uvec2(subgroupShuffleXor(h.x, d), subgroupShuffleXor(h.y, d))));
#else
    return subgroupShuffleXor(a, d);
#endif
}

// The combination of every invocation's `a` in the workgroup (valid in every invocation). Inside a
// subgroup a butterfly: each step combines a lane with its partner d lanes away; + is commutative, so
// partners agree bit for bit. Then the subgroups' results, in subgroup order.
shared ACC sg_part[64];
ACC workgroup_combine(ACC a) {
    for (uint d = gl_SubgroupSize >> 1; d > 0u; d >>= 1) a = combine(a, shuffle_xor(a, d));
    if (gl_SubgroupInvocationID == 0u) sg_part[gl_SubgroupID] = a;
    barrier();
    ACC r = sg_part[0];
    for (uint s = 1u; s < gl_NumSubgroups; ++s) r = combine(r, sg_part[s]);
    return r;
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

#ifdef VEC
ACC combine4(ACC a, TXV4 v) {
    return combine(combine(combine(combine(a, ACC(v.x)), ACC(v.y)), ACC(v.z)), ACC(v.w));
}
#endif

T finish(ACC a) {
#if defined(T_FLOAT)
    if (pc.op == R_MEAN) a = a / ACC(pc.kdiv);
#elif defined(T_B8)
    a = a != 0u ? 1u : 0u;
#endif
    return T(a);
}

#if defined(COLS)
#ifdef VEC
#define W 4u
#else
#define W 1u
#endif
shared ACC part[8][32u * W];
void main() {
    uint g = WGID, p = g % pc.parts, tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint o = ((g / pc.parts) * 32u + tx) * W, j0 = p * pc.chunk, j1 = min(pc.k, j0 + pc.chunk);
    bool live = o < pc.n;
#ifdef VEC
    // four neighbouring outputs: the host checked that they are 4 consecutive, 16-byte aligned elements
    ACC a[4] = ACC[4](identity(), identity(), identity(), identity());
    if (live) {
        int base = AT4(coords4(o, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
        ACC b[4] = a;
        uint j = j0 + ty;
        for (; j + 8u < j1; j += 16u) {       // two loads in flight per trip
            TXV4 v = x4[term(base, j) >> 2], w = x4[term(base, j + 8u) >> 2];
            a[0] = combine(a[0], ACC(v.x)); a[1] = combine(a[1], ACC(v.y));
            a[2] = combine(a[2], ACC(v.z)); a[3] = combine(a[3], ACC(v.w));
            b[0] = combine(b[0], ACC(w.x)); b[1] = combine(b[1], ACC(w.y));
            b[2] = combine(b[2], ACC(w.z)); b[3] = combine(b[3], ACC(w.w));
        }
        if (j < j1) {
            TXV4 v = x4[term(base, j) >> 2];
            a[0] = combine(a[0], ACC(v.x)); a[1] = combine(a[1], ACC(v.y));
            a[2] = combine(a[2], ACC(v.z)); a[3] = combine(a[3], ACC(v.w));
        }
        [[unroll]] for (uint w = 0u; w < 4u; ++w) a[w] = combine(a[w], b[w]);
    }
    [[unroll]] for (uint w = 0u; w < 4u; ++w) part[ty][tx * 4u + w] = a[w];
#else
    ACC a = identity();
    if (live) {
        int base = AT4(coords4(o, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
        a = fold(base, j0 + ty, j1, 8u);
    }
    part[ty][tx] = a;
#endif
    barrier();
    // 8 x 32W partials: thread (tx, ty) finishes output column c = ty * 32 + tx of the block's 32W
    for (uint c = ty * 32u + tx; c < 32u * W; c += 256u) {
        uint oc = (g / pc.parts) * 32u * W + c;
        if (oc >= pc.n) continue;
        ACC r = part[0][c];
        for (uint s = 1u; s < 8u; ++s) r = combine(r, part[s][c]);
#ifdef PART
        z[pc.z_off + p * pc.n + oc] = r;
#else
        z[pc.z_off + oc] = finish(r);
#endif
    }
}
#elif defined(ROW)
void main() {
    uint g = WGID, t = gl_LocalInvocationID.x;
    uint row = g / pc.parts, j0 = (g % pc.parts) * pc.chunk, j1 = min(pc.k, j0 + pc.chunk);
    if (row >= pc.n) return;   // uniform across the workgroup: the barriers below stay uniform
    int base = AT4(coords4(row, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
#ifdef VEC
    // vectors of 4 terms: term 4i .. 4i+3 sit side by side, 16-byte aligned (the host checked: the inner
    // axes' last is contiguous, and a multiple of 4 long when there are others; base, j0 and the other
    // strides are multiples of 4). Thread t loads vectors j0/4 + t, + 256, ...; the last (k % 4) terms of
    // a contiguous row, if any, one each by the first threads.
    ACC a0 = identity(), a1 = a0, a2 = a0, a3 = a0;
    uint i = (j0 >> 2) + t, iend = j1 >> 2;
    if (j1 > j0) {
        for (; i + 768u < iend; i += 1024u) {
            TXV4 v0 = x4[term(base, 4u * i) >> 2], v1 = x4[term(base, 4u * (i + 256u)) >> 2];
            TXV4 v2 = x4[term(base, 4u * (i + 512u)) >> 2], v3 = x4[term(base, 4u * (i + 768u)) >> 2];
            a0 = combine4(a0, v0); a1 = combine4(a1, v1); a2 = combine4(a2, v2); a3 = combine4(a3, v3);
        }
        for (; i < iend; i += 256u) a0 = combine4(a0, x4[term(base, 4u * i) >> 2]);
        uint jt = (j1 & ~3u) + t;
        if (jt < j1 && jt >= j0) a1 = combine(a1, ACC(x[base + int(jt)]));
    }
    ACC a = combine(combine(a0, a1), combine(a2, a3));
#else
    ACC a = fold(base, j0 + t, j1, 256u);
#endif
    a = workgroup_combine(a);
#ifdef PART
    if (t == 0u) z[pc.z_off + g] = a;
#else
    if (t == 0u) z[pc.z_off + row] = finish(a);
#endif
}
#else
void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    int base = AT4(coords4(gid, pc.oshape[1], pc.oshape[2], pc.oshape[3]), pc.ost, pc.x_off);
#ifdef SLABS
    // a split product's few partials per output (FINAL: read as ACC), added in order: the COLS FINAL kernel's bits
    ACC a = identity();
    for (uint j = 0u; j < pc.k; ++j) a = combine(a, ACC(x[term(base, j)]));
    z[pc.z_off + gid] = finish(a);
#else
    z[pc.z_off + gid] = finish(fold(base, 0u, pc.k, 1u));
#endif
}
#endif
