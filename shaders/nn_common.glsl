// nn_common.glsl: what the nn kernels (matmul, conv, pool, gather, index_add) add to common.glsl.
// common.glsl gives the extensions, the storage type T and accumulator ACC picked by ONE of
// T_F32 T_F16 T_I32 T_I64 T_B8 (f16 accumulates in f32), and GID (the folded 1-D thread index).
#ifndef NN_COMMON_GLSL
#define NN_COMMON_GLSL
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
#define TO_ACC(x) ACC(x)
// FACC: what the float kernels (matmul, convolution) multiply and add in: float for f32 and f16, double for f64.
#if defined(T_F64)
#define FACC double
#else
#define FACC float
#endif
#define FROM_ACC(x) T(x)
#define NEG_INF F_NINF

// lavapipe (llvmpipe's gallivm) stops a shader invocation after 65,535 loop iterations IN TOTAL (every
// loop, nested or not, draws on one budget), silently. Loops marked [[unroll]] with a constant trip
// count are unrolled and cost nothing; the hosts keep every other loop's trips under the budget.

// The taps i (< k) of the windows that cover position `pos` (a pixel plus the padding): those with
// pos - i*d == o*s for a block 0 <= o < nb. They step by q = s / gcd(s, d) (the host passes q): the
// lowest and highest such i go to lo and hi (lo > hi: none). At most q trips to find the first.
void tap_range(int pos, int d, int s, int nb, int k, int q, out int lo, out int hi) {
    lo = max(0, pos - (nb - 1) * s > 0 ? (pos - (nb - 1) * s + d - 1) / d : 0);
    hi = min(k - 1, pos / d);
    if (nb <= 0 || pos < 0) { lo = 1; hi = 0; return; }
    for (int c = 0; c < q && lo <= hi && (pos - lo * d) % s != 0; ++c) ++lo;
    if (lo > hi || (pos - lo * d) % s != 0) { lo = 1; hi = 0; return; }
    hi = lo + ((hi - lo) / q) * q;
}
#endif
