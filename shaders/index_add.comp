#version 450
// INDEX_ADD (torch.scatter_add), or with SET defined SCATTER (torch.scatter: the last matching entry
// in the order of j replaces dst instead of adding to it): srcs (dst, idx, src), idx shaped like src;
// out shaped like dst.
//   out[p] = dst[p] + sum over j (ascending) of src[q] where q = p with q[axis] = j and idx[q] == p[axis]
// (only where p's other coordinates lie inside idx's shape). Each OUTPUT element scans the index
// entries along the axis: no atomics, a fixed summation order, exact for integers and the same
// bits every run. Entries outside [0, dst.shape[axis]) match no output: they are skipped, never
// written out of bounds, and raise the error flag (index_flag.glsl; the host rejects those it has
// before dispatch). The threads at position 0 of the axis check the entries they scan.
// Floats accumulate in f32 starting from dst, in the order of j (np.add.at's order).
#include "nn_common.glsl"
#extension GL_EXT_control_flow_attributes : require
#define FLAG_BINDING 4
#include "index_flag.glsl"
#ifdef SET
  #define FOLD(acc, v) acc = (v)
#else
  #define FOLD(acc, v) acc += (v)
#endif
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) writeonly buffer Out { T y[]; };
layout(std430, set = 0, binding = 1) readonly buffer InD { T dst[]; };
layout(std430, set = 0, binding = 2) readonly buffer InI { int64_t idx[]; };
layout(std430, set = 0, binding = 3) readonly buffer InS { T src[]; };

layout(push_constant) uniform PC {
    uint total; int shape[4];
    int d_off; int ds[4];
    int ishape[4];
    int i_off; int is[4];
    int s_off; int ss[4];
    int axis;
} p;

// The flat position, in the index's shape, of entry j along the axis at the other coordinates c.
uint entry_pos(int c[4], int j) {
    uint f = 0u;
    [[unroll]] for (int d = 0; d < 4; ++d) f = f * uint(p.ishape[d]) + uint(d == p.axis ? j : c[d]);
    return f;
}

void main() {
    const uint gid = GID;
    if (gid >= p.total) return;
    int c[4]; uint r = gid;
    for (int d = 3; d >= 0; --d) { c[d] = int(r % uint(p.shape[d])); r /= uint(p.shape[d]); }
    int dof = p.d_off, io = p.i_off, so = p.s_off;
    bool inside = true;
    for (int d = 0; d < 4; ++d) {
        dof += c[d] * p.ds[d];
        if (d != p.axis) { io += c[d] * p.is[d]; so += c[d] * p.ss[d]; inside = inside && c[d] < p.ishape[d]; }
    }
    ACC acc = TO_ACC(dst[dof]);
    if (inside) {
        const int64_t me = int64_t(c[p.axis]);
        const int n = p.ishape[p.axis], istep = p.is[p.axis], sstep = p.ss[p.axis];
        const bool check = c[p.axis] == 0;
        const int64_t size = int64_t(p.shape[p.axis]);
        // lavapipe stops a shader's loops after 65,535 iterations in total, silently: 8 entries per
        // trip (the inner loop is unrolled, so it is no loop), and the host splits longer scans into
        // several dispatches of at most INDEX_ADD_CHUNK entries, each adding onto the previous output.
        int j = 0;
        for (; j + 8 <= n; j += 8) {
            [[unroll]] for (int u = 0; u < 8; ++u) {
                const int64_t v = idx[io + (j + u) * istep];
                if (v == me) FOLD(acc, TO_ACC(src[so + (j + u) * sstep]));
                else if (check && (v < 0 || v >= size)) report_index(v, entry_pos(c, j + u));
            }
        }
        for (; j < n; ++j) {
            const int64_t v = idx[io + j * istep];
            if (v == me) FOLD(acc, TO_ACC(src[so + j * sstep]));
            else if (check && (v < 0 || v >= size)) report_index(v, entry_pos(c, j));
        }
    }
    y[gid] = FROM_ACC(acc);
}
