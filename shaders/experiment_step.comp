#version 450
// experiment_step.comp: the smallest useful dispatch, for the submission-cost experiment
// (nbs/41_experiment_submission): 64 threads, v[i] = v[i] / 2 + 1. Recorded n times with a barrier
// between dispatches, each one depends on the last (after n steps from 0, v = 2 - 2^(1-n)), as a graph's do.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer V { float v[]; };
layout(push_constant) uniform PC { uint n; } pc;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    v[i] = v[i] * 0.5 + 1.0;
}
