#version 450
// argsort.comp: ARGSORT along one axis -> int64 positions, stable, NaN largest, -0 equal to +0, as the CPU
// oracle (numpy's stable argsort of the values' ranks). A bitonic sort of (key, position) pairs in a scratch
// buffer of rows padded to P = 2^m slots, in three kinds of dispatch:
//   INIT  (per dtype)  each slot gets the ordered key of its value and its position (padding: all ones);
//   STEP  (any dtype)  one compare-exchange stage (k, j) of the bitonic network over every row;
//   OUT               each row's first n positions, as int64, into the output.
// A key is the value's bits made unsigned-ordered (floats: sign flipped or all bits flipped; ints: sign
// flipped), two words wide, all bits flipped again when descending. Pairs compare by key, then position:
// equal values keep their order in both directions, which is what a stable sort gives.
#ifdef INIT
#include "common.glsl"
#else
#define NO_T 1
#include "common.glsl"
#endif
layout(local_size_x = 256) in;

layout(push_constant) uniform PC {
    uint rows;       // rows to sort
    uint n;          // extent of the axis
    uint P;          // slots per row: the power of two >= n
    uint k, j;       // the stage (STEP)
    uint descending;
    uint oshape[4];  // the other axes, left-padded
    int  ost[4];     // their strides in x
    int  zst[4];     // their strides in the output
    int  kst, x_off; // the axis' stride in x, x's offset
    int  zkst, z_off;
} pc;

layout(std430, set = 0, binding = 0) buffer S { uvec4 s[]; };   // (key hi, key lo, position, 0)
#if defined(INIT)
layout(std430, set = 0, binding = 1) readonly buffer X { T x[]; };
#elif defined(OUT)
layout(std430, set = 0, binding = 1) writeonly buffer Z { int64_t z[]; };
#endif

// The element offset of row r's first element, for strides `st` of the other axes.
int row_offset(uint r, int st0, int st1, int st2, int st3) {
    int off = 0;
    const int st[4] = int[4](st0, st1, st2, st3);
    for (int a = 3; a >= 0; --a) { off += int(r % pc.oshape[a]) * st[a]; r /= pc.oshape[a]; }
    return off;
}

#if defined(INIT)
uvec2 ordered(uint u) { return uvec2((u & 0x80000000u) != 0u ? ~u : u | 0x80000000u, 0u); }

uvec2 key_of(T v) {
#if defined(T_F32) || defined(T_F16)
    float f = float(v);
    if (isnan(f)) return ordered(0x7fc00000u);      // every NaN one value, above +inf
    if (f == 0.0) f = 0.0;                          // -0 equals +0
    return ordered(floatBitsToUint(f));
#elif defined(T_F64)
    double d = v;
    if (isnan(d)) return uvec2(0xfff80000u, 0u);    // 0x7ff8... with the sign flipped
    if (d == 0.0lf) d = 0.0lf;
    uvec2 lh = unpackDouble2x32(d);                 // (low, high)
    return (lh.y & 0x80000000u) != 0u ? uvec2(~lh.y, ~lh.x) : uvec2(lh.y | 0x80000000u, lh.x);
#elif defined(T_I64)
    uvec2 lh = unpackUint2x32(uint64_t(v));
    return uvec2(lh.y ^ 0x80000000u, lh.x);
#elif defined(T_I32)
    return uvec2(uint(v) ^ 0x80000000u, 0u);
#else
    return uvec2(uint(v), 0u);
#endif
}
#endif

// Does pair a go before pair b?
bool before(uvec4 a, uvec4 b) {
    if (a.x != b.x) return a.x < b.x;
    if (a.y != b.y) return a.y < b.y;
    return a.z < b.z;
}

void main() {
    const uint gid = GID;
#if defined(INIT)
    if (gid >= pc.rows * pc.P) return;
    const uint r = gid / pc.P, i = gid % pc.P;
    if (i >= pc.n) { s[gid] = uvec4(0xffffffffu); return; }   // padding: after every value
    uvec2 key = key_of(x[pc.x_off + row_offset(r, pc.ost[0], pc.ost[1], pc.ost[2], pc.ost[3]) + int(i) * pc.kst]);
    if (pc.descending != 0u) key = ~key;
    s[gid] = uvec4(key, i, 0u);
#elif defined(STEP)
    const uint half_ = pc.P / 2u;
    if (gid >= pc.rows * half_) return;
    const uint r = gid / half_, q = gid % half_;
    const uint i = (q / pc.j) * 2u * pc.j + q % pc.j, l = i + pc.j;   // the pair (i, l) of this stage
    const uint a = r * pc.P + i, b = r * pc.P + l;
    const uvec4 u = s[a], v = s[b];
    const bool up = (i & pc.k) == 0u;
    if (up ? before(v, u) : before(u, v)) { s[a] = v; s[b] = u; }
#else
    if (gid >= pc.rows * pc.n) return;
    const uint r = gid / pc.n, i = gid % pc.n;
    z[pc.z_off + row_offset(r, pc.zst[0], pc.zst[1], pc.zst[2], pc.zst[3]) + int(i) * pc.zkst] = int64_t(s[r * pc.P + i].z);
#endif
}
