#version 450
// Convolution helpers, one 1-D launch each (one thread per OUTPUT element, no atomics):
//   IM2COL            x (N,C,H,W) -> cols (N, C*kh*kw, OH*OW): unfold windows; zero padding
//   COL2IM            cols (N, C*kh*kw, BH*BW) -> image (N,C,OH,OW): fold as a GATHER, each
//                     pixel sums the columns that cover it (fixed order: taps i, then j)
//   CONV_TRANSPOSE2D  x (N,Cin,H,W), w (Cin,Cout/G,kh,kw) -> (N,Cout,Ho,Wo): direct gather, each
//                     output sums over the input pixels and taps that map onto it
// Inputs are read through element strides; outputs are contiguous (with an element offset).
#include "nn_common.glsl"
layout(local_size_x = 256) in;

// X_F32: x is stored as f32 whatever T is (col2im of f32 columns computed from f16 operands).
#if defined(X_F32)
#define TX float
#else
#define TX T
#endif
layout(std430, set = 0, binding = 0) writeonly buffer Out { T y[]; };
layout(std430, set = 0, binding = 1) readonly buffer InX { TX x[]; };

#if defined(IM2COL)
layout(push_constant) uniform PC {
    uint total; int C, H, W, kh, kw, OH, OW, sh, sw, ph, pw, dh, dw;
    int x_off, x_sn, x_sc, x_sh, x_sw, y_off;
} p;

#if defined(ROWS)
// A CPU device (lavapipe): a thread per row (n, c, i, j) walks its OH*OW pixels, so the divisions that find the row
// run once per row, not once per element (a CPU's SIMD lanes have no integer division: each one is scalar code).
void main() {
    const int L = p.OH * p.OW, kk = p.kh * p.kw;
    const uint row = GID;
    if (row >= p.total / uint(L)) return;
    const int r = int(row), ck = r % (p.C * kk), n = r / (p.C * kk);
    const int c = ck / kk, i = (ck % kk) / p.kw, j = ck % p.kw;
    const int xb = p.x_off + n * p.x_sn + c * p.x_sc;
    int o = p.y_off + r * L;
    for (int oh = 0; oh < p.OH; ++oh) {
        const int iy = oh * p.sh - p.ph + i * p.dh;
        const bool inside = iy >= 0 && iy < p.H;
        for (int ow = 0; ow < p.OW; ++ow, ++o) {
            const int ix = ow * p.sw - p.pw + j * p.dw;
            T v = T(0);
            if (inside && ix >= 0 && ix < p.W) v = T(x[xb + iy * p.x_sh + ix * p.x_sw]);
            y[o] = v;
        }
    }
}
#else
void main() {
    const uint gid = GID;
    if (gid >= p.total) return;
    const int L = p.OH * p.OW, kk = p.kh * p.kw;
    const int l = int(gid % uint(L)), r = int(gid / uint(L));
    const int ck = r % (p.C * kk), n = r / (p.C * kk);
    const int c = ck / kk, i = (ck % kk) / p.kw, j = ck % p.kw;
    const int iy = (l / p.OW) * p.sh - p.ph + i * p.dh, ix = (l % p.OW) * p.sw - p.pw + j * p.dw;
    T v = T(0);
    if (iy >= 0 && iy < p.H && ix >= 0 && ix < p.W)
        v = T(x[p.x_off + n * p.x_sn + c * p.x_sc + iy * p.x_sh + ix * p.x_sw]);
    y[p.y_off + int(gid)] = v;
}
#endif

#elif defined(COL2IM)
layout(push_constant) uniform PC {
    uint total; int C, OH, OW, kh, kw, BH, BW, sh, sw, ph, pw, dh, dw;
    int x_off, x_sn, x_sck, x_sl, y_off;
    int qh, qw;   // sh / gcd(sh, dh) and sw / gcd(sw, dw): the step between the taps that land on a block
} p;

void main() {
    const uint gid = GID;
    if (gid >= p.total) return;
    const int ox = int(gid % uint(p.OW)), oy = int((gid / uint(p.OW)) % uint(p.OH));
    const int nc = int(gid / uint(p.OW * p.OH)), c = nc % p.C, n = nc / p.C;
    const int base = p.x_off + n * p.x_sn + c * p.kh * p.kw * p.x_sck;
    // Only the taps whose window covers this pixel (lavapipe's loop budget: trips ~ their count, not kh*kw)
    int ilo, ihi, jlo, jhi;
    tap_range(oy + p.ph, p.dh, p.sh, p.BH, p.kh, p.qh, ilo, ihi);
    tap_range(ox + p.pw, p.dw, p.sw, p.BW, p.kw, p.qw, jlo, jhi);
    FACC acc = FACC(0);
    for (int i = ilo; i <= ihi; i += p.qh) {
        const int by = (oy + p.ph - i * p.dh) / p.sh;
        for (int j = jlo; j <= jhi; j += p.qw) {
            const int bx = (ox + p.pw - j * p.dw) / p.sw;
            acc += FACC(x[base + (i * p.kw + j) * p.x_sck + (by * p.BW + bx) * p.x_sl]);
        }
    }
    y[p.y_off + int(gid)] = T(acc);
}

#elif defined(CONV_TRANSPOSE2D)
layout(std430, set = 0, binding = 2) readonly buffer InW { T w[]; };
layout(push_constant) uniform PC {
    uint total; int Cin, H, W, Cout, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, G;
    int x_off, x_sn, x_sc, x_sh, x_sw;
    int w_off, w_sci, w_sco, w_sh, w_sw;
} p;

void main() {
    const uint gid = GID;
    if (gid >= p.total) return;
    const int ox = int(gid % uint(p.Wo)), oy = int((gid / uint(p.Wo)) % uint(p.Ho));
    const int nc = int(gid / uint(p.Wo * p.Ho)), co = nc % p.Cout, n = nc / p.Cout;
    const int coutg = p.Cout / p.G, cing = p.Cin / p.G;
    const int g = co / coutg, cog = co % coutg;
    const int xb = p.x_off + n * p.x_sn + g * cing * p.x_sc;
    const int wb = p.w_off + g * cing * p.w_sci + cog * p.w_sco;
    FACC acc = FACC(0);
    for (int i = 0; i < p.kh; ++i) {
        const int ty = oy + p.ph - i * p.dh;
        if (ty < 0 || ty % p.sh != 0 || ty / p.sh >= p.H) continue;
        const int iy = ty / p.sh;
        for (int j = 0; j < p.kw; ++j) {
            const int tx = ox + p.pw - j * p.dw;
            if (tx < 0 || tx % p.sw != 0 || tx / p.sw >= p.W) continue;
            const int xo = xb + iy * p.x_sh + (tx / p.sw) * p.x_sw, wo = wb + i * p.w_sh + j * p.w_sw;
            for (int ci = 0; ci < cing; ++ci)
                acc = fma(FACC(x[xo + ci * p.x_sc]), FACC(w[wo + ci * p.w_sci]), acc);
        }
    }
    y[int(gid)] = T(acc);
}
#else
#error "define IM2COL, COL2IM or CONV_TRANSPOSE2D"
#endif
