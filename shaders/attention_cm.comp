#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention on tensor cores: attention.comp's kernels (same push constants and bindings; its DK and DV as one
// kernel, DKV, writing dk and dv side by side in each row, y_sl apart) for f16
// q, k, v, do whose rows are 16-byte vectors (E, Ev multiples of 8 and at most 64; offsets and strides multiples of 8:
// the host checks: kernels_nn.attention_cm). The products run on 16 x 16 x 16 cooperative matrices (f16 operands,
// f32 accumulators); what a product cannot do, the softmax, runs in plain code between them:
//   a workgroup of SG subgroups owns SG*16 rows (queries for ATTENTION, STATS and DQ; keys for DKV), staged
//   once into shared memory; it walks the other side in blocks of BC rows, staged in turn. Per block, each subgroup
//     1. multiplies its 16 owned rows by the block (scores S = Q Kᵀ, or Sᵀ = K Qᵀ) into a f32 scratch,
//     2. reads the scratch back as plain floats, two lanes a row, BC/2 scores each, and forms the softmax's p
//        (online: the running max m and sum l per query, FlashAttention's rescaling) and, for the gradients,
//        dp (a second product) and ds = p (dp - D); p or ds goes back to shared memory as f16,
//     3. multiplies that by the block's other tensor into accumulators it keeps across blocks (o, dq; DKV: dv from
//        p and dk from ds, one walk computing both: p is what dk's ds needs anyway).
// The online softmax rescales o row by row, but which row an accumulator's element belongs to is the
// implementation's choice: it is read once from a matrix loaded with each element's row (`rowmap`).
// Scores stay f32 from product to exponential; p and ds are rounded to f16 for the second product, as
// FlashAttention does on f16. EMULATE: the same kernel with the fragments in plain GLSL (a logical subgroup is 32
// consecutive invocations; element e of lane x's accumulator is (row, col) = ((x + 32e) / 16, (x + 32e) % 16)), which
// lavapipe runs in the tests.
#include "nn_common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifndef EMULATE
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif

#ifndef SG
#define SG 2                 // subgroups a workgroup; it owns SG*16 rows
#endif
#ifndef BC
#define BC 32                // rows of the other side a block
#endif
#define D 64                 // head dims held (zeros past E and Ev)
#define NT (SG * 32)
#define OWN (SG * 16)
#define HST (D + 8)          // a staged row in halves: 8 of padding so fragment loads hit distinct banks
#define PST (BC + 8)         // a row of p (or ds), halves
#define SST (BC + 4)         // a row of the f32 scratch: BC scores, then the row's factor (column BC)
#define LOG2E 1.4426950408889634
#if BC < 32 || BC % 32 != 0
#error "BC: a multiple of 32 (the scratch holds two output fragments a row)"
#endif
#if BC > NT
#error "BC: at most the workgroup's threads (DKV stages a block's statistics one row a thread)"
#endif
layout(local_size_x = NT) in;

#if defined(DQ) || defined(DKV)
#define OWN1 1               // a second owned tensor: do (DQ) or v (DKV)
#endif
#if !defined(STATS)
#define WALK1 1              // a second walked tensor: v (ATTENTION, DQ) or do (DKV)
#endif
// the f16 arena, in halves: the owned rows (one or two tensors), the walked block (one or two), p per subgroup
#define O0 0
#if defined(OWN1)
#define O1 (OWN * HST)
#define W0 (2 * OWN * HST)
#else
#define W0 (OWN * HST)
#endif
#define W1 (W0 + BC * HST)
#if defined(WALK1)
#define PA (W0 + 2 * BC * HST)
#else
#define PA (W0 + BC * HST)
#endif
#define NH (PA + SG * 16 * PST)
shared uvec4 H[NH / 8];
shared float Ssh[SG * 16 * SST];
#if defined(DKV)
shared float tileL[BC], tileD[BC];
#endif

#if defined(STATS)
layout(std430, set = 0, binding = 0) writeonly buffer Out { float y[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer Out { T y[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer InQ { uvec4 q4[]; };
layout(std430, set = 0, binding = 2) readonly buffer InK { uvec4 k4[]; };
layout(std430, set = 0, binding = 3) readonly buffer InC { uvec4 c4[]; };   // v (o for STATS)
#if defined(STATS)
layout(std430, set = 0, binding = 3) readonly buffer InCs { T cb[]; };
layout(std430, set = 0, binding = 4) readonly buffer InDs { T db[]; };
#endif
#if !defined(ATTENTION)
layout(std430, set = 0, binding = 4) readonly buffer InD { uvec4 d4[]; };  // do
#endif
#if defined(DQ) || defined(DKV)
layout(std430, set = 0, binding = 5) readonly buffer InS { float st[]; };  // (lse2, D) per query row
layout(std430, set = 0, binding = 6) readonly buffer InM { T mb[]; };
#elif defined(STATS)
layout(std430, set = 0, binding = 5) readonly buffer InM { T mb[]; };
#else
layout(std430, set = 0, binding = 4) readonly buffer InM { T mb[]; };
#endif

layout(push_constant) uniform PC {
    int B1, L, S, E, EV, causal; float sl2, scale;
    int q_off, q_s0, q_s1, q_sl;
    int k_off, k_s0, k_s1, k_sl;
    int c_off, c_s0, c_s1, c_sl;
    int d_off, d_s0, d_s1, d_sl;
    int m_off, m_s0, m_s1, m_sl, m_se;
    int st_off, y_off, y_sl;   // y_sl: the gradients' row stride (dk and dv side by side for DKV)
} p;
// causal: bit 0 hides key j from query i < j; bit 1 (HEADS_OUT, the gradients) lays each gradient out (B0, rows, B1, w)
// inside rows y_sl apart, as PyTorch's (B, L, H, E): the heads side by side, so that merging them is a view
#define CAUSAL ((p.causal & 1) != 0)
#define HEADS_OUT ((p.causal & 2) != 0)
// where row `me` of batch (b0, b1) of a gradient `w` wide starts in y
int y_row(int b0, int b1, int rows, int me, int w) {
    return HEADS_OUT ? (b0 * rows + me) * p.y_sl + b1 * w : ((b0 * p.B1 + b1) * rows + me) * p.y_sl;
}

// ---- the fragments: cooperative matrices, or their emulation ----
#ifdef EMULATE
struct Acc { float v[8]; };
#define FRAGC Acc
#define NEL 8u
#define EL(a, i) a.v[i]
#define ROW(i) ((lane + 32u * (i)) / 16u)
#define SG_SYNC() { memoryBarrierShared(); barrier(); }
#define UNROLL [[dont_unroll]]
float hat(uint e) { const vec2 h = unpackHalf2x16(H[e >> 3][(e >> 1) & 3u]); return (e & 1u) == 1u ? h.y : h.x; }
void zero(out Acc a) { [[unroll]] for (uint e = 0; e < 8; ++e) a.v[e] = 0.0; }
// a += A B: A (16 x 16) at halves aoff of the arena with row stride ast (column-major if acol), B likewise
void mma(inout Acc a, uint aoff, uint ast, bool acol, uint boff, uint bst, bool bcol, uint lane) {
    [[dont_unroll]] for (uint e = 0; e < 8; ++e) {
        const uint x = lane + 32u * e, r = x / 16u, c = x % 16u;
        float s = a.v[e];
        [[unroll]] for (uint t = 0; t < 16; ++t)
            s = fma(hat(acol ? aoff + t * ast + r : aoff + r * ast + t), hat(bcol ? boff + c * bst + t : boff + t * bst + c), s);
        a.v[e] = s;
    }
}
void store_s(Acc a, uint off, uint lane) {   // into the f32 scratch, row-major, row stride SST
    [[unroll]] for (uint e = 0; e < 8; ++e) { const uint x = lane + 32u * e; Ssh[off + (x / 16u) * SST + x % 16u] = a.v[e]; }
}
struct Frag { uint off; uint st; bool col; };   // a loaded fragment: where it lies in the arena
#define FRAGA Frag
#define FRAGB Frag
#define ZERO(a) zero(a)
#define LOADF(f, off, st, col) f = Frag(off, st, col)
#define MMA(a, fa, fb) mma(a, fa.off, fa.st, fa.col, fb.off, fb.st, fb.col, lane)
#define STORE_S(a, off) store_s(a, off, lane)
#else
#define FRAGA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAGB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAGC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define NEL uint(rowmap.length())
#define EL(a, i) a[i]
#define ROW(i) uint(rowmap[i])
#define SG_SYNC() { subgroupMemoryBarrierShared(); subgroupBarrier(); }
#define UNROLL [[unroll]]
#define LAYOUT(col) ((col) ? gl_CooperativeMatrixLayoutColumnMajor : gl_CooperativeMatrixLayoutRowMajor)
#define ZERO(a) a = FRAGC(0.0)
#define LOADF(f, off, st, col) coopMatLoad(f, H, (off) / 8u, (st) / 8u, LAYOUT(col))
#define MMA(a, fa, fb) a = coopMatMulAdd(fa, fb, a)
#define STORE_S(a, off) coopMatStore(a, Ssh, off, SST, gl_CooperativeMatrixLayoutRowMajor)
#endif

// Rows r0 .. r0+NR-1 of a tensor (halves: batch base, row stride sl; `rows` rows of n dims) in 16-byte vectors, VPT(NR)
// a thread, into registers (zeros past its rows and dims); PLACE puts them at halves `dst` of the arena. A walked
// block is fetched a block ahead, so that its loads' latency hides behind this block's products.
#define VPT(NR) ((NR) * (D / 8) / NT)
#define FETCH(R, BUF, base, sl, n, r0, NR, rows)                                                    \
    [[unroll]] for (uint t_ = 0; t_ < VPT(NR); ++t_) {                                              \
        const uint f_ = t_ * NT + tid, r_ = f_ / (D / 8), v_ = f_ % (D / 8);                         \
        R[t_] = (int(r0) + int(r_) < (rows) && int(v_) * 8 < (n)) ? BUF[((base) + (int(r0) + int(r_)) * (sl) + int(v_) * 8) >> 3] : uvec4(0u); \
    }
#define PLACE(R, dst, NR) \
    [[unroll]] for (uint t_ = 0; t_ < VPT(NR); ++t_) { const uint f_ = t_ * NT + tid; H[(dst) / 8u + (f_ / (D / 8)) * (HST / 8u) + f_ % (D / 8)] = R[t_]; }
#define STAGE(BUF, dst, base, sl, n, r0, NR, rows) { uvec4 R_[VPT(NR)]; FETCH(R_, BUF, base, sl, n, r0, NR, rows) PLACE(R_, dst, NR) }

// this subgroup's 16 owned rows times the block's BC rows (both staged k-contiguous, D deep) into its scratch;
// each A fragment is loaded once and used for the BC/16 products
#define PRODUCT_ROWS(own, walk) { \
    FRAGC s_[BC / 16]; \
    [[unroll]] for (uint j = 0; j < BC / 16; ++j) ZERO(s_[j]); \
    UNROLL for (uint d = 0; d < D / 16; ++d) { \
        FRAGA fa_; LOADF(fa_, (own) + sg * 16u * HST + d * 16u, HST, false); \
        UNROLL for (uint j = 0; j < BC / 16; ++j) { FRAGB fb_; LOADF(fb_, (walk) + j * 16u * HST + d * 16u, HST, true); MMA(s_[j], fa_, fb_); } \
    } \
    UNROLL for (uint j = 0; j < BC / 16; ++j) STORE_S(s_[j], sbase + j * 16u); }
// acc[f] += (this subgroup's p, 16 x BC) x (the block's BC rows of a tensor staged at `walk`), output dims f*16 ..
#define PRODUCT_P(acc, walk) \
    UNROLL for (uint kk = 0; kk < BC / 16; ++kk) { \
        FRAGA fa_; LOADF(fa_, pbase + kk * 16u, PST, false); \
        UNROLL for (uint f = 0; f < D / 16; ++f) { FRAGB fb_; LOADF(fb_, (walk) + kk * 16u * HST + f * 16u, HST, false); MMA(acc[f], fa_, fb_); } \
    }

// acc's rows times each row's factor in column BC of the scratch (read once per element: an accumulator of 16 x 16
// over a subgroup of 32 holds 8 elements a lane, the same rows in every fragment)
#define RESCALE(acc) { \
    float af_[8]; \
    for (uint i = 0; i < NEL; ++i) af_[i] = Ssh[sbase + ROW(i) * SST + BC]; \
    [[unroll]] for (uint f = 0; f < D / 16; ++f) for (uint i = 0; i < NEL; ++i) EL(acc[f], i) *= af_[i]; }

// acc (its first n dims, times sc) out to row `me` of y at yb, through the scratch two fragments (32 dims) at a time:
// lane pair (lr, lh) writes row lr, 16 dims each
#define STORE_OUT(acc, yb, n, sc) \
    [[unroll]] for (uint f = 0; f < D / 16; f += 2) { \
        STORE_S(acc[f], sbase); \
        STORE_S(acc[f + 1], sbase + 16u); \
        SG_SYNC(); \
        if (live) \
            [[unroll]] for (uint c = 0; c < 16; ++c) { \
                const int e = int(f * 16u + lh * 16u + c); \
                if (e < (n)) y[(yb) + e] = T(Ssh[sbase + lr * SST + lh * 16u + c] * (sc)); \
            } \
        SG_SYNC(); \
    }

// This lane's BC/2 values (row lr of the subgroup's 16, from column lh*BC/2) as f16 into its row of p.
void put_p(uint pbase, uint lr, uint lh, float v[BC / 2]) {
    [[unroll]] for (uint u = 0; u < BC / 16; ++u)
        H[(pbase + lr * PST + lh * (BC / 2)) / 8u + u] = uvec4(packHalf2x16(vec2(v[8 * u], v[8 * u + 1])), packHalf2x16(vec2(v[8 * u + 2], v[8 * u + 3])),
                                                                packHalf2x16(vec2(v[8 * u + 4], v[8 * u + 5])), packHalf2x16(vec2(v[8 * u + 6], v[8 * u + 7])));
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
#ifdef EMULATE
    const uint sg = tid / 32u, lane = tid % 32u;
#else
    const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
#endif
    const int bb = int(gl_WorkGroupID.y), b0 = bb / p.B1, b1 = bb % p.B1;
    const int row0 = int(gl_WorkGroupID.x) * OWN;
    const int qbase = p.q_off + b0 * p.q_s0 + b1 * p.q_s1, kbase = p.k_off + b0 * p.k_s0 + b1 * p.k_s1;
    const int cbase = p.c_off + b0 * p.c_s0 + b1 * p.c_s1, dbase = p.d_off + b0 * p.d_s0 + b1 * p.d_s1;
    const int mbase = p.m_off + b0 * p.m_s0 + b1 * p.m_s1;
    const uint sbase = sg * 16u * SST, pbase = PA + sg * 16u * PST;
    const uint lr = lane >> 1, lh = lane & 1u;   // this lane's row of the subgroup's 16, and which half of its scores
    const int me = row0 + int(sg) * 16 + int(lr);
#ifndef EMULATE
    // rowmap: element i of an accumulator belongs to row rowmap[i] (loaded from a matrix of row numbers)
    FRAGC rowmap;
    for (uint x = lane; x < 256u; x += 32u) Ssh[sbase + (x / 16u) * SST + x % 16u] = float(x / 16u);
    SG_SYNC();
    coopMatLoad(rowmap, Ssh, sbase, SST, gl_CooperativeMatrixLayoutRowMajor);
    SG_SYNC();
#endif
#if defined(ATTENTION) || defined(STATS) || defined(DQ)
    // ---- queries owned, keys walked ----
    STAGE(q4, O0, qbase, p.q_sl, p.E, row0, OWN, p.L)
#if defined(DQ)
    STAGE(d4, O1, dbase, p.d_sl, p.EV, row0, OWN, p.L)
    FRAGC acc[D / 16];
    [[unroll]] for (uint f = 0; f < D / 16; ++f) ZERO(acc[f]);
    const int srow = p.st_off + 2 * (bb * p.L + me);
    const float lse = me < p.L ? st[srow] : 0.0, Dm = me < p.L ? st[srow + 1] : 0.0;
#else
    float m = NEG_INF, l = 0.0;
#endif
#if defined(ATTENTION)
    FRAGC acc[D / 16];
    [[unroll]] for (uint f = 0; f < D / 16; ++f) ZERO(acc[f]);
#endif
    const int kend = CAUSAL ? min(p.S, row0 + OWN) : p.S;
    uvec4 rk[VPT(BC)];
    FETCH(rk, k4, kbase, p.k_sl, p.E, 0, BC, p.S)
#if defined(WALK1)
    uvec4 rv[VPT(BC)];
    FETCH(rv, c4, cbase, p.c_sl, p.EV, 0, BC, p.S)
#endif
    for (int j0 = 0; j0 < kend; j0 += BC) {
        barrier();
        PLACE(rk, W0, BC)
#if defined(WALK1)
        PLACE(rv, W1, BC)
#endif
        barrier();
        if (j0 + BC < kend) {
            FETCH(rk, k4, kbase, p.k_sl, p.E, j0 + BC, BC, p.S)
#if defined(WALK1)
            FETCH(rv, c4, cbase, p.c_sl, p.EV, j0 + BC, BC, p.S)
#endif
        }
        PRODUCT_ROWS(O0, W0)
        SG_SYNC();
        float sv[BC / 2];
        float mx = NEG_INF;
        [[unroll]] for (uint c = 0; c < BC / 2; ++c) {
            const int j = j0 + int(lh * (BC / 2) + c);
            float s = Ssh[sbase + lr * SST + lh * (BC / 2) + c] * p.sl2;
            if (p.m_off >= 0 && me < p.L && j < p.S) s += LOG2E * float(mb[mbase + me * p.m_sl + j * p.m_se]);
            if (j >= p.S || (CAUSAL && j > me)) s = NEG_INF;
            sv[c] = s;
            mx = max(mx, s);
        }
#if defined(DQ)
        [[unroll]] for (uint c = 0; c < BC / 2; ++c) sv[c] = lse == NEG_INF ? 0.0 : exp2(sv[c] - lse);   // p
        SG_SYNC();
        // dp = do vᵀ into the scratch, then ds = p (dp - D) as f16, then dq += ds k
        PRODUCT_ROWS(O1, W1)
        SG_SYNC();
        [[unroll]] for (uint c = 0; c < BC / 2; ++c) sv[c] *= Ssh[sbase + lr * SST + lh * (BC / 2) + c] - Dm;
        put_p(pbase, lr, lh, sv);
        SG_SYNC();
        PRODUCT_P(acc, W0)
#else
        mx = max(mx, subgroupShuffleXor(mx, 1u));
        const float mnew = max(m, mx);
        const float alpha = mnew == NEG_INF ? 1.0 : exp2(m - mnew);   // exp2(-inf) = 0 at the first key
        float rs = 0.0;
        [[unroll]] for (uint c = 0; c < BC / 2; ++c) {
            const float pj = sv[c] == NEG_INF ? 0.0 : exp2(sv[c] - mnew);
            rs += pj;
            sv[c] = pj;
        }
        rs += subgroupShuffleXor(rs, 1u);
        l = l * alpha + rs;
        m = mnew;
#if defined(ATTENTION)
        put_p(pbase, lr, lh, sv);
        if (lh == 0u) Ssh[sbase + lr * SST + BC] = alpha;   // (no lane reads column BC before the next sync)
        SG_SYNC();
        RESCALE(acc)
        PRODUCT_P(acc, W1)
#endif
#endif
    }
    SG_SYNC();
#if defined(STATS)
    // lse2 = m + log2 l; D = do·o, each lane of the pair summing half the dims
    float Dp = 0.0;
    if (me < p.L)
        for (int e = int(lh) * (D / 2); e < min(p.EV, int(lh + 1u) * (D / 2)); ++e)
            Dp += float(cb[cbase + me * p.c_sl + e]) * float(db[dbase + me * p.d_sl + e]);
    Dp += subgroupShuffleXor(Dp, 1u);
    if (lh == 0u && me < p.L) {
        const int yb = p.y_off + 2 * (bb * p.L + me);
        y[yb] = m + log2(l);
        y[yb + 1] = Dp;
    }
#else
#if defined(ATTENTION)
    if (lh == 0u) Ssh[sbase + lr * SST + BC] = l == 0.0 ? 0.0 : 1.0 / l;   // no key seen: 0 (PyTorch's safe softmax)
    SG_SYNC();
    RESCALE(acc)
    const int yb = p.y_off + b0 * p.d_s0 + b1 * p.d_s1 + me * p.d_sl;   // (do's words hold the result's strides here)
    const int n = p.EV;
    const float sc = 1.0;
#else
    const int yb = p.y_off + y_row(b0, b1, p.L, me, p.E);
    const int n = p.E;
    const float sc = p.scale;
#endif
    const bool live = me < p.L;
#endif
#else
    // ---- DKV: keys owned (with their v), queries walked; dk in acc, dv in accv ----
    STAGE(k4, O0, kbase, p.k_sl, p.E, row0, OWN, p.S)
    STAGE(c4, O1, cbase, p.c_sl, p.EV, row0, OWN, p.S)
    FRAGC acc[D / 16];
    FRAGC accv[D / 16];   // (one declarator each: glslang types a second coopmat declarator wrongly)
    [[unroll]] for (uint f = 0; f < D / 16; ++f) { ZERO(acc[f]); ZERO(accv[f]); }
    const int ibeg = CAUSAL ? row0 : 0;   // causal: no query before row0 sees these keys
    uvec4 rq[VPT(BC)], rd[VPT(BC)];
    float rl = NEG_INF, rD = 0.0;
    #define FETCH_QUERIES(i0) { \
        FETCH(rq, q4, qbase, p.q_sl, p.E, i0, BC, p.L) \
        FETCH(rd, d4, dbase, p.d_sl, p.EV, i0, BC, p.L) \
        const int i_ = (i0) + int(tid), sr_ = p.st_off + 2 * (bb * p.L + i_); \
        rl = (tid < BC && i_ < p.L) ? st[sr_] : NEG_INF; \
        rD = (tid < BC && i_ < p.L) ? st[sr_ + 1] : 0.0; }
    FETCH_QUERIES(ibeg)
    for (int i0 = ibeg; i0 < p.L; i0 += BC) {
        barrier();
        PLACE(rq, W0, BC)
        PLACE(rd, W1, BC)
        if (tid < BC) { tileL[tid] = rl; tileD[tid] = rD; }
        barrier();
        if (i0 + BC < p.L) FETCH_QUERIES(i0 + BC)
        PRODUCT_ROWS(O0, W0)   // sᵀ: this subgroup's keys against the block's queries
        SG_SYNC();
        float sv[BC / 2];
        [[unroll]] for (uint c = 0; c < BC / 2; ++c) {
            const uint col = lh * (BC / 2) + c;
            const int i = i0 + int(col);
            float s = Ssh[sbase + lr * SST + col] * p.sl2;
            if (p.m_off >= 0 && me < p.S && i < p.L) s += LOG2E * float(mb[mbase + i * p.m_sl + me * p.m_se]);
            const bool seen = i < p.L && me < p.S && (!CAUSAL || me <= i) && tileL[col] != NEG_INF;
            sv[c] = seen ? exp2(s - tileL[col]) : 0.0;   // p (a query that sees no key: no gradient)
        }
        put_p(pbase, lr, lh, sv);
        SG_SYNC();
        PRODUCT_P(accv, W1)    // dv += pᵀ do
        SG_SYNC();
        PRODUCT_ROWS(O1, W1)   // dpᵀ = v doᵀ
        SG_SYNC();
        [[unroll]] for (uint c = 0; c < BC / 2; ++c) {
            const uint col = lh * (BC / 2) + c;
            sv[c] *= Ssh[sbase + lr * SST + col] - tileD[col];   // dsᵀ
        }
        put_p(pbase, lr, lh, sv);
        SG_SYNC();
        PRODUCT_P(acc, W0)     // dk += dsᵀ q
    }
    SG_SYNC();
    const int yb = p.y_off + y_row(b0, b1, p.S, me, p.E);
    const int yv = HEADS_OUT ? p.y_off + p.B1 * p.E + y_row(b0, b1, p.S, me, p.EV) : yb + p.E;   // dv: after dk
    const int n = p.E;
    const float sc = p.scale;
    const bool live = me < p.S;
#endif
#if !defined(STATS)
    STORE_OUT(acc, yb, n, sc)
#if defined(DKV)
    STORE_OUT(accv, yv, p.EV, 1.0)
#endif
#endif
}
