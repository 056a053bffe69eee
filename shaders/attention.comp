#version 450
// Fused scaled-dot-product attention (FlashAttention's idea): softmax(scale * q kᵀ) v without the L x S
// matrix of scores in memory. A workgroup owns WG rows of one (batch, head) — query rows for ATTENTION,
// ATTENTION_STATS and the dq kernel, key rows for the dk and dv kernels — one row per thread, held in
// registers; it walks the other side in tiles of BC rows staged through shared memory, whose vec4 reads
// every thread of a subgroup shares (a broadcast). Scores are in base 2: s2 = scale·log2(e)·q·k, so each
// exponential is one exp2.
//   ATTENTION    (q, k, v) -> o: online softmax (the running max m and sum l rescale o as m grows)
//   STATS        (q, k, o, do) -> (lse2, D) per query: lse2 = log2 Σ_j 2^s2_ij, D = do·o (what backward needs)
//   DQ           (q, k, v, do, stats) -> dq = scale Σ_j ds_ij k_j
//   DK           (q, k, v, do, stats) -> dk = scale Σ_i ds_ij q_i
//   DV           (q, k, v, do, stats) -> dv = Σ_i p_ij do_i
// with p_ij = 2^(s2_ij - lse2_i) and ds_ij = p_ij (do_i·v_j - D_i). Causal: key j is seen by query i when
// j <= i (PyTorch's is_causal, aligned top-left). An optional float mask (..., L, S), any strides, is added to
// each score (a boolean mask arrives as 0 / -inf). A query that sees no key at all (every score -inf) gets
// o = 0 and no gradient, as PyTorch's safe softmax. Every sum runs in f32 (f16 storage too).
#include "nn_common.glsl"
#define WG 64                     // rows a workgroup owns: one per thread
#define DV4 (DMAX / 4)            // head dims in vec4s (DMAX: the largest head dim of this variant)
#define BC (2048 / DMAX)          // rows of a staged tile: two tiles of BC x DMAX floats = 16 KiB
layout(local_size_x = WG) in;

#if defined(STATS)
layout(std430, set = 0, binding = 0) writeonly buffer Out { float y[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer Out { T y[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer InQ { T qb[]; };
layout(std430, set = 0, binding = 2) readonly buffer InK { T kb[]; };
layout(std430, set = 0, binding = 3) readonly buffer InC { T cb[]; };    // v (o for STATS)
#if !defined(ATTENTION)
layout(std430, set = 0, binding = 4) readonly buffer InD { T db[]; };    // do
#endif
#if defined(DQ) || defined(DK) || defined(DV)
layout(std430, set = 0, binding = 5) readonly buffer InS { float st[]; }; // (lse2, D) per query row
layout(std430, set = 0, binding = 6) readonly buffer InM { T mb[]; };     // the mask (q, unread, when there is none)
#elif defined(STATS)
layout(std430, set = 0, binding = 5) readonly buffer InM { T mb[]; };
#else
layout(std430, set = 0, binding = 4) readonly buffer InM { T mb[]; };
#endif

// Each tensor is (B0, B1, rows, dims): offset, batch strides and row stride; its elements are contiguous. The
// mask (B0, B1, L, S) has an element stride too (m_se, 0 for a mask broadcast along the keys); m_off < 0: none.
// ATTENTION reads no do: its words give the result's batch and row strides instead (PyTorch's (B, L, H, Ev) layout).
// The gradients' rows are y_sl apart: dk and dv of one ATTENTION_BACKWARD (which 1) lie side by side in one tensor
// (DK and DV each write theirs: y_off of DV's dispatch is where dv starts).
layout(push_constant) uniform PC {
    int B1, L, S, E, EV, causal; float sl2, scale;
    int q_off, q_s0, q_s1, q_sl;
    int k_off, k_s0, k_s1, k_sl;
    int c_off, c_s0, c_s1, c_sl;
    int d_off, d_s0, d_s1, d_sl;
    int m_off, m_s0, m_s1, m_sl, m_se;
    int st_off, y_off, y_sl;
} p;
// causal: bit 0 hides key j from query i < j; bit 1 (HEADS_OUT, the gradients) lays each gradient out (B0, rows, B1, w)
// inside rows y_sl apart, as PyTorch's (B, L, H, E): the heads side by side, so that merging them is a view
#define CAUSAL ((p.causal & 1) != 0)
#define HEADS_OUT ((p.causal & 2) != 0)
// where row `me` of batch (b0, b1) of a gradient `w` wide starts in y
int y_row(int b0, int b1, int rows, int me, int w) {
    return HEADS_OUT ? (b0 * rows + me) * p.y_sl + b1 * w : ((b0 * p.B1 + b1) * rows + me) * p.y_sl;
}
#define q_se 1
#define k_se 1
#define c_se 1
#define d_se 1
#define LOG2E 1.4426950408889634

shared vec4 tileA[BC][DV4];   // k (query-owning kernels) or q (key-owning kernels)
shared vec4 tileB[BC][DV4];   // v or do
#if defined(DK) || defined(DV)
shared float tileL[BC], tileD[BC];
#endif

// Element e of row r of a tensor whose batch base is `base` (zero past its n dims).
#define AT(buf, base, sl, se, r, e, n) ((e) < (n) ? float(buf[(base) + (r) * (sl) + (e) * (se)]) : 0.0)

// Stage rows r0 .. r0+BC-1 (those below `rows`) of one tensor into TILE, zeros past them and past its n dims.
#define STAGE(TILE, buf, base, sl, se, n, r0, rows)                                                   \
    [[unroll]] for (int t = 0; t < BC * DV4 / WG; ++t) {                                             \
        const int f = t * WG + int(gl_LocalInvocationID.x), r = f / DV4, c = (f % DV4) * 4;          \
        vec4 w = vec4(0.0);                                                                           \
        if ((r0) + r < (rows)) w = vec4(AT(buf, base, sl, se, (r0) + r, c, n), AT(buf, base, sl, se, (r0) + r, c + 1, n), \
                                        AT(buf, base, sl, se, (r0) + r, c + 2, n), AT(buf, base, sl, se, (r0) + r, c + 3, n)); \
        TILE[r][c / 4] = w;                                                                           \
    }

void load_row(out vec4 x[DV4], int base, int sl, int se, int r, int n, bool live, int which) {
    [[unroll]] for (int c = 0; c < DV4; ++c) {
        vec4 w = vec4(0.0);
        if (live) {
            if (which == 0) w = vec4(AT(qb, base, sl, se, r, 4*c, n), AT(qb, base, sl, se, r, 4*c+1, n), AT(qb, base, sl, se, r, 4*c+2, n), AT(qb, base, sl, se, r, 4*c+3, n));
            if (which == 1) w = vec4(AT(kb, base, sl, se, r, 4*c, n), AT(kb, base, sl, se, r, 4*c+1, n), AT(kb, base, sl, se, r, 4*c+2, n), AT(kb, base, sl, se, r, 4*c+3, n));
            if (which == 2) w = vec4(AT(cb, base, sl, se, r, 4*c, n), AT(cb, base, sl, se, r, 4*c+1, n), AT(cb, base, sl, se, r, 4*c+2, n), AT(cb, base, sl, se, r, 4*c+3, n));
#if !defined(ATTENTION)
            if (which == 3) w = vec4(AT(db, base, sl, se, r, 4*c, n), AT(db, base, sl, se, r, 4*c+1, n), AT(db, base, sl, se, r, 4*c+2, n), AT(db, base, sl, se, r, 4*c+3, n));
#endif
        }
        x[c] = w;
    }
}

void main() {
    const int bb = int(gl_WorkGroupID.y), b0 = bb / p.B1, b1 = bb % p.B1;
    const int row0 = int(gl_WorkGroupID.x) * WG, me = row0 + int(gl_LocalInvocationID.x);
    const int qbase = p.q_off + b0 * p.q_s0 + b1 * p.q_s1, kbase = p.k_off + b0 * p.k_s0 + b1 * p.k_s1;
    const int cbase = p.c_off + b0 * p.c_s0 + b1 * p.c_s1, dbase = p.d_off + b0 * p.d_s0 + b1 * p.d_s1;
    const int mbase = p.m_off + b0 * p.m_s0 + b1 * p.m_s1;   // mask[b0, b1, i, j] = mb[mbase + i*m_sl + j*m_se]
#if defined(ATTENTION) || defined(STATS) || defined(DQ)
    // ---- this thread owns query row `me`; the tiles walk the keys it can see ----
    const bool live = me < p.L;
    vec4 q[DV4];
    load_row(q, qbase, p.q_sl, q_se, me, p.E, live, 0);
    [[unroll]] for (int c = 0; c < DV4; ++c) q[c] *= p.sl2;
    const int kend = CAUSAL ? min(p.S, row0 + WG) : p.S;
#if defined(ATTENTION)
    vec4 o[DV4];
    [[unroll]] for (int c = 0; c < DV4; ++c) o[c] = vec4(0.0);
    float m = NEG_INF, l = 0.0;
#elif defined(STATS)
    float m = NEG_INF, l = 0.0;
#else
    vec4 dO[DV4], dq[DV4];
    load_row(dO, dbase, p.d_sl, d_se, me, p.EV, live, 3);
    [[unroll]] for (int c = 0; c < DV4; ++c) dq[c] = vec4(0.0);
    const int srow = p.st_off + 2 * (bb * p.L + me);
    const float lse = live ? st[srow] : 0.0, Dm = live ? st[srow + 1] : 0.0;
#endif
    for (int j0 = 0; j0 < kend; j0 += BC) {
        barrier();
        STAGE(tileA, kb, kbase, p.k_sl, k_se, p.E, j0, p.S)
#if !defined(STATS)
        STAGE(tileB, cb, cbase, p.c_sl, c_se, p.EV, j0, p.S)
#endif
        barrier();
        const int jn = min(BC, (CAUSAL ? min(kend, me + 1) : kend) - j0);
        for (int jj = 0; jj < jn; ++jj) {
            float s = 0.0;
            [[unroll]] for (int c = 0; c < DV4; ++c) s += dot(q[c], tileA[jj][c]);
            if (p.m_off >= 0) s += LOG2E * float(mb[mbase + me * p.m_sl + (j0 + jj) * p.m_se]);
#if defined(ATTENTION)
            if (s > m) {   // a new running max: rescale what is summed so far (exp2(-inf) = 0 at the first key)
                const float a = exp2(m - s);
                l *= a;
                [[unroll]] for (int c = 0; c < DV4; ++c) o[c] *= a;
                m = s;
            }
            const float pj = s == NEG_INF ? 0.0 : exp2(s - m);   // NaN scores stay NaN (s > m is false for them)
            l += pj;
            [[unroll]] for (int c = 0; c < DV4; ++c) o[c] += pj * tileB[jj][c];
#elif defined(STATS)
            if (s > m) { l *= exp2(m - s); m = s; }
            l += s == NEG_INF ? 0.0 : exp2(s - m);
#else
            const float pj = lse == NEG_INF ? 0.0 : exp2(s - lse);   // a query that sees no key: no gradient
            float dp = 0.0;
            [[unroll]] for (int c = 0; c < DV4; ++c) dp += dot(dO[c], tileB[jj][c]);
            const float ds = pj * (dp - Dm);
            [[unroll]] for (int c = 0; c < DV4; ++c) dq[c] += ds * tileA[jj][c];
#endif
        }
    }
    if (!live) return;
#if defined(ATTENTION)
    const int yb = p.y_off + b0 * p.d_s0 + b1 * p.d_s1 + me * p.d_sl;   // (do's words hold the result's strides here)
    [[unroll]] for (int c = 0; c < DV4; ++c) {
        const vec4 w = l == 0.0 ? vec4(0.0) : o[c] / l;   // no key seen: 0 (PyTorch's safe softmax)
        [[unroll]] for (int u = 0; u < 4; ++u) if (4 * c + u < p.EV) y[yb + 4 * c + u] = T(w[u]);
    }
#elif defined(STATS)
    vec4 oo[DV4], dd[DV4];
    load_row(oo, cbase, p.c_sl, c_se, me, p.EV, true, 2);
    load_row(dd, dbase, p.d_sl, d_se, me, p.EV, true, 3);
    float D = 0.0;
    [[unroll]] for (int c = 0; c < DV4; ++c) D += dot(oo[c], dd[c]);
    const int yb = p.y_off + 2 * (bb * p.L + me);
    y[yb] = m + log2(l);
    y[yb + 1] = D;
#else
    const int yb = p.y_off + y_row(b0, b1, p.L, me, p.E);
    [[unroll]] for (int c = 0; c < DV4; ++c) {
        const vec4 w = dq[c] * p.scale;
        [[unroll]] for (int u = 0; u < 4; ++u) if (4 * c + u < p.E) y[yb + 4 * c + u] = T(w[u]);
    }
#endif
#else
    // ---- DK and DV: this thread owns key row `me`; the tiles walk the queries that see it ----
    const bool live = me < p.S;
    vec4 kr[DV4], acc[DV4];
    load_row(kr, kbase, p.k_sl, k_se, me, p.E, live, 1);
    [[unroll]] for (int c = 0; c < DV4; ++c) { kr[c] *= p.sl2; acc[c] = vec4(0.0); }
#if defined(DK)
    vec4 vr[DV4];
    load_row(vr, cbase, p.c_sl, c_se, me, p.EV, live, 2);
#endif
    for (int i0 = CAUSAL ? row0 : 0; i0 < p.L; i0 += BC) {   // causal: no query before row0 sees these keys
        barrier();
        STAGE(tileA, qb, qbase, p.q_sl, q_se, p.E, i0, p.L)
        STAGE(tileB, db, dbase, p.d_sl, d_se, p.EV, i0, p.L)
        if (gl_LocalInvocationID.x < BC) {
            const int i = i0 + int(gl_LocalInvocationID.x), sr = p.st_off + 2 * (bb * p.L + i);
            tileL[gl_LocalInvocationID.x] = i < p.L ? st[sr] : 0.0;
            tileD[gl_LocalInvocationID.x] = i < p.L ? st[sr + 1] : 0.0;
        }
        barrier();
        const int ilo = CAUSAL ? max(0, me - i0) : 0, in_ = min(BC, p.L - i0);
        for (int ii = ilo; ii < in_; ++ii) {
            float s = 0.0;
            [[unroll]] for (int c = 0; c < DV4; ++c) s += dot(kr[c], tileA[ii][c]);
            if (p.m_off >= 0) s += LOG2E * float(mb[mbase + (i0 + ii) * p.m_sl + me * p.m_se]);
            const float pj = tileL[ii] == NEG_INF ? 0.0 : exp2(s - tileL[ii]);   // a query that sees no key: no gradient
#if defined(DV)
            [[unroll]] for (int c = 0; c < DV4; ++c) acc[c] += pj * tileB[ii][c];
#else
            float dp = 0.0;
            [[unroll]] for (int c = 0; c < DV4; ++c) dp += dot(vr[c], tileB[ii][c]);
            const float ds = pj * (dp - tileD[ii]);
            [[unroll]] for (int c = 0; c < DV4; ++c) acc[c] += ds * tileA[ii][c];
#endif
        }
    }
    if (!live) return;
#if defined(DV)
    const int yb = p.y_off + y_row(b0, b1, p.S, me, p.EV);
    [[unroll]] for (int c = 0; c < DV4; ++c)
        [[unroll]] for (int u = 0; u < 4; ++u) if (4 * c + u < p.EV) y[yb + 4 * c + u] = T(acc[c][u]);
#else
    const int yb = p.y_off + y_row(b0, b1, p.S, me, p.E);
    [[unroll]] for (int c = 0; c < DV4; ++c)
        [[unroll]] for (int u = 0; u < 4; ++u) if (4 * c + u < p.E) y[yb + 4 * c + u] = T(acc[c][u] * p.scale);
#endif
#endif
}
