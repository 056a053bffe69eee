#version 450
// fill.comp: the source ops, z contiguous.
//   FILL   (CONST, FULL, and the identity of an empty reduction): z[i] = value
//   ARANGE z[i] = start + i * step (floats in f32, ints exactly, wrapping)
//   RAND   (floats only) the counter-based hash of the contract: bits = H(H(c ^ k0) ^ k1) with
//          c = offset + i (mod 2^32), H = lowbias32, k0 = H(seed_lo), k1 = H(seed_hi + 0x9e3779b9)
//          (k0, k1 depend on the seed only: the host computes them); f32 = (bits >> 8) 2^-24,
//          f16 = (bits >> 21) 2^-11, both exact.
// Values arrive as words: float bits, an int, or an int64 as (low, high).
#include "common.glsl"
layout(local_size_x = 256) in;

#define F_FILL 0
#define F_ARANGE 1
#define F_RAND 2

layout(push_constant) uniform PC {
    uint n;
    uint mode;   // F_*
    uint v[4];   // FILL: value (1 or 2 words); ARANGE: start, step (1 or 2 words each: v0 v1 | v2 v3); RAND: k0, k1, offset
    uint z_off;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Z { T z[]; };

uint lowbias32(uint x) {
    x ^= x >> 16; x *= 0x21f0aaadu; x ^= x >> 15; x *= 0x735a2d97u; x ^= x >> 15;
    return x;
}

void main() {
    uint gid = GID;
    if (gid >= pc.n) return;
    T r;
#if defined(T_FLOAT)
    if (pc.mode == F_FILL) r = T(uintBitsToFloat(pc.v[0]));
    else if (pc.mode == F_ARANGE) r = T(uintBitsToFloat(pc.v[0]) + float(gid) * uintBitsToFloat(pc.v[2]));
    else {
        uint bits = lowbias32(lowbias32((pc.v[2] + gid) ^ pc.v[0]) ^ pc.v[1]);
  #if defined(T_F16)
        r = T(float(bits >> 21) * (1.0 / 2048.0));
  #else
        r = T(float(bits >> 8) * (1.0 / 16777216.0));
  #endif
    }
#elif defined(T_I64)
    if (pc.mode == F_FILL) r = I64(pc.v[0], pc.v[1]);
    else r = I64(pc.v[0], pc.v[1]) + int64_t(gid) * I64(pc.v[2], pc.v[3]);
#elif defined(T_I32)
    if (pc.mode == F_FILL) r = int(pc.v[0]);
    else r = int(pc.v[0]) + int(gid) * int(pc.v[2]);
#else
    r = uint8_t(pc.v[0] != 0u ? 1u : 0u);
#endif
    z[pc.z_off + gid] = r;
}
