"""Out of device memory on a real GPU (issue 12, Deliver 4): allocate until the driver refuses, check that
the failure is a typed `OutOfMemoryError`, that nothing is left half-allocated, and that the library keeps
working after it; three rounds. Also: one request larger than the heap, and a training step after it all.

    python3 bench/h200_reliability.py --out OUT/oom_h200.json           # on the H200 (see h200_reliability.sh)
    .venv/bin/python bench/h200_reliability.py --small                   # on lavapipe: the single-request check only

`--small` skips filling the heap (on lavapipe the heap is the host's RAM). Exit status 0 when every check held.
"""
import argparse, gc, json, sys, time
import numpy as np

import vkml
import vkml.frontend.functions as VF
import vkml.nn as nn
import vkml.nn.functional as F
from vkml.core.dtypes import OutOfMemoryError, VkmlError


def heap_bytes() -> int:
    from vkml.backends.vulkan.device import get_device
    return max(s for s, _ in get_device().info.memory["heaps"])


def in_use() -> int:
    gc.collect()
    return vkml.memory_stats("vulkan")["bytes_in_use"]


def still_works() -> bool:
    "A few kernels after the failure: elementwise, a reduction, a matmul, an index check, a training step."
    x = vkml.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="vulkan")
    ok = (x * 2 + 1).numpy().tolist() == (np.arange(12).reshape(3, 4) * 2 + 1).tolist()
    ok &= float(x.sum().item()) == 66.0
    ok &= np.allclose((x @ x.T).numpy(), np.arange(12.0).reshape(3, 4) @ np.arange(12.0).reshape(3, 4).T)
    try:
        x[vkml.tensor([0, 1], device="vulkan") + 5].numpy()
        ok = False
    except vkml.IndexOutOfRangeError: pass
    m = nn.Linear(4, 3).to("vulkan")
    opt = vkml.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad(); loss = F.cross_entropy(m(x), vkml.tensor([0, 1, 2], device="vulkan")); loss.backward(); opt.step()
    return bool(ok and np.isfinite(loss.item()))


def fill_round(chunk_bytes: int, limit_s: float) -> dict:
    "Realize `chunk_bytes` tensors until the device refuses one; the error, then everything freed."
    base, held, t0 = in_use(), [], time.monotonic()
    err = None
    try:
        while time.monotonic() - t0 < limit_s:
            t = VF.ones(chunk_bytes // 4, device="vulkan")
            vkml.realize(t)
            held.append(t)
    except Exception as e:
        err = e
    n = len(held)
    del held
    after = in_use()
    return dict(chunks=n, gib_held=round(n * chunk_bytes / 2**30, 1), error=type(err).__name__ if err else None,
                typed=isinstance(err, OutOfMemoryError), driver_refused="the driver refused" in str(err),
                message=str(err)[:400] if err else None,
                bytes_before=base, bytes_after=after, freed=after <= base + (1 << 20), works_after=still_works(),
                seconds=round(time.monotonic() - t0, 1))


def one_huge_request() -> dict:
    "One tensor of twice the heap, realized together with other work."
    base = in_use()
    keep = vkml.tensor(np.arange(10, dtype=np.float32), device="vulkan") * 2
    keep.numpy()
    try:
        (VF.ones(heap_bytes() // 2, device="vulkan") + keep.sum()).numpy()
        err = None
    except Exception as e:
        err = e
    return dict(error=type(err).__name__ if err else None, typed=isinstance(err, OutOfMemoryError),
                message=str(err)[:300] if err else None, freed=in_use() <= base + (1 << 20),
                works_after=still_works() and (keep + 1).numpy().tolist() == [2.0 * i + 1 for i in range(10)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--small", action="store_true", help="skip filling the heap (lavapipe)")
    ap.add_argument("--chunk-gib", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit-s", type=float, default=60.0, help="per round")
    a = ap.parse_args()
    from vkml.backends.vulkan.device import get_device, validation_messages, instance
    dev = get_device()
    res = dict(device=dev.info.name, heap_gib=round(heap_bytes() / 2**30, 1), validation=instance().validation,
               huge=[one_huge_request() for _ in range(2)])
    if not a.small:
        res["fill"] = [fill_round(int(a.chunk_gib * 2**30), a.limit_s) for _ in range(a.rounds)]
    res["validation_messages"] = len(validation_messages())
    checks = [r["typed"] and r["freed"] and r["works_after"] for r in res["huge"] + res.get("fill", [])]
    res["ok"] = bool(all(checks) and res["validation_messages"] == 0)
    txt = json.dumps(res, indent=1)
    print(txt)
    if a.out:
        with open(a.out, "w") as f: f.write(txt)
    print(f"out-of-memory checks: {sum(checks)} of {len(checks)} held; validation messages: {res['validation_messages']}")
    vkml.close()
    sys.exit(0 if res["ok"] else 1)


if __name__ == "__main__":
    main()
