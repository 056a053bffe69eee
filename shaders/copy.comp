#version 450
// copy.comp: one strided copy that serves CONTIGUOUS, PAD, CONCAT and SLICE_BACKWARD. A thread per
// element of the iteration shape writes z[z_off + coords . z_st]. Along each axis k the source window
// starts at lo[k] with step[k] (may be negative) and holds cnt[k] elements: output coordinate c maps
// to source index i = (c - lo) / step when that is a whole number in [0, cnt), else the element is
// `fill` (PAD's value, SLICE_BACKWARD's zeros).
//   CONTIGUOUS      iterate over z, lo 0, step 1, cnt = shape
//   PAD             iterate over z, lo = pad before, step 1, cnt = source shape, fill = value
//   SLICE_BACKWARD  iterate over z (the sliced tensor's shape), lo/step/cnt = the slice, fill = 0
//   CONCAT          one dispatch per input: iterate over the input, z_off = start of its slab
#include "common.glsl"
layout(local_size_x = 256) in;

layout(push_constant) uniform PC {
    uint n;          // elements of the iteration shape
    uint shape[4];   // iteration shape
    int  z_st[4];    // output element strides of the iteration coordinates
    uint z_off;
    int  x_st[4];    // source element strides (per source index)
    int  x_off;
    int  lo[4];      // window start per axis
    int  step[4];    // window step per axis (nonzero)
    uint cnt[4];     // window length per axis
    uint fill[2];    // fill value: float bits / int / int64 or double (low, high)
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { T x[]; };

T fill_value() {
#if defined(T_F64)
    return F64(pc.fill[0], pc.fill[1]);
#elif defined(T_F32) || defined(T_F16)
    return T(uintBitsToFloat(pc.fill[0]));
#elif defined(T_I64)
    return I64(pc.fill[0], pc.fill[1]);
#elif defined(T_I32)
    return int(pc.fill[0]);
#else
    return uint8_t(pc.fill[0]);
#endif
}

void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    uvec4 c = SHAPE_C(pc.shape);
    int src = pc.x_off;
    bool inside = true;
    for (int k = 0; k < 4; ++k) {
        int d = int(c[k]) - pc.lo[k];
        int i = d / pc.step[k];
        inside = inside && i * pc.step[k] == d && i >= 0 && uint(i) < pc.cnt[k];
        src += i * pc.x_st[k];
    }
    T v = fill_value();
    if (inside) v = x[src];   // a branch, not a select: never load outside the source
    z[AT4(c, pc.z_st, pc.z_off)] = v;
}
