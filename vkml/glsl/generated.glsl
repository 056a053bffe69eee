// generated.glsl: what the kernels vkML writes at run time (vkml.vulkan.codegen) share besides
// common.glsl and math.glsl: the helpers some elementwise rows' expressions call, and the index of
// an operand from its words in the args buffer.
#ifndef VKML_GENERATED_GLSL
#define VKML_GENERATED_GLSL

// RAND's bits: lowbias32(lowbias32((offset + i) ^ k0) ^ k1), all mod 2^32 (the contract of vkml.elementwise).
uint vlowbias32(uint x) { x ^= x >> 16; x *= 0x21f0aaadu; x ^= x >> 15; x *= 0x735a2d97u; x ^= x >> 15; return x; }
uint vrand_bits(uint i, uint k0, uint k1, uint offset) { return vlowbias32(vlowbias32((offset + i) ^ k0) ^ k1); }

// softplus as PyTorch: x where beta x > threshold, else log1p(e^(beta x)) / beta.
float vsoftplus(float x, float beta, float threshold) {
    float bx = beta * x;
    return bx > threshold ? x : vlog1p(vexp(bx)) / beta;
}

// clamp that keeps NaN: a NaN input or a NaN bound gives NaN (GLSL's clamp promises neither).
float vclamp(float v, float lo, float hi) {
    if (isnan(v) || isnan(lo) || isnan(hi)) return F_NAN;
    return min(max(v, lo), hi);
}
#endif
