"""PyTorch's eager losses for the digits MLP, the fixture `tests/test_trust.py` compares vkML's standard loop to.

The model is vkML's `build_model("mlp", 0)` (its weights copied into PyTorch by name), trained on the first
batches of the fixed digits split in PyTorch's standard loop: `loss.backward(); opt.step(); loss.item()`.
Run where PyTorch is installed (the H200 host): `python bench/torch_digits_losses.py OUT.json`."""
import json, sys, datetime
import numpy as np
import torch
from vkml.demo import build_model
from vkml.data import digits_split

STEPS, BATCH = 12, 64
OPTIMS = {"sgd": dict(cls="SGD", lr=0.1), "momentum": dict(cls="SGD", lr=0.05, momentum=0.9),
          "adam": dict(cls="Adam", lr=1e-3)}


def batches():
    xtr, ytr, _, _ = digits_split()
    return [(xtr[i * BATCH:(i + 1) * BATCH], ytr[i * BATCH:(i + 1) * BATCH]) for i in range(STEPS)]


def weights() -> dict:
    return {k: v.numpy() for k, v in build_model("mlp", 0).state_dict().items()}


def torch_losses(spec: dict) -> list:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    m.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights().items()})
    kw = {k: v for k, v in spec.items() if k != "cls"}
    opt = getattr(torch.optim, spec["cls"])(m.parameters(), **kw)
    out = []
    for x, y in batches():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward(); opt.step()
        out.append(loss.item())
    return out


if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    res = {name: torch_losses(spec) for name, spec in OPTIMS.items()}
    meta = {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "device": "cpu (float32)",
            "steps": STEPS, "batch": BATCH, "optimisers": OPTIMS, "command": "python bench/torch_digits_losses.py"}
    json.dump({"provenance": meta, "losses": res}, open(sys.argv[1], "w"), indent=1)
    print(json.dumps(res, indent=1))
