"""A throw-away graph op for the runtime's tests: SELFTEST_ADD(a, b) = a + b on float32, run by a shader the
tests compile themselves, so the runtime's tests (submissions, barriers, scratch, errors, the pipeline cache,
validation) do not depend on the shipped or generated kernels."""
import numpy as np
from vkml.core.dtypes import float32
from vkml.core.ops import Op, SHAPE_RULES, ACCEPTED_DTYPES, same_shape_dtype

ADD_SRC = """#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer O { float o[]; };
layout(std430, set = 0, binding = 1) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { float b[]; };
layout(push_constant) uniform PC { uint n; uint oa; uint ob; };
void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= n) return;
  o[i] = a[oa + i] + b[ob + i];
}
"""


def kernel(node, out, a, b):
    "The host side: one dispatch of the self-test shader (`_selftest_add`)."
    from vkml.backends.vulkan.kernel_api import Dispatch, groups_1d
    n = out.view.numel
    return [Dispatch("_selftest_add", (out, a, b), (n, a.view.offset, b.view.offset), groups_1d(n))]


def define(spirv: bytes) -> Op:
    "Define SELFTEST_ADD (once), with its shape rule, the CPU's numpy and this kernel; register the shader."
    import vkml.backends.vulkan as V
    from vkml.backends.cpu import numpy_impl
    from vkml.backends.vulkan.kernel_api import vk_kernels
    V.register_shader("_selftest_add", spirv)
    op = Op.SELFTEST_ADD if "SELFTEST_ADD" in [o.name for o in Op] else Op.define("SELFTEST_ADD", "contraction")
    SHAPE_RULES[op] = lambda arg, a, b: same_shape_dtype((a, b))
    ACCEPTED_DTYPES[op] = (float32,)
    numpy_impl[op] = lambda n, a, b: a + b
    vk_kernels[op] = kernel
    return op


def remove():
    "Forget SELFTEST_ADD again."
    from vkml.backends.cpu import numpy_impl
    from vkml.backends.vulkan.kernel_api import vk_kernels
    if "SELFTEST_ADD" not in [o.name for o in Op]: return
    op = Op.SELFTEST_ADD
    for t in (SHAPE_RULES, ACCEPTED_DTYPES, numpy_impl, vk_kernels): t.pop(op, None)
    Op.remove("SELFTEST_ADD")
