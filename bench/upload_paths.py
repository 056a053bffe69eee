"""A CIFAR batch (128 x 3 x 32 x 32 float32, 1.5 MB) to the device by each of vkML's two upload paths, in one process:
straight into host-visible device memory (what a GPU with it uses: on a discrete GPU, writes across PCIe through the BAR),
or into host memory then copied by the GPU in the next submission (staged: what a device without it uses). Then the raw
host copies of the same bytes into each kind of memory. Timings only, printed:

    python bench/upload_paths.py
"""
import statistics, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml, vkml.backends.vulkan as vkv
from vkml.backends.vulkan.recorder import runtime

def median_us(fn, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6

def main():
    dev = vkv.get_device(vkv.default_index())
    rt = runtime(dev)
    x = np.random.default_rng(0).standard_normal((128, 3, 32, 32)).astype(np.float32)
    shipped = rt.mem.direct_upload
    print(f"{dev.info.name}: device memory host-visible: {rt.mem.tensors.host_visible}; the shipped path: "
          f"{'direct' if shipped else 'staged'}")
    try:
        for mode in ("direct", "staged", "direct", "staged"):
            if mode == "direct" and not rt.mem.tensors.host_visible: continue
            rt.mem.direct_upload = mode == "direct"
            up = median_us(lambda: vkml.tensor(x, device="vulkan"), 50)
            step = median_us(lambda: vkml.tensor(x, device="vulkan").sum().item(), 30)   # the upload used by a kernel
            print(f"{mode:<7} upload {up:8.1f} us; upload + sum + item {step:8.1f} us")
    finally: rt.mem.direct_upload = shipped
    raw = x.reshape(-1).view(np.uint8)
    for kind in ("device", "staging"):
        pool = rt.mem.pool(kind)
        if not pool.host_visible: continue
        a = pool.alloc(raw.nbytes, host=True)
        us = median_us(lambda a=a: a.block.host.__setitem__(slice(a.offset, a.offset + raw.nbytes), raw), 30)
        print(f"{kind:<8} memory, host copy of 1.5 MB: {us:8.1f} us ({raw.nbytes / us / 1e3:.2f} GB/s)")

if __name__ == "__main__": main()
