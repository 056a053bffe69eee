#version 450
#extension GL_GOOGLE_include_directive : require
// C[b] = A[b] @ B[b] on tensor cores: f16 operands, f32 accumulators, cooperative matrices
// (GL_KHR_cooperative_matrix, 16 x 16 x 16 fragments owned by a subgroup of 32). Same push constants
// and batch / split-K semantics as matmul.comp.
// A workgroup of SGM x SGN subgroups owns a BM x BN block of C; subgroup (sm, sn) owns FR x FC
// fragments of it (rows (sm*FR + i)*16, columns (sn*FC + j)*16). K is walked in slabs of BK: the
// workgroup copies the BM x BK slab of A and the BK x BN slab of B from global memory into shared
// memory in 16-byte vectors (8 halves), each subgroup loads its A fragments once per 16-deep step
// and reuses each for FC products (each B fragment for FR), and the next slab's global loads are
// issued before this slab's products so their latency hides behind the tensor cores (DBUF: stored into
// a second slab buffer after them, one barrier per slab instead of two). Shared rows carry 16 bytes
// of padding so that fragment loads hit distinct banks.
// Either operand may be stored with either index contiguous (a transposed operand needs no copy):
// the slab keeps the global layout and the fragment load says row- or column-major. Which layout each
// operand has is fixed when compiling (AT: A stored m-contiguous, BT: B stored k-contiguous; one variant per
// pair, `_v<a><b>` as matmul.comp's 16-byte twins): read from the strides at run time, the branches held the H100
// at 101 TFLOP/s (4096^3, 128x128 blocks) against 186 with the layout fixed. The host uses
// this kernel only when every vector is whole: the contiguous index has unit stride, the other
// strides, the offsets and the contiguous extents are multiples of 8, and K is too.
// C goes out through shared memory (one fragment at a time per subgroup), guarded element by
// element, so any M and N, any strides of C, and f16 or f32 output (C_F32).
// EMULATE: the same kernel with the fragments emulated in plain GLSL (a logical subgroup is 32
// consecutive invocations, each lane holding 8 elements of an accumulator; a loaded fragment is a
// reference into shared memory), so that lavapipe, which has no cooperative matrices, tests every
// index of this file.
#include "nn_common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#ifndef EMULATE
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef SGM
#define SGM 2
#endif
#ifndef SGN
#define SGN 4
#endif
#define NSG (SGM * SGN)
#define NT (NSG * 32)
#define FR (BM / 16 / SGM)
#define FC (BN / 16 / SGN)
#define PAD 8                       // halves of padding per shared row
#define VA (BM * BK / 8)            // 16-byte vectors per slab of A
#define VB (BK * BN / 8)
#define LA (VA / NT)                // ... per thread
#define LB (VB / NT)
#define ASH (max(BM * (BK + PAD), BK * (BM + PAD)) / 8)
#define BSH (max(BK * (BN + PAD), BN * (BK + PAD)) / 8)

layout(local_size_x = NT) in;

#if defined(C_F32)
#define TC float
#else
#define TC T
#endif
layout(std430, set = 0, binding = 0) writeonly buffer OutC { TC c[]; };
layout(std430, set = 0, binding = 1) readonly buffer InA { uvec4 a4[]; };   // f16, 8 per vector
layout(std430, set = 0, binding = 2) readonly buffer InB { uvec4 b4[]; };

layout(push_constant) uniform PC {
    uint M, N, K, B1, B2;
    int a_off, a_sb1, a_sb2, a_sm, a_sk;
    int b_off, b_sb1, b_sb2, b_sk, b_sn;
    int c_off, c_sb1, c_sb2, c_sm, c_sn;
    uint kc;   // split K: terms per chunk, a multiple of BK (0: no split)
    int c_sq;  // split K: C's stride between chunks' partials
} p;

// DBUF: two slabs of each (the next slab is stored while this one is multiplied: one barrier per slab)
#ifdef DBUF
#define NBUF 2u
#else
#define NBUF 1u
#endif
shared uvec4 Ash[NBUF * ASH];   // also the staging area of C at the end (NSG * 64 vectors)
shared uvec4 Bsh[NBUF * BSH];

#ifdef EMULATE
struct Frag { uint off; uint stride; bool col; };   // a fragment: where its (0, 0) is, in halves
float half_at(bool b, uint e) {
    uvec4 v = b ? Bsh[e >> 3] : Ash[e >> 3];
    vec2 h = unpackHalf2x16(v[(e >> 1) & 3u]);
    return (e & 1u) == 1u ? h.y : h.x;
}
float at(bool b, Frag f, uint r, uint c) { return half_at(b, f.col ? f.off + c * f.stride + r : f.off + r * f.stride + c); }
#define FRAG_A Frag
#define FRAG_B Frag
#define LOAD(f, off_, stride_, colmajor) f = Frag(off_, stride_, colmajor)
#else
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#endif

void main() {
    const uint tid = gl_LocalInvocationID.x;
#ifdef EMULATE
    const uint sg = tid / 32u, lane = tid % 32u;
#else
    const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
#endif
    const uint sm = sg / SGN, sn = sg % SGN;
    const uint tilesM = (p.M + BM - 1) / BM, tilesN = (p.N + BN - 1) / BN;
    const uint nb = p.B1 * p.B2, parts = p.kc > 0u ? (p.K + p.kc - 1u) / p.kc : 1u;
#if !defined(AT) || !defined(BT)
#error "AT and BT (the operands' layouts) are fixed when compiling"
#endif
    const bool at_ = AT != 0;   // A stored m-contiguous (transposed): slab rows are k
    const bool bt_ = BT != 0;   // B stored k-contiguous: slab rows are n
    const uint arow = at_ ? BM + PAD : BK + PAD, brow = bt_ ? BK + PAD : BN + PAD;   // shared row lengths (halves)
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
#ifdef EMULATE
            float acc[FR][FC][8];
            [[unroll]] for (uint i = 0; i < FR; ++i) [[unroll]] for (uint j = 0; j < FC; ++j)
                [[unroll]] for (uint e = 0; e < 8; ++e) acc[i][j][e] = 0.0;
#else
            FRAG_C acc[FR][FC];
            [[unroll]] for (uint i = 0; i < FR; ++i) [[unroll]] for (uint j = 0; j < FC; ++j) acc[i][j] = FRAG_C(0.0);
#endif
            uvec4 ra[LA], rb[LB];
            // vector v of a slab: row v / (vectors per row), vector v % (...) along the contiguous index
            #define LOAD_SLABS(k0) \
            [[unroll]] for (uint l = 0; l < LA; ++l) { \
                const uint v = tid + l * NT, per = at_ ? BM / 8 : BK / 8, r = v / per, cv = (v % per) * 8u; \
                const uint gm = at_ ? m0 + cv : m0 + r, gk = at_ ? (k0) + r : (k0) + cv; \
                ra[l] = (gm < p.M && gk < kend) ? a4[(abase + int(gm) * p.a_sm + int(gk) * p.a_sk) >> 3] : uvec4(0u); \
            } \
            [[unroll]] for (uint l = 0; l < LB; ++l) { \
                const uint v = tid + l * NT, per = bt_ ? BK / 8 : BN / 8, r = v / per, cv = (v % per) * 8u; \
                const uint gn = bt_ ? n0 + r : n0 + cv, gk = bt_ ? (k0) + cv : (k0) + r; \
                rb[l] = (gn < p.N && gk < kend) ? b4[(bbase + int(gk) * p.b_sk + int(gn) * p.b_sn) >> 3] : uvec4(0u); \
            }
            #define STORE_SLABS(buf) \
            [[unroll]] for (uint l = 0; l < LA; ++l) { \
                const uint v = tid + l * NT, per = at_ ? BM / 8 : BK / 8; \
                Ash[(buf) * ASH + (v / per) * (arow / 8u) + v % per] = ra[l]; \
            } \
            [[unroll]] for (uint l = 0; l < LB; ++l) { \
                const uint v = tid + l * NT, per = bt_ ? BK / 8 : BN / 8; \
                Bsh[(buf) * BSH + (v / per) * (brow / 8u) + v % per] = rb[l]; \
            }
            LOAD_SLABS(kbeg)
#ifdef DBUF
            barrier();   // a workgroup with more than one tile (grid-stride): every subgroup has read its staged C
            STORE_SLABS(0u)
            barrier();
            uint buf = 0u;
#else
            const uint buf = 0u;
#endif
            for (uint k0 = kbeg; k0 < kend; k0 += BK) {
#ifdef DBUF
                const bool more = k0 + BK < kend;
                if (more) { LOAD_SLABS(k0 + BK) }
#else
                barrier();   // every subgroup is done with the previous slab
                STORE_SLABS(0u)
                barrier();
                if (k0 + BK < kend) { LOAD_SLABS(k0 + BK) }
#endif
                const uint ao = buf * ASH * 8u, bo = buf * BSH * 8u;   // this slab's first half in Ash, Bsh
                [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                    FRAG_A fa[FR];
                    [[unroll]] for (uint i = 0; i < FR; ++i) {
                        const uint si = (sm * FR + i) * 16u;
#ifdef EMULATE
                        fa[i] = at_ ? Frag(ao + kk * arow + si, arow, true) : Frag(ao + si * arow + kk, arow, false);
#else
                        if (at_) coopMatLoad(fa[i], Ash, (ao + kk * arow + si) / 8u, arow / 8u, gl_CooperativeMatrixLayoutColumnMajor);
                        else coopMatLoad(fa[i], Ash, (ao + si * arow + kk) / 8u, arow / 8u, gl_CooperativeMatrixLayoutRowMajor);
#endif
                    }
                    [[unroll]] for (uint j = 0; j < FC; ++j) {
                        const uint sj = (sn * FC + j) * 16u;
                        FRAG_B fb;
#ifdef EMULATE
                        fb = bt_ ? Frag(bo + sj * brow + kk, brow, true) : Frag(bo + kk * brow + sj, brow, false);
                        // (loops, not unrolled: the emulation is for correctness; its trips count
                        // against lavapipe's budget, so the tests keep K short)
                        [[dont_unroll]] for (uint i = 0; i < FR; ++i)
                            [[dont_unroll]] for (uint e = 0; e < 8; ++e) {
                                const uint x = lane + 32u * e, r = x / 16u, cc = x % 16u;
                                float s = acc[i][j][e];
                                [[dont_unroll]] for (uint t = 0; t < 16; ++t) s = fma(at(false, fa[i], r, t), at(true, fb, t, cc), s);
                                acc[i][j][e] = s;
                            }
#else
                        if (bt_) coopMatLoad(fb, Bsh, (bo + sj * brow + kk) / 8u, brow / 8u, gl_CooperativeMatrixLayoutColumnMajor);
                        else coopMatLoad(fb, Bsh, (bo + kk * brow + sj) / 8u, brow / 8u, gl_CooperativeMatrixLayoutRowMajor);
                        [[unroll]] for (uint i = 0; i < FR; ++i) acc[i][j] = coopMatMulAdd(fa[i], fb, acc[i][j]);
#endif
                    }
                }
#ifdef DBUF
                if (more) { STORE_SLABS(buf ^ 1u) }
                barrier();
                buf ^= 1u;
#endif
            }
            // out through shared memory: subgroup sg stages one 16 x 16 f32 fragment at a time in
            // Ash[sg * 64 ...] (row-major, 4 vectors a row); lane reads elements lane + 32e
            barrier();
            [[unroll]] for (uint i = 0; i < FR; ++i)
            [[unroll]] for (uint j = 0; j < FC; ++j) {
#ifdef EMULATE
                [[unroll]] for (uint e = 0; e < 8; ++e) {
                    const uint x = lane + 32u * e;
                    Ash[sg * 64u + x / 4u][x % 4u] = floatBitsToUint(acc[i][j][e]);
                }
                barrier();
#else
                coopMatStore(acc[i][j], Ash, sg * 64u, 4u, gl_CooperativeMatrixLayoutRowMajor);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
#endif
                const uint gm0 = m0 + (sm * FR + i) * 16u, gn0 = n0 + (sn * FC + j) * 16u;
                [[unroll]] for (uint e = 0; e < 8; ++e) {
                    const uint x = lane + 32u * e, gm = gm0 + x / 16u, gn = gn0 + x % 16u;
                    if (gm < p.M && gn < p.N) c[cbase + int(gm) * p.c_sm + int(gn) * p.c_sn] = TC(uintBitsToFloat(Ash[sg * 64u + x / 4u][x % 4u]));
                }
#ifdef EMULATE
                barrier();
#else
                subgroupMemoryBarrierShared();
                subgroupBarrier();
#endif
            }
        }
    }
}
