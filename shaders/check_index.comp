#version 450
// CHECK_INDEX: y = idx, copied contiguous, and the first value outside [0, size) that is not the
// allowed `ignore` value raises the error flag (index_flag.glsl). With `wrap` (bit 1 of `flags`),
// -size .. -1 are valid too and come out as idx + size (PyTorch's negative indices). The graph puts it in front of the
// ops that consume class indices computed on the device (one_hot, cross_entropy and nll_loss
// targets, embedding, x[index], index_select), so the error the host raises names the op the user
// called; indices the host has are checked before any shader runs.
#include "nn_common.glsl"
#define FLAG_BINDING 2
#include "index_flag.glsl"
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) writeonly buffer Out { int64_t y[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { int64_t idx[]; };

layout(push_constant) uniform PC {
    uint total; int shape[4];
    int i_off; int is[4];
    int size; uint flags; uint ignore_lo, ignore_hi;   // flags: bit 0 has_ignore, bit 1 wrap
} p;

void main() {
    const uint gid = GID;
    if (gid >= p.total) return;
    int c[4]; uint r = gid;
    for (int d = 3; d >= 0; --d) { c[d] = int(r % uint(p.shape[d])); r /= uint(p.shape[d]); }
    int io = p.i_off;
    for (int d = 0; d < 4; ++d) io += c[d] * p.is[d];
    const int64_t v = idx[io];
    const bool ignored = (p.flags & 1u) != 0u && v == int64_t(pack64(uvec2(p.ignore_lo, p.ignore_hi)));
    const bool wrap = (p.flags & 2u) != 0u;
    if ((v < (wrap ? -int64_t(p.size) : int64_t(0)) || v >= int64_t(p.size)) && !ignored) report_index(v, gid);
    y[gid] = (wrap && v < 0) ? v + int64_t(p.size) : v;
}
