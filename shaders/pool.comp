#version 450
// 2-D pooling, NCHW, one thread per OUTPUT element (no atomics, deterministic):
//   MAXPOOL2D           x -> max over each window (padding acts as -inf; NaN propagates)
//   AVGPOOL2D           x -> mean over each window (count_include_pad, ceil_mode as torch)
//   MAXPOOL2D_BACKWARD  (g, x) -> dx: each input pixel sums the gradients of the windows whose
//                       FIRST maximum it is (a gather: it re-scans each window that covers it)
//     with CELLS        the same where windows do not overlap (stride >= the dilated kernel): one thread per
//                       WINDOW scans it once and writes its cell of dx (the rows and columns from its start to
//                       the next window's, the last ones to the image's edge): g at the first maximum, 0 elsewhere
// The window of output (oy, ox) reads rows oy*sh - ph + i*dh, i < kh (columns alike).
// "First maximum": the first element in row-major window order that is >= every other, or the
// first NaN when the window holds one (the value is NaN either way).
#include "nn_common.glsl"
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) writeonly buffer Out { T y[]; };

#if defined(MAXPOOL2D) || defined(AVGPOOL2D)
layout(std430, set = 0, binding = 1) readonly buffer InX { T x[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer InG { T g[]; };
layout(std430, set = 0, binding = 2) readonly buffer InX { T x[]; };
#endif

#if defined(AVGPOOL2D)
layout(push_constant) uniform PC {
    uint total; int C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, count_include_pad;
    int x_off, x_sn, x_sc, x_sh, x_sw;
} p;
#else
layout(push_constant) uniform PC {
    uint total; int C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
    int x_off, x_sn, x_sc, x_sh, x_sw;
#if defined(MAXPOOL2D_BACKWARD)
    int g_off, g_sn, g_sc, g_sh, g_sw;
    int qh, qw;   // sh / gcd(sh, dh), sw / gcd(sw, dw): the step between the taps of the windows covering a pixel
#endif
} p;

// Scan window (oy, ox) of the plane at xbase; return its max and where (iy*W + ix, -1 if empty).
// Only the rows and columns inside the image are visited, 8 columns per trip (an unrolled inner loop):
// lavapipe's loop budget (65,535 trips per invocation, all loops together) then holds big windows.
int window_argmax(int xbase, int oy, int ox, out float best) {
    best = NEG_INF;
    int at = -1;
    const int y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
    const int ilo = y0 >= 0 ? 0 : (-y0 + p.dh - 1) / p.dh, ihi = y0 < p.H ? min(p.kh - 1, (p.H - 1 - y0) / p.dh) : -1;
    const int jlo = x0 >= 0 ? 0 : (-x0 + p.dw - 1) / p.dw, jhi = x0 < p.W ? min(p.kw - 1, (p.W - 1 - x0) / p.dw) : -1;
    for (int i = ilo; i <= ihi; ++i) {
        const int iy = y0 + i * p.dh;
        for (int j8 = jlo; j8 <= jhi; j8 += 8) {
            [[unroll]] for (int u = 0; u < 8; ++u) {
                const int j = j8 + u;
                if (j > jhi) break;
                const int ix = x0 + j * p.dw;
                const float v = float(x[xbase + iy * p.x_sh + ix * p.x_sw]);
                if (at < 0 || v > best || (isnan(v) && !isnan(best))) { best = v; at = iy * p.W + ix; }
            }
        }
    }
    return at;
}
#endif

void main() {
    const uint gid = GID;
    if (gid >= p.total) return;
#if defined(MAXPOOL2D_BACKWARD) && defined(CELLS)
    // gid enumerates the WINDOWS (n, c, oy, ox); the cells of all windows tile the image
    const int ox = int(gid % uint(p.OW)), oy = int((gid / uint(p.OW)) % uint(p.OH));
    const int nc = int(gid / uint(p.OW * p.OH)), c = nc % p.C, n = nc / p.C;
    const int xbase = p.x_off + n * p.x_sn + c * p.x_sc;
    float best;
    const int at = window_argmax(xbase, oy, ox, best);
    const float gv = float(g[p.g_off + n * p.g_sn + c * p.g_sc + oy * p.g_sh + ox * p.g_sw]);
    const int r0 = oy == 0 ? 0 : oy * p.sh - p.ph, r1 = oy == p.OH - 1 ? p.H : min(p.H, (oy + 1) * p.sh - p.ph);
    const int c0 = ox == 0 ? 0 : ox * p.sw - p.pw, c1 = ox == p.OW - 1 ? p.W : min(p.W, (ox + 1) * p.sw - p.pw);
    const int ybase = nc * p.H * p.W;
    for (int iy = r0; iy < r1; ++iy)       // 8 columns per trip (lavapipe's loop budget)
        for (int x8 = c0; x8 < c1; x8 += 8) {
            [[unroll]] for (int u = 0; u < 8; ++u) {
                const int ix = x8 + u;
                if (ix < c1) y[ybase + iy * p.W + ix] = T(iy * p.W + ix == at ? gv : 0.0);
            }
        }
#elif defined(MAXPOOL2D_BACKWARD)
    // gid enumerates the INPUT pixels (n, c, iy, ix)
    const int ix = int(gid % uint(p.W)), iy = int((gid / uint(p.W)) % uint(p.H));
    const int nc = int(gid / uint(p.W * p.H)), c = nc % p.C, n = nc / p.C;
    const int xbase = p.x_off + n * p.x_sn + c * p.x_sc, gbase = p.g_off + n * p.g_sn + c * p.g_sc;
    const int me = iy * p.W + ix;
    float acc = 0.0, best;
    // Only the taps of windows that cover this pixel (lavapipe's loop budget), i descending: windows
    // in ascending oy (then ox), the order the CPU adds them in.
    int ilo, ihi, jlo, jhi;
    tap_range(iy + p.ph, p.dh, p.sh, p.OH, p.kh, p.qh, ilo, ihi);
    tap_range(ix + p.pw, p.dw, p.sw, p.OW, p.kw, p.qw, jlo, jhi);
    for (int i = ihi; i >= ilo; i -= p.qh) {
        const int oy = (iy + p.ph - i * p.dh) / p.sh;
        for (int j = jhi; j >= jlo; j -= p.qw) {
            const int ox = (ix + p.pw - j * p.dw) / p.sw;
            if (window_argmax(xbase, oy, ox, best) == me) acc += float(g[gbase + oy * p.g_sh + ox * p.g_sw]);
        }
    }
    y[int(gid)] = T(acc);
#else
    const int ox = int(gid % uint(p.OW)), oy = int((gid / uint(p.OW)) % uint(p.OH));
    const int nc = int(gid / uint(p.OW * p.OH)), c = nc % p.C, n = nc / p.C;
    const int xbase = p.x_off + n * p.x_sn + c * p.x_sc;
#if defined(MAXPOOL2D)
    float best;
    window_argmax(xbase, oy, ox, best);
    y[int(gid)] = T(best);
#else
    int hs = oy * p.sh - p.ph, ws = ox * p.sw - p.pw;
    int he = min(hs + p.kh, p.H + p.ph), we = min(ws + p.kw, p.W + p.pw);
    const int pool = (he - hs) * (we - ws);
    hs = max(hs, 0); ws = max(ws, 0); he = min(he, p.H); we = min(we, p.W);
    float acc = 0.0;
    for (int iy = hs; iy < he; ++iy)       // 8 columns per trip (lavapipe's loop budget)
        for (int x8 = ws; x8 < we; x8 += 8) {
            [[unroll]] for (int u = 0; u < 8; ++u)
                if (x8 + u < we) acc += float(x[xbase + iy * p.x_sh + (x8 + u) * p.x_sw]);
        }
    const int div = p.count_include_pad != 0 ? pool : (he - hs) * (we - ws);
    y[int(gid)] = T(acc / float(div));
#endif
#endif
}
