#version 450
// C[b] = A[b] @ B[b]: (M,K) @ (K,N) -> (M,N) for every batch b, accumulated in FACC (f32; f64 for f64).
// Tiled: a workgroup owns a BM x BN tile of C and walks K in slabs of BK, staging the A and B
// slabs through shared memory, double-buffered (the next slab's global loads are issued before
// this slab's multiplies and stored into the other buffer after them: one barrier per slab). Each
// of the (BM/TM)*(BN/TN) threads owns TM x TN outputs (register blocking) in 4 x 4 groups strided
// by the thread grid, so its shared-memory reads are 16-byte vec4 loads that neighbouring threads
// take from neighbouring words: per k, TM/4 + TN/4 loads feed TM*TN fused multiply-adds.
// Operands are read through element strides (transposed or broadcast operands need no copy). The
// batch index is two-level, b = b1*B2 + b2, each level with its own strides, so that a grouped
// convolution is one dispatch. Split K (`kc` > 0): the z grid also runs over ceil(K/kc) chunks of
// K, chunk q writing its partial product at C + q*c_sq (the host sums the partials, in order).
// FRAG2 (an experiment, in no shipped variant yet: bench/matmul_ab.py times it): each thread's A and B fragments
// double-buffered in registers, k + 1's shared-memory reads issued before k's multiply-adds (the same sums, in the same
// order). Every grid dimension loops, so any extent fits under the 65,535-workgroup limit; every load and
// store is guarded, so any M, N, K (0 and 1 included).
// With IMPLICIT defined: a convolution as an implicit GEMM, B gathered from the image window by window
// (no im2col buffer); the push constants grow by the convolution's geometry. WGRAD: its weight
// gradient, dW[o, (c, tap)] = sum over (image, pixel) of g[o, pixel] x[window]: A is g, B the windows
// with the contraction running over images and pixels (B1 = 1; b_sb1 is the image stride).
// With SMALL defined: the variant for tiny products (one TM x TN block per thread, 1-D launch of
// WG-thread groups over batch x blocks, no shared memory), same push constants; there C's stride 0 across b1
// (with B1 > 1) sums the B1 products into one C (a convolution's weight gradient over its images).
// lavapipe stops an invocation's loops after 65,535 trips in total (K loops and grid loops together),
// silently: when a product's trips would pass that, the host splits K (kernels_nn.matmul_dispatch).
#include "nn_common.glsl"
#extension GL_EXT_control_flow_attributes : require
#if defined(WGRAD)
#define IMPLICIT 1
#endif

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#define TX (BN / TN)   // threads along n
#define TY (BM / TM)   // threads along m
#define NT (TX * TY)
#if defined(FRAG2) && (BK % 2 != 0)
#error "FRAG2 walks a slab two rows at a time"
#endif


// C_F32: C is stored as f32 whatever T is (f16 products kept unrounded for a following pass).
#if defined(C_F32)
#define TC float
#define TCV4 vec4
#else
#define TC T
#if defined(T_F16)
#define TCV4 f16vec4
#elif defined(T_F64)
#define TCV4 dvec4
#else
#define TCV4 vec4
#endif
#endif
// FACC4: four accumulators (shared-memory slabs and register blocks): vec4, dvec4 for f64
#if defined(T_F64)
#define FACC4 dvec4
#else
#define FACC4 vec4
#endif
layout(std430, set = 0, binding = 0) writeonly buffer OutC { TC c[]; };
layout(std430, set = 0, binding = 0) writeonly buffer OutC4 { TCV4 c4[]; };   // the same memory, 4 at a time
layout(std430, set = 0, binding = 1) readonly buffer InA { T a[]; };
layout(std430, set = 0, binding = 2) readonly buffer InB { T b[]; };

layout(push_constant) uniform PC {
    uint M, N, K, B1, B2;
    int a_off, a_sb1, a_sb2, a_sm, a_sk;
    int b_off, b_sb1, b_sb2, b_sk, b_sn;
    int c_off, c_sb1, c_sb2, c_sm, c_sn;
    uint kc;   // split K: terms per chunk (0: no split)
    int c_sq;  // split K: C's stride between chunks' partials
#if defined(IMPLICIT)
    // implicit GEMM (a convolution without an im2col buffer): B is gathered from an image x, with
    // b_off, b_sb1, b_sb2 its offset and batch strides, b_sk its channel stride, b_sn its column stride
    int a_sc;     // A's stride per input channel (k = tap * Cg + channel; a_sk is A's stride per tap)
    uint Cg;      // input channels per group
    uint OW;      // output columns (n = oy * OW + ox)
    uint kw;      // taps per kernel row (tap = i * kw + j)
    uint HW;      // image height | width << 16
    uint S, P, D; // stride, padding, dilation: (h | w << 16), int16 each (negative padding and dilation
                  // turn the gather around: a transposed convolution of stride 1)
    int x_sh;     // the image's row stride
    uint L;       // WGRAD: output pixels per image (the contraction runs over (image, pixel) = n * L + l)
#endif
} p;

#if defined(SMALL)
// Small products (M*N at most a few tiles' worth, e.g. many tiny batched matrices): a 64x64 tile
// would leave most of its 256 threads idle, so here each thread owns one TM x TN register block
// of one batch's C and reads A and B straight from global memory: no shared memory, no barriers.
// On a CPU device (lavapipe) the block is bigger (TM x TN = 8 x 16, WG = 8): Mesa 22's lavapipe
// loads a buffer word by looping over the 8 lanes of its SIMD vector, some 20 cycles a lane, so
// the time goes with the words loaded, M*N*K*(1/TM + 1/TN); the multiply-adds cost next to nothing.
// Its workgroups are one 8-lane vector each, so a small product still spreads over every core.
#ifndef WG
#define WG 64
#endif
layout(local_size_x = WG) in;

void main() {
    const uint gid = GID;
    const uint bm = (p.M + TM - 1) / TM, bn = (p.N + TN - 1) / TN;
    // C's stride 0 across b1 (B1 > 1): the B1 products are summed into one C (a convolution's weight gradient
    // summed over its images), so the grid runs over b2 alone and each thread walks b1 around its K loop.
    const bool bsum = p.c_sb1 == 0 && p.B1 > 1u;
    const uint nb1 = bsum ? 1u : p.B1, terms = bsum ? p.B1 : 1u;
    if (gid >= bm * bn * nb1 * p.B2) return;
    const uint jn = gid % bn, r = gid / bn, im = r % bm, bz = r / bm;
    const uint b1 = bz / p.B2, b2 = bz % p.B2;
    const int cbase = p.c_off + int(b1) * p.c_sb1 + int(b2) * p.c_sb2;
    const uint m0 = im * TM, n0 = jn * TN;
    FACC acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = FACC(0);
    for (uint s = 0; s < terms; ++s) {
        const int abase = p.a_off + int(b1 + s) * p.a_sb1 + int(b2) * p.a_sb2;
        const int bbase = p.b_off + int(b1 + s) * p.b_sb1 + int(b2) * p.b_sb2;
        for (uint k = 0; k < p.K; ++k) {
            FACC ar[TM], br[TN];
            [[unroll]] for (uint i = 0; i < TM; ++i)
                ar[i] = m0 + i < p.M ? FACC(a[abase + int(m0 + i) * p.a_sm + int(k) * p.a_sk]) : FACC(0);
            [[unroll]] for (uint j = 0; j < TN; ++j)
                br[j] = n0 + j < p.N ? FACC(b[bbase + int(k) * p.b_sk + int(n0 + j) * p.b_sn]) : FACC(0);
            [[unroll]] for (uint i = 0; i < TM; ++i)
                [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = fma(ar[i], br[j], acc[i][j]);
        }
    }
    [[unroll]] for (uint i = 0; i < TM; ++i) {
        if (m0 + i >= p.M) break;
        [[unroll]] for (uint j = 0; j < TN; ++j)
            if (n0 + j < p.N) c[cbase + int(m0 + i) * p.c_sm + int(n0 + j) * p.c_sn] = TC(acc[i][j]);
    }
}

#else
layout(local_size_x = NT) in;

// k-major slabs of vec4s: As[buf][k][m/4]. One vec4 of padding per row spreads the transposed
// (k-fast) stores of a slab over the banks; reads stay 16-byte aligned.
shared FACC4 As[2][BK][BM / 4 + 1];
shared FACC4 Bs[2][BK][BN / 4 + 1];

// One k step of a thread's register block: its TM/4 vec4s of A (each value broadcast) times its TN/4 vec4s of B.
#define FMA_BLOCK(AR, BR)                                                                   \
    [[unroll]] for (uint i = 0; i < TM / 4; ++i)                                            \
        [[unroll]] for (uint r = 0; r < 4; ++r)                                             \
            [[unroll]] for (uint j = 0; j < TN / 4; ++j)                                    \
                acc[i * 4 + r][j] = fma(FACC4(AR[i][r]), BR[j], acc[i * 4 + r][j])

#define LA (BM * BK / NT)   // A values each thread stages per slab
#define LB (BK * BN / NT)   // B values

#define VEC_K 1u
#define VEC_MN 2u
// With VEC_A and VEC_B defined: 16-byte loads. Both operands run contiguous, A along k (VEC_K: row-major) or m
// (VEC_MN: transposed), B along n (VEC_MN: row-major) or k (VEC_K: transposed), every offset and stride a multiple
// of 4 and the extent along each run too (the host checks: kernels_nn.vectorised), so a slab is read 4 values at a
// time: a quarter of the load instructions and of their index arithmetic. The runs are fixed when compiling, one
// variant per pair: chosen at run time, the branches cost the H100 more than the vectors saved (29.9 -> 27.2 TFLOP/s
// at 4096^3, against 34.1 for the fixed pair; bench/results/logs/h100_vec_2026-12-06).
#if defined(VEC_A)
#if defined(IMPLICIT) || defined(T_F64) || (LA % 4 != 0) || (LB % 4 != 0)
#error "16-byte loads are for plain products with 4-value slabs per thread"
#endif
#define VEC_LOADS 1
#if defined(T_F16)
#define TV4 f16vec4
#else
#define TV4 vec4
#endif
layout(std430, set = 0, binding = 1) readonly buffer InA4 { TV4 a4[]; };
layout(std430, set = 0, binding = 2) readonly buffer InB4 { TV4 b4[]; };
#endif

#if defined(VEC_LOADS)
// The 16-byte twins of the loops below: vector v = tid + l*NT of a slab, 4 values each (pa[4l .. 4l+3]).
// Along k a slab row holds BK/4 vectors; along m (n) a k-row of the slab holds BM/4 (BN/4).
void load_a_vec(int abase, uint m0, uint k0, uint kend, uint tid, inout FACC pa[LA]) {
    [[unroll]] for (uint l = 0; l < LA / 4; ++l) {
        const uint v = tid + l * NT;
        const uint gk = k0 + (VEC_A == VEC_K ? 4 * (v % (BK / 4)) : v / (BM / 4));
        const uint gm = m0 + (VEC_A == VEC_K ? v / (BK / 4) : 4 * (v % (BM / 4)));
        const vec4 x = (gm < p.M && gk < kend) ? vec4(a4[(abase + int(gm) * p.a_sm + int(gk) * p.a_sk) >> 2]) : vec4(0);
        [[unroll]] for (uint u = 0; u < 4; ++u) pa[4 * l + u] = x[u];
    }
}
void load_b_vec(int bbase, uint n0, uint k0, uint kend, uint tid, inout FACC pb[LB]) {
    [[unroll]] for (uint l = 0; l < LB / 4; ++l) {
        const uint v = tid + l * NT;
        const uint gk = k0 + (VEC_B == VEC_K ? 4 * (v % (BK / 4)) : v / (BN / 4));
        const uint gn = n0 + (VEC_B == VEC_K ? v / (BK / 4) : 4 * (v % (BN / 4)));
        const vec4 x = (gn < p.N && gk < kend) ? vec4(b4[(bbase + int(gk) * p.b_sk + int(gn) * p.b_sn) >> 2]) : vec4(0);
        [[unroll]] for (uint u = 0; u < 4; ++u) pb[4 * l + u] = x[u];
    }
}
// Along m (n) the 4 values are one vec4 of the k-major slab as they are; along k they go to 4 slab rows.
void store_a_vec(uint buf, uint tid, FACC pa[LA]) {
    [[unroll]] for (uint l = 0; l < LA / 4; ++l) {
        const uint v = tid + l * NT;
        if (VEC_A == VEC_K) {
            const uint k = 4 * (v % (BK / 4)), m = v / (BK / 4);
            [[unroll]] for (uint u = 0; u < 4; ++u) As[buf][k + u][m >> 2][m & 3u] = pa[4 * l + u];
        } else
            As[buf][v / (BM / 4)][v % (BM / 4)] = FACC4(pa[4 * l], pa[4 * l + 1], pa[4 * l + 2], pa[4 * l + 3]);
    }
}
void store_b_vec(uint buf, uint tid, FACC pb[LB]) {
    [[unroll]] for (uint l = 0; l < LB / 4; ++l) {
        const uint v = tid + l * NT;
        if (VEC_B == VEC_K) {
            const uint k = 4 * (v % (BK / 4)), n = v / (BK / 4);
            [[unroll]] for (uint u = 0; u < 4; ++u) Bs[buf][k + u][n >> 2][n & 3u] = pb[4 * l + u];
        } else
            Bs[buf][v / (BN / 4)][v % (BN / 4)] = FACC4(pb[4 * l], pb[4 * l + 1], pb[4 * l + 2], pb[4 * l + 3]);
    }
}
#endif

// Read the (BM x BK) slab of A and the (BK x BN) slab of B starting at k0 into registers, zero
// outside the matrices (and past kend). Thread tid takes elements e = tid + l*NT of each slab, with
// the index that has unit stride running fastest across threads (coalesced).
#if defined(IMPLICIT)
int lo16(uint v) { return int(v << 16) >> 16; }   // the signed low and high halves of a packed word
int hi16(uint v) { return int(v) >> 16; }
#endif

#if defined(IMPLICIT) && !defined(WGRAD) && (NT % BN != 0)
#error "the implicit-GEMM fast path needs the thread count to be a multiple of BN"
#endif
#if defined(IMPLICIT) && (NT % BK != 0)
#error "the convolutions' loads need the thread count to be a multiple of BK"
#endif
#if defined(WGRAD)
// The weight gradient's columns (channel, tap) do not move along k: each thread's LB columns of B are worked out once
// per tile into their offset in an image (channel, and the tap's place in the window) and the tap's (row, column)
// offset, which is what the bounds check needs; a column past N gets an offset far outside every image.
int wg_off[LB];
ivec2 wg_tap[LB];
void wgrad_columns(uint n0, uint tid) {
    const uint kk = p.N / p.Cg;   // taps per channel
    [[unroll]] for (uint l = 0; l < LB; ++l) {
        const uint gn = n0 + tid / BK + l * (NT / BK), ci = gn / kk, r = gn - ci * kk, i = r / p.kw, j = r - i * p.kw;
        const int dy = int(i) * lo16(p.D), dx = int(j) * hi16(p.D);
        wg_tap[l] = gn < p.N ? ivec2(dy, dx) : ivec2(-0x40000000);
        wg_off[l] = int(ci) * p.b_sk + dy * p.x_sh + dx * p.b_sn;
    }
}
#endif
void load_slabs(int abase, int bbase, uint m0, uint n0, uint k0, uint kend, uint tid, bool a_kfast, bool b_nfast,
                uint poy, uint pox, out FACC pa[LA], out FACC pb[LB]) {
#if defined(VEC_LOADS)
    load_a_vec(abase, m0, k0, kend, tid, pa);
    load_b_vec(bbase, n0, k0, kend, tid, pb);
    return;
#endif
#if defined(WGRAD)
    {
        // k = (image n, output pixel px). NT is a multiple of BK, so this thread's k is the same for every l of both
        // slabs: one division into (n, px) and one into (oy, ox) per slab, and along l only rows of g or columns move.
        const uint gk = k0 + tid % BK, n = gk / p.L, px = gk - n * p.L, oy = px / p.OW, ox = px - oy * p.OW;
        const bool kin = gk < kend;
        [[unroll]] for (uint l = 0; l < LA; ++l) {   // A is the output gradient g: row = output channel
            const uint gm = m0 + tid / BK + l * (NT / BK);
            pa[l] = (kin && gm < p.M) ? FACC(a[abase + int(gm) * p.a_sm + int(n) * p.a_sc + int(px) * p.a_sk]) : FACC(0);
        }
        // B: image n's window element of each column, zero outside the image
        const int iy0 = int(oy) * lo16(p.S) - lo16(p.P), ix0 = int(ox) * hi16(p.S) - hi16(p.P);
        const int pix = bbase + int(n) * p.b_sb1 + iy0 * p.x_sh + ix0 * p.b_sn;
        [[unroll]] for (uint l = 0; l < LB; ++l) {
            const int iy = iy0 + wg_tap[l].x, ix = ix0 + wg_tap[l].y;
            FACC v = FACC(0);
            if (kin && uint(iy) < (p.HW & 0xffffu) && uint(ix) < (p.HW >> 16)) v = FACC(b[pix + wg_off[l]]);
            pb[l] = v;
        }
        return;
    }
#endif
#if defined(IMPLICIT)
    // k = tap * Cg + channel. When Cg is a multiple of BK a slab lies within one tap: its tap is
    // uniform and computed once (no division per element).
    const bool one_tap = p.Cg % BK == 0u;
    const uint rs = k0 / p.Cg;
#endif
#if defined(IMPLICIT) && !defined(WGRAD)
    if (a_kfast) {
        // the weights (k runs fastest across threads): NT is a multiple of BK, so this thread's k, and with it the
        // tap and channel, is the same for every l: one division a slab (at most), not one a value
        const uint gk = k0 + tid % BK, r = one_tap ? rs : gk / p.Cg, ci = gk - r * p.Cg;
        const int koff = int(r) * p.a_sk + int(ci) * p.a_sc;
        [[unroll]] for (uint l = 0; l < LA; ++l) {
            const uint gm = m0 + tid / BK + l * (NT / BK);
            pa[l] = (gm < p.M && gk < kend) ? FACC(a[abase + int(gm) * p.a_sm + koff]) : FACC(0);
        }
    } else
#endif
    [[unroll]] for (uint l = 0; l < LA; ++l) {
        const uint e = tid + l * NT;
        const uint gk = k0 + (a_kfast ? e % BK : e / BM), gm = m0 + (a_kfast ? e / BK : e % BM);
#if defined(IMPLICIT)
        const uint r = one_tap ? rs : gk / p.Cg, ci = gk - r * p.Cg;
        pa[l] = (gm < p.M && gk < kend) ? FACC(a[abase + int(gm) * p.a_sm + int(r) * p.a_sk + int(ci) * p.a_sc]) : FACC(0);
#else
        pa[l] = (gm < p.M && gk < kend) ? FACC(a[abase + int(gm) * p.a_sm + int(gk) * p.a_sk]) : FACC(0);
#endif
    }
#if defined(IMPLICIT) && !defined(WGRAD)
    if (one_tap) {
        // The fast path. NT is a multiple of BN, so this thread's output pixel is the same for every l
        // (poy, pox: computed once per tile) and the slab's tap (i, j) is uniform: one window position
        // and one bounds check per slab; along l only the channel moves.
        const uint i = rs / p.kw, j = rs - i * p.kw, gn = n0 + tid % BN;
        const int iy = int(poy) * lo16(p.S) - lo16(p.P) + int(i) * lo16(p.D);
        const int ix = int(pox) * hi16(p.S) - hi16(p.P) + int(j) * hi16(p.D);
        const bool inside = gn < p.N && iy >= 0 && iy < int(p.HW & 0xffffu) && ix >= 0 && ix < int(p.HW >> 16);
        const int pix = bbase + iy * p.x_sh + ix * p.b_sn;
        [[unroll]] for (uint l = 0; l < LB; ++l) {
            const uint gk = k0 + tid / BN + l * (NT / BN), ci = gk - rs * p.Cg;
            pb[l] = (inside && gk < kend) ? FACC(b[pix + int(ci) * p.b_sk]) : FACC(0);
        }
        return;
    }
#endif
    [[unroll]] for (uint l = 0; l < LB; ++l) {
        const uint e = tid + l * NT;
        const uint gk = k0 + (b_nfast ? e / BN : e % BK), gn = n0 + (b_nfast ? e % BN : e / BK);
#if defined(IMPLICIT)
        // the window element (channel ci, tap (i, j)) of output pixel (oy, ox): zero outside the image
        FACC v = FACC(0);
        if (gn < p.N && gk < kend) {
            const uint r = one_tap ? rs : gk / p.Cg, ci = gk - r * p.Cg, i = r / p.kw, j = r - i * p.kw;
            const uint oy = gn / p.OW, ox = gn - oy * p.OW;
            const int iy = int(oy) * lo16(p.S) - lo16(p.P) + int(i) * lo16(p.D);
            const int ix = int(ox) * hi16(p.S) - hi16(p.P) + int(j) * hi16(p.D);
            if (iy >= 0 && iy < int(p.HW & 0xffffu) && ix >= 0 && ix < int(p.HW >> 16))
                v = FACC(b[bbase + int(ci) * p.b_sk + iy * p.x_sh + ix * p.b_sn]);
        }
        pb[l] = v;
#else
        pb[l] = (gn < p.N && gk < kend) ? FACC(b[bbase + int(gk) * p.b_sk + int(gn) * p.b_sn]) : FACC(0);
#endif
    }
}

void store_slabs(uint buf, uint tid, bool a_kfast, bool b_nfast, FACC pa[LA], FACC pb[LB]) {
#if defined(VEC_LOADS)
    store_a_vec(buf, tid, pa);
    store_b_vec(buf, tid, pb);
    return;
#endif
    [[unroll]] for (uint l = 0; l < LA; ++l) {
        const uint e = tid + l * NT;
        const uint k = a_kfast ? e % BK : e / BM, m = a_kfast ? e / BK : e % BM;
        As[buf][k][m >> 2][m & 3u] = pa[l];
    }
    [[unroll]] for (uint l = 0; l < LB; ++l) {
        const uint e = tid + l * NT;
        const uint k = b_nfast ? e / BN : e % BK, n = b_nfast ? e % BN : e / BK;
        Bs[buf][k][n >> 2][n & 3u] = pb[l];
    }
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint tx = tid % TX, ty = tid / TX;
    const uint tilesM = (p.M + BM - 1) / BM, tilesN = (p.N + BN - 1) / BN;
    const uint nb = p.B1 * p.B2, parts = p.kc > 0u ? (p.K + p.kc - 1u) / p.kc : 1u;
    // uniform choices: which index runs fastest across threads when loading a slab (coalescing)
#if defined(WGRAD)
    const bool a_kfast = true, b_nfast = false;          // k runs over output pixels: neighbouring image columns
#elif defined(IMPLICIT)
    const bool a_kfast = p.a_sm != 1, b_nfast = true;   // neighbouring output pixels: neighbouring image columns
#else
    const bool a_kfast = p.a_sk == 1 || p.a_sm != 1;
    const bool b_nfast = p.b_sn == 1 || p.b_sk != 1;
#endif
    // C in 16-byte stores: rows contiguous and 4-aligned (never f64: 32-byte vectors need an alignment a binding does not promise)
#if defined(T_F64) && !defined(C_F32)
    const bool c_vec = false;
#else
    const bool c_vec = p.c_sn == 1 && ((p.c_sm | p.c_off | p.c_sb1 | p.c_sb2 | p.c_sq) & 3) == 0 && p.N % 4u == 0u;
#endif
    for (uint bq = gl_WorkGroupID.z; bq < nb * parts; bq += gl_NumWorkGroups.z) {
        const uint bz = bq % nb, q = bq / nb;
        const uint b1 = bz / p.B2, b2 = bz % p.B2;
        const uint kbeg = p.kc > 0u ? q * p.kc : 0u, kend = p.kc > 0u ? min(p.K, kbeg + p.kc) : p.K;
        const int abase = p.a_off + int(b1) * p.a_sb1 + int(b2) * p.a_sb2;
        const int bbase = p.b_off + int(b1) * p.b_sb1 + int(b2) * p.b_sb2;
        const int cbase = p.c_off + int(b1) * p.c_sb1 + int(b2) * p.c_sb2 + int(q) * p.c_sq;
        for (uint tm = gl_WorkGroupID.y; tm < tilesM; tm += gl_NumWorkGroups.y)
        for (uint tn = gl_WorkGroupID.x; tn < tilesN; tn += gl_NumWorkGroups.x) {
            const uint m0 = tm * BM, n0 = tn * BN;
            FACC4 acc[TM][TN / 4];
            [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN / 4; ++j) acc[i][j] = FACC4(0);
            FACC pa[LA], pb[LB];
            // this thread's output pixel in the implicit-GEMM fast path (NT is a multiple of BN)
#if defined(IMPLICIT) && !defined(WGRAD)
            const uint pgn = n0 + tid % BN, poy = pgn / p.OW, pox = pgn - poy * p.OW;
#else
            const uint poy = 0u, pox = 0u;
#endif
#if defined(WGRAD)
            wgrad_columns(n0, tid);
#endif
            load_slabs(abase, bbase, m0, n0, kbeg, kend, tid, a_kfast, b_nfast, poy, pox, pa, pb);
            store_slabs(0u, tid, a_kfast, b_nfast, pa, pb);
            barrier();
            uint buf = 0u;
            for (uint k0 = kbeg; k0 < kend; k0 += BK) {
                const bool more = k0 + BK < kend;
                if (more) load_slabs(abase, bbase, m0, n0, k0 + BK, kend, tid, a_kfast, b_nfast, poy, pox, pa, pb);
#if defined(FRAG2)
                // fragments double-buffered in registers: kk + 1's shared loads issue before kk's multiply-adds
                FACC4 a0[TM / 4], b0[TN / 4], a1[TM / 4], b1[TN / 4];
                [[unroll]] for (uint i = 0; i < TM / 4; ++i) a0[i] = As[buf][0][i * TY + ty];
                [[unroll]] for (uint j = 0; j < TN / 4; ++j) b0[j] = Bs[buf][0][j * TX + tx];
                [[unroll]] for (uint kk = 0; kk < BK; kk += 2) {
                    [[unroll]] for (uint i = 0; i < TM / 4; ++i) a1[i] = As[buf][kk + 1][i * TY + ty];
                    [[unroll]] for (uint j = 0; j < TN / 4; ++j) b1[j] = Bs[buf][kk + 1][j * TX + tx];
                    FMA_BLOCK(a0, b0);
                    {   // (the last pair reloads row BK - 1: one spare load keeps the loop unrollable)
                        const uint k2 = min(kk + 2, BK - 1);
                        [[unroll]] for (uint i = 0; i < TM / 4; ++i) a0[i] = As[buf][k2][i * TY + ty];
                        [[unroll]] for (uint j = 0; j < TN / 4; ++j) b0[j] = Bs[buf][k2][j * TX + tx];
                    }
                    FMA_BLOCK(a1, b1);
                }
#else
                [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
                    FACC4 ar[TM / 4], br[TN / 4];
                    [[unroll]] for (uint i = 0; i < TM / 4; ++i) ar[i] = As[buf][kk][i * TY + ty];
                    [[unroll]] for (uint j = 0; j < TN / 4; ++j) br[j] = Bs[buf][kk][j * TX + tx];
                    FMA_BLOCK(ar, br);
                }
#endif
                if (more) store_slabs(buf ^ 1u, tid, a_kfast, b_nfast, pa, pb);
                barrier();
                buf ^= 1u;
            }
            // thread (tx, ty) owns rows 4*(i*TY + ty) + r and columns 4*(j*TX + tx) + 0..3
            [[unroll]] for (uint i = 0; i < TM / 4; ++i)
            [[unroll]] for (uint r = 0; r < 4; ++r) {
                const uint gm = m0 + 4 * (i * TY + ty) + r;
                if (gm >= p.M) continue;
                [[unroll]] for (uint j = 0; j < TN / 4; ++j) {
                    const uint gn = n0 + 4 * (j * TX + tx);
                    const FACC4 v = acc[i * 4 + r][j];
                    if (c_vec && gn < p.N) c4[(cbase + int(gm) * p.c_sm + int(gn)) >> 2] = TCV4(v);
                    else [[unroll]] for (uint u = 0; u < 4; ++u)
                        if (gn + u < p.N) c[cbase + int(gm) * p.c_sm + int(gn + u) * p.c_sn] = TC(v[u]);
                }
            }
        }
    }
}
#endif
