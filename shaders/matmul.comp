#version 450
// C[b] = A[b] @ B[b]: (M,K) @ (K,N) -> (M,N) for every batch b, accumulated in FACC (f32; f64 for f64).
// Tiled: a workgroup owns a BM x BN tile of C and walks K in steps of BK, staging the A and B
// slabs through shared memory; each of its (BM/TM)*(BN/TN) threads owns TM x TN outputs
// (register blocking), strided by the thread grid so that neighbouring threads touch neighbouring
// columns. Operands are read through element strides (transposed or broadcast operands need no
// copy). The batch index is two-level, b = b1*B2 + b2, each level with its own strides, so that
// a grouped convolution is one dispatch. Every grid dimension loops, so any extent fits under
// the 65,535-workgroup limit; every load and store is guarded, so any M, N, K (0 and 1 included).
// With SMALL defined: the variant for tiny products (one TM x TN block per thread, 1-D launch of
// 64-thread groups over batch x blocks, no shared memory), same push constants.
// lavapipe stops an invocation's loops after 65,535 trips in total (K loops and grid loops together),
// silently: when a product's trips would pass that, the host splits K into several dispatches writing
// f32 partials, summed by reduce_final (kernels_nn.matmul_dispatch).
#include "nn_common.glsl"
#extension GL_EXT_control_flow_attributes : require

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


// C_F32: C is stored as f32 whatever T is (f16 products kept unrounded for a following pass).
#if defined(C_F32)
#define TC float
#else
#define TC T
#endif
layout(std430, set = 0, binding = 0) writeonly buffer OutC { TC c[]; };
layout(std430, set = 0, binding = 1) readonly buffer InA { T a[]; };
layout(std430, set = 0, binding = 2) readonly buffer InB { T b[]; };

layout(push_constant) uniform PC {
    uint M, N, K, B1, B2;
    int a_off, a_sb1, a_sb2, a_sm, a_sk;
    int b_off, b_sb1, b_sb2, b_sk, b_sn;
    int c_off, c_sb1, c_sb2, c_sm, c_sn;
} p;

#if defined(SMALL)
// Small products (M*N at most a few tiles' worth, e.g. many tiny batched matrices): a 64x64 tile
// would leave most of its 256 threads idle, so here each thread owns one TM x TN register block
// of one batch's C and reads A and B straight from global memory: no shared memory, no barriers.
layout(local_size_x = 64) in;

void main() {
    const uint gid = GID;
    const uint bm = (p.M + TM - 1) / TM, bn = (p.N + TN - 1) / TN;
    if (gid >= bm * bn * p.B1 * p.B2) return;
    const uint jn = gid % bn, r = gid / bn, im = r % bm, bz = r / bm;
    const uint b1 = bz / p.B2, b2 = bz % p.B2;
    const int abase = p.a_off + int(b1) * p.a_sb1 + int(b2) * p.a_sb2;
    const int bbase = p.b_off + int(b1) * p.b_sb1 + int(b2) * p.b_sb2;
    const int cbase = p.c_off + int(b1) * p.c_sb1 + int(b2) * p.c_sb2;
    const uint m0 = im * TM, n0 = jn * TN;
    FACC acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = FACC(0);
    for (uint k = 0; k < p.K; ++k) {
        FACC ar[TM], br[TN];
        [[unroll]] for (uint i = 0; i < TM; ++i)
            ar[i] = m0 + i < p.M ? FACC(a[abase + int(m0 + i) * p.a_sm + int(k) * p.a_sk]) : FACC(0);
        [[unroll]] for (uint j = 0; j < TN; ++j)
            br[j] = n0 + j < p.N ? FACC(b[bbase + int(k) * p.b_sk + int(n0 + j) * p.b_sn]) : FACC(0);
        [[unroll]] for (uint i = 0; i < TM; ++i)
            [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = fma(ar[i], br[j], acc[i][j]);
    }
    [[unroll]] for (uint i = 0; i < TM; ++i) {
        if (m0 + i >= p.M) break;
        [[unroll]] for (uint j = 0; j < TN; ++j)
            if (n0 + j < p.N) c[cbase + int(m0 + i) * p.c_sm + int(n0 + j) * p.c_sn] = TC(acc[i][j]);
    }
}

#else
layout(local_size_x = NT) in;

// +1 column of padding: the transposed writes of a slab hit distinct banks.
shared FACC As[BK][BM + 1];
shared FACC Bs[BK][BN + 1];


#define LA (BM * BK / NT)   // A values each thread stages per slab
#define LB (BK * BN / NT)   // B values

// Read the (BM x BK) slab of A and the (BK x BN) slab of B starting at k0 into registers, zero
// outside the matrices. Thread tid takes elements e = tid + l*NT of each slab, with the index
// that has unit stride running fastest across threads (coalesced).
void load_slabs(int abase, int bbase, uint m0, uint n0, uint k0, uint tid, bool a_kfast, bool b_nfast,
                out FACC pa[LA], out FACC pb[LB]) {
    [[unroll]] for (uint l = 0; l < LA; ++l) {
        const uint e = tid + l * NT;
        const uint gk = k0 + (a_kfast ? e % BK : e / BM), gm = m0 + (a_kfast ? e / BK : e % BM);
        pa[l] = (gm < p.M && gk < p.K) ? FACC(a[abase + int(gm) * p.a_sm + int(gk) * p.a_sk]) : FACC(0);
    }
    [[unroll]] for (uint l = 0; l < LB; ++l) {
        const uint e = tid + l * NT;
        const uint gk = k0 + (b_nfast ? e / BN : e % BK), gn = n0 + (b_nfast ? e % BN : e / BK);
        pb[l] = (gn < p.N && gk < p.K) ? FACC(b[bbase + int(gk) * p.b_sk + int(gn) * p.b_sn]) : FACC(0);
    }
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint tx = tid % TX, ty = tid / TX;
    const uint tilesM = (p.M + BM - 1) / BM, tilesN = (p.N + BN - 1) / BN;
    const uint nb = p.B1 * p.B2;
    // uniform choices: which index runs fastest across threads when loading a slab (coalescing)
    const bool a_kfast = p.a_sk == 1 || p.a_sm != 1;
    const bool b_nfast = p.b_sn == 1 || p.b_sk != 1;
    for (uint bz = gl_WorkGroupID.z; bz < nb; bz += gl_NumWorkGroups.z) {
        const uint b1 = bz / p.B2, b2 = bz % p.B2;
        const int abase = p.a_off + int(b1) * p.a_sb1 + int(b2) * p.a_sb2;
        const int bbase = p.b_off + int(b1) * p.b_sb1 + int(b2) * p.b_sb2;
        const int cbase = p.c_off + int(b1) * p.c_sb1 + int(b2) * p.c_sb2;
        for (uint tm = gl_WorkGroupID.y; tm < tilesM; tm += gl_NumWorkGroups.y)
        for (uint tn = gl_WorkGroupID.x; tn < tilesN; tn += gl_NumWorkGroups.x) {
            const uint m0 = tm * BM, n0 = tn * BN;
            FACC acc[TM][TN];
            [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = FACC(0);
            // Register prefetch: the next slab's global loads are issued before this slab's
            // multiplies, so their latency hides behind arithmetic. LA/LB values per thread.
            FACC pa[LA], pb[LB];
            load_slabs(abase, bbase, m0, n0, 0u, tid, a_kfast, b_nfast, pa, pb);
            for (uint k0 = 0; k0 < p.K; k0 += BK) {
                [[unroll]] for (uint l = 0; l < LA; ++l) {
                    const uint e = tid + l * NT;
                    As[a_kfast ? e % BK : e / BM][a_kfast ? e / BK : e % BM] = pa[l];
                }
                [[unroll]] for (uint l = 0; l < LB; ++l) {
                    const uint e = tid + l * NT;
                    Bs[b_nfast ? e / BN : e % BK][b_nfast ? e % BN : e / BK] = pb[l];
                }
                barrier();
                if (k0 + BK < p.K) load_slabs(abase, bbase, m0, n0, k0 + BK, tid, a_kfast, b_nfast, pa, pb);
                [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
                    FACC ar[TM], br[TN];
                    [[unroll]] for (uint i = 0; i < TM; ++i) ar[i] = As[kk][ty + i * TY];
                    [[unroll]] for (uint j = 0; j < TN; ++j) br[j] = Bs[kk][tx + j * TX];
                    [[unroll]] for (uint i = 0; i < TM; ++i)
                        [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = fma(ar[i], br[j], acc[i][j]);
                }
                barrier();
            }
            [[unroll]] for (uint i = 0; i < TM; ++i) {
                const uint gm = m0 + ty + i * TY;
                if (gm >= p.M) break;
                [[unroll]] for (uint j = 0; j < TN; ++j) {
                    const uint gn = n0 + tx + j * TX;
                    if (gn < p.N) c[cbase + int(gm) * p.c_sm + int(gn) * p.c_sn] = TC(acc[i][j]);
                }
            }
        }
    }
}
#endif
