#version 450
// GATHER (torch.gather): out[p] = x[p with p[axis] replaced by idx[p]], out shaped like idx.
// Rank padded to 4 on the left. One thread per output element; any storage type (a copy).
// Out-of-range indices never read out of bounds: the shader CLAMPS them to [0, xdim-1] (and
// writes 0 when x's axis is empty), and raises the error flag (index_flag.glsl) with the first bad
// value: indices the host has are checked before dispatch, those computed on the device here, and
// the host raises IndexOutOfRangeError when it reads any result of the submission.
#include "nn_common.glsl"
#define FLAG_BINDING 3
#include "index_flag.glsl"
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) writeonly buffer Out { T y[]; };
layout(std430, set = 0, binding = 1) readonly buffer InX { T x[]; };
layout(std430, set = 0, binding = 2) readonly buffer InI { int64_t idx[]; };

layout(push_constant) uniform PC {
    uint total; int shape[4];
    int i_off; int is[4];
    int x_off; int xs[4];
    int axis, xdim;
} p;

void main() {
    const uint gid = GID;
    if (gid >= p.total) return;
    int c[4]; uint r = gid;
    for (int d = 3; d >= 0; --d) { c[d] = int(r % uint(p.shape[d])); r /= uint(p.shape[d]); }
    int io = p.i_off, xo = p.x_off;
    for (int d = 0; d < 4; ++d) { io += c[d] * p.is[d]; if (d != p.axis) xo += c[d] * p.xs[d]; }
    const int64_t raw = idx[io];
    if (raw < 0 || raw >= int64_t(p.xdim)) report_index(raw, gid);
    if (p.xdim <= 0) { y[gid] = T(0); return; }
    const int v = int(clamp(raw, int64_t(0), int64_t(p.xdim - 1)));
    y[gid] = x[xo + v * p.xs[p.axis]];
}
