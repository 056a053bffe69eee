#version 450
// experiment_prod.comp: a THROW-AWAY kernel for the prod experiment (nbs/40_experiment_prod), not an
// operator: vkML's `prod` stays CPU-only. One workgroup; `lanes` threads (1..64) each multiply, in index
// order, the elements i = lane, lane + lanes, lane + 2*lanes ...; thread 0 then multiplies the lane
// products in lane order. lanes = 1 is the index-order product the CPU computes.
// Output binding 0: y[0] = the product, y[1 + l] = lane l's product (to show where inf and 0 come from).
#extension GL_EXT_control_flow_attributes : require
#define UNROLL 32u
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Out { float y[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { float x[]; };
layout(push_constant) uniform PC { uint n; uint lanes; uint x_off; } pc;
shared float part[64];

void main() {
    uint lane = gl_LocalInvocationID.x;
    precise float p = 1.0;                  // precise: no reassociation, the order is the experiment
    // lavapipe (gallivm) ends a shader invocation's loops after 65,535 iterations IN TOTAL, silently:
    // each trip of the outer loop multiplies UNROLL elements, so one lane reaches 2^21 of them.
    uint steps = lane < pc.lanes ? (pc.n - lane + pc.lanes - 1) / pc.lanes : 0u;   // elements of this lane
    for (uint b = 0; b < steps; b += UNROLL) {
        [[unroll]] for (uint k = 0; k < UNROLL; ++k)
            if (b + k < steps) p *= x[pc.x_off + lane + (b + k) * pc.lanes];
    }
    part[lane] = p;
    barrier();                              // every lane's product is in shared memory
    if (lane < pc.lanes) y[1 + lane] = p;
    if (lane == 0) {
        precise float r = 1.0;
        for (uint l = 0; l < pc.lanes; ++l) r *= part[l];
        y[0] = r;
    }
}
