#version 450
// INDEX_ADD along axis 0 where the index is the same across every column: an embedding's backward, where
// idx (N,) is broadcast along the C columns of src (N, C) and dst (V, C):
//   out[v, c] = dst[v, c] + sum over entries j (ascending) with idx[j] == v of src[j, c].
// index_add.comp gives each OUTPUT element a scan of all N entries (V x C x N steps: 4 billion for GPT's token
// embedding); here each entry's row is added once where it belongs (N x C steps, and N x V/RB index reads).
// A workgroup owns 64 columns and RB rows, and walks the entries of one chunk of them: 64 indices at a time are
// staged in shared memory (as rows of its block, or -1), then each thread adds its column of the matching
// src rows into its accumulators (shared memory, RB a thread: no thread touches another's, so no atomics and
// no barrier between the adds). Per (row, column) the adds come in the order of j: deterministic.
// With PART, chunk q (the y grid) writes f32 partial sums to its slab of a scratch, chunk 0 starting from dst,
// and the host sums the slabs in order (kernels_nn._sum_slabs); without it there is one chunk and the
// result goes to out. Entries outside [0, V) match no row and raise the error flag (index_flag.glsl).
#include "nn_common.glsl"
#define FLAG_BINDING 4
#include "index_flag.glsl"
#define RB 64                  // rows a workgroup owns
#define NC 64                  // columns a workgroup owns: one a thread
layout(local_size_x = NC) in;

#ifdef PART
layout(std430, set = 0, binding = 0) writeonly buffer Out { float y[]; };
#else
layout(std430, set = 0, binding = 0) writeonly buffer Out { T y[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer InD { T dst[]; };
layout(std430, set = 0, binding = 2) readonly buffer InI { int64_t idx[]; };
layout(std430, set = 0, binding = 3) readonly buffer InS { T src[]; };

layout(push_constant) uniform PC {
    int V, C, N, chunk;        // rows, columns, entries, entries a chunk
    int d_off, d_sr, d_sc;     // dst: offset, row and column strides
    int i_off, i_s;            // idx: offset, stride between entries
    int s_off, s_sr, s_sc;     // src
    int y_off, y_part;         // out (V, C) contiguous from y_off; PART: chunk q's slab at y_off + q * y_part
} p;

shared float acc[RB * NC];
shared int row_of[NC];         // the staged entries' rows in this block, or -1

void main() {
    const int tid = int(gl_LocalInvocationID.x);
    const int c = int(gl_WorkGroupID.x) * NC + tid, q = int(gl_WorkGroupID.y), r0 = int(gl_WorkGroupID.z) * RB;
    const int nr = min(RB, p.V - r0);
    const bool col = c < p.C;
    const bool checker = gl_WorkGroupID.x == 0u && gl_WorkGroupID.z == 0u;   // one workgroup per chunk checks
    for (int r = 0; r < nr; ++r)
        acc[r * NC + tid] = q == 0 && col ? float(dst[p.d_off + (r0 + r) * p.d_sr + c * p.d_sc]) : 0.0;
    const int j1 = min(p.N, (q + 1) * p.chunk);
    for (int jb = q * p.chunk; jb < j1; jb += NC) {
        barrier();
        const int j = jb + tid;
        int row = -1;
        if (j < j1) {
            const int64_t v = idx[p.i_off + j * p.i_s];
            if (v >= int64_t(r0) && v < int64_t(r0 + nr)) row = int(v) - r0;
            else if ((v < 0 || v >= int64_t(p.V)) && checker) report_index(v, uint(j));
        }
        row_of[tid] = row;
        barrier();
        const int n = min(NC, j1 - jb);
        for (int u = 0; u < n; u += 8) {   // eight rows' loads in flight, then their adds in order
            float s[8];
            [[unroll]] for (int e = 0; e < 8; ++e) {
                const int r = u + e < n ? row_of[u + e] : -1;
                s[e] = r >= 0 && col ? float(src[p.s_off + (jb + u + e) * p.s_sr + c * p.s_sc]) : 0.0;
            }
            [[unroll]] for (int e = 0; e < 8; ++e) {
                const int r = u + e < n ? row_of[u + e] : -1;
                if (r >= 0) acc[r * NC + tid] += s[e];
            }
        }
    }
    if (!col) return;
    for (int r = 0; r < nr; ++r) {
#ifdef PART
        y[p.y_off + q * p.y_part + (r0 + r) * p.C + c] = acc[r * NC + tid];
#else
        y[p.y_off + (r0 + r) * p.C + c] = T(acc[r * NC + tid]);
#endif
    }
}
