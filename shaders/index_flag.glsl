// index_flag.glsl: the error flag of a kernel that reads indices (gather, index_add, check_index).
// The host binds 4 zeroed words at binding FLAG_BINDING and reads them when the submission is done:
//   [set, value low word, value high word, flat position of the bad index].
// The first thread to find an out-of-range index claims the flag (atomicCompSwap), so the three
// words it writes belong together; later finders leave it alone. Reads stay in bounds regardless
// (the kernels clamp or skip): the flag makes the host raise IndexOutOfRangeError instead of
// returning what a clamped read produced.
#ifndef INDEX_FLAG_GLSL
#define INDEX_FLAG_GLSL
layout(std430, set = 0, binding = FLAG_BINDING) buffer Flag { uint flag[]; };

void report_index(int64_t v, uint pos) {
    if (flag[0] == 0u && atomicCompSwap(flag[0], 0u, 1u) == 0u) {
        const uvec2 w = unpack32(uint64_t(v));
        flag[1] = w.x; flag[2] = w.y; flag[3] = pos;
    }
}
#endif
