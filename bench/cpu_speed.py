"""A pure-Python reference workload (dict and attribute traffic like a graph builder's), to compare host CPUs:
    python bench/cpu_speed.py      # prints microseconds per iteration (min of 7)"""
import time

class N:
    __slots__ = ("op", "srcs", "shape")
    def __init__(self, op, srcs, shape): self.op, self.srcs, self.shape = op, srcs, shape

def work(n=20000):
    d, prev = {}, N(0, (), (16, 16))
    for i in range(n):
        x = N(i & 7, (prev,), prev.shape)
        d[id(x)] = [s for s in x.srcs if s.shape == x.shape]
        prev = x
    return len(d)

if __name__ == "__main__":
    best = min((lambda t0: (work(), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(7))
    print(f"cpu_speed: {best / 20000 * 1e6:.3f} us per iteration")
