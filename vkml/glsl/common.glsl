// common.glsl: what every elementwise/reduction shader of vkML shares.
//   - the extensions for 8/16/64-bit storage and arithmetic (a capability is emitted only where a
//     variant really uses the type, so an f32 variant does not need f16 or i64 on the device);
//   - the storage-type macros: ONE of T_F32 T_F16 T_F64 T_I32 T_I64 T_B8 picks
//       T       the element type stored in the buffers (bool is uint8_t, 1 byte like numpy)
//       ACC     the type we compute in (f16 computes and accumulates in f32, f64 in double, bool in uint)
//       T_FLOAT defined for the three float types (T_F64 variants need the device's shaderFloat64);
//   - GID, the flat thread index of a 1-D launch folded into (gx, gy, 1) workgroups;
//   - 4-D index math: coords of a row-major linear index, and the element offset of a strided view.
#ifndef VKML_COMMON_GLSL
#define VKML_COMMON_GLSL
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
// IEEE specials: the driver must keep inf, NaN and the sign of zero in float32 (without this lavapipe folds
// x - x to 0 for inf), and glslc's optimizer folds no float arithmetic. glslang keeps only one declaration
// of a mode, so vkml.vulkan.codegen.preserve_specials adds float16's and float64's to the compiled words.
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);

#if defined(T_F32)
  #define T float
  #define ACC float
  #define T_FLOAT 1
#elif defined(T_F16)
  #define T float16_t
  #define ACC float
  #define T_FLOAT 1
#elif defined(T_F64)
  #define T double
  #define ACC double
  #define T_FLOAT 1
#elif defined(T_I32)
  #define T int
  #define ACC int
#elif defined(T_I64)
  #define T int64_t
  #define ACC int64_t
#elif defined(T_B8)
  #define T uint8_t
  #define ACC uint
#elif !defined(NO_T)
  #error "define one of T_F32 T_F16 T_F64 T_I32 T_I64 T_B8"
#endif

// The 4-element vector of the storage type, for the VEC4 fast paths.
#if defined(T_F16)
  #define TV4 f16vec4
#elif defined(T_F64)
  #define TV4 dvec4
#elif defined(T_I32)
  #define TV4 ivec4
#elif defined(T_I64)
  #define TV4 i64vec4
#else
  #define TV4 vec4
#endif

// The flat thread index of a 1-D launch folded into (gx, gy, 1) workgroups (the contract's rule).
#define GID (gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x)
// The flat workgroup index, for kernels that give one workgroup to each output row.
#define WGID (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x)

#define F_NAN uintBitsToFloat(0x7fc00000u)
#define F_INF uintBitsToFloat(0x7f800000u)
#define F_NINF uintBitsToFloat(0xff800000u)

// Row-major coordinates of the linear index i in the rank-4 shape (s0, s1, s2, s3); s0 is implied.
uvec4 coords4(uint i, uint s1, uint s2, uint s3) {
    uvec4 c;
    c.w = i % s3; i /= s3;
    c.z = i % s2; i /= s2;
    c.y = i % s1; c.x = i / s1;
    return c;
}
// The element offset of coords c in a view with element strides ST (an int[4] push constant, may be
// 0 or negative) and element offset OFF.
#define AT4(c, ST, OFF) (int(OFF) + int((c).x) * (ST)[0] + int((c).y) * (ST)[1] + int((c).z) * (ST)[2] + int((c).w) * (ST)[3])
// Coords of gid in the push-constant shape S; a 1-D shape (the host merges the axes of contiguous
// operands into one) skips the divisions.
#define SHAPE_C(S) (((S)[0] == 1u && (S)[1] == 1u && (S)[2] == 1u) ? uvec4(0u, 0u, 0u, gid) : coords4(gid, (S)[1], (S)[2], (S)[3]))

// An int64, or a double, from two push-constant words (low, high).
#define I64(lo, hi) int64_t((uint64_t(uint(hi)) << 32) | uint64_t(uint(lo)))
#define F64(lo, hi) packDouble2x32(uvec2(uint(lo), uint(hi)))
#endif
