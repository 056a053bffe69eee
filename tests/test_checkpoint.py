"""Checkpoints of models and optimisers: save -> load round trips bit for bit, a state dict that does not fit
names the key, a truncated or corrupt file is a CheckpointError, and an interrupted save keeps the
previous file."""
import os
import numpy as np
import pytest

import vkml
import vkml.frontend.autograd  # noqa: F401
import vkml.frontend.functions as VF
import vkml.io
import vkml.nn as nn
import vkml.optim as optim
from vkml.demo import save_checkpoint, load_checkpoint, build_model
from vkml.core.dtypes import CheckpointError
from vkml.frontend.tensor import tensor


def trained(kind="cnn", steps=2, seed=0):
    m = build_model(kind, seed)
    m.add_module("bn", nn.BatchNorm1d(10))   # a model with buffers too
    opt = optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(seed)
    x = rng.random((8, 1, 8, 8) if kind == "cnn" else (8, 64), dtype=np.float32)
    y = rng.integers(0, 10, 8)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(m(tensor(x)), tensor(y))
        opt.zero_grad(); loss.backward(); opt.step()
    return m, opt


def fresh(kind="cnn", seed=1):
    m = build_model(kind, seed)
    m.add_module("bn", nn.BatchNorm1d(10))
    return m, optim.Adam(m.parameters(), lr=0.5)


@pytest.mark.parametrize("kind", ["cnn", "mlp"])
def test_round_trip_is_bit_identical(tmp_path, kind):
    m, opt = trained(kind)
    path = save_checkpoint(tmp_path / "ck.safetensors", m, opt, note="hi")
    m2, opt2 = fresh(kind)
    info = load_checkpoint(path, m2, opt2)
    assert info["note"] == "hi"
    a, b = m.state_dict(), m2.state_dict()
    assert list(a) == list(b)
    for k in a:
        x, y = a[k].numpy(), b[k].numpy()
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes(), k
    sa, sb = opt.state_dict(), opt2.state_dict()
    assert sa["param_groups"] == [dict(g, betas=tuple(g["betas"])) for g in sb["param_groups"]]
    for i, st in sa["state"].items():
        for k, v in st.items():
            w = sb["state"][i][k]
            if isinstance(v, vkml.Tensor): assert v.numpy().tobytes() == w.numpy().tobytes(), (i, k)
            else: assert v == w
    assert m2.bn.num_batches_tracked.item() == 2


def test_io_round_trip_nested_state(tmp_path):
    state = {"a": tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), "b": {"c": tensor(np.array([1, 2], np.int64)),
             "lr": 0.1, "betas": (0.9, 0.999)}, "n": 3}
    vkml.io.save(state, tmp_path / "s.safetensors")
    back = vkml.io.load(tmp_path / "s.safetensors")
    assert back["a"].numpy().tobytes() == state["a"].numpy().tobytes() and back["b"]["c"].dtype is vkml.int64
    assert back["b"]["lr"] == 0.1 and back["b"]["betas"] == (0.9, 0.999) and back["n"] == 3


def test_load_errors_name_the_key():
    m, _ = trained("mlp", steps=0)
    sd = {k: v.numpy() for k, v in m.state_dict().items()}
    m2, _ = fresh("mlp")
    # PyTorch's messages: 'Missing key(s) in state_dict: "2.bias".', 'Unexpected key(s) in state_dict: ...',
    # 'size mismatch for 0.weight: copying a param with shape ... from checkpoint, the shape in current model is ...'
    with pytest.raises(CheckpointError, match=r'Missing key\(s\) in state_dict: "2.bias"'):
        m2.load_state_dict({k: v for k, v in sd.items() if k != "2.bias"})
    with pytest.raises(CheckpointError, match=r'Unexpected key\(s\) in state_dict: "head.weight"'):
        m2.load_state_dict(sd | {"head.weight": sd["0.weight"]})
    with pytest.raises(CheckpointError, match=r"size mismatch for 0.weight"):
        m2.load_state_dict(sd | {"0.weight": sd["0.weight"][:, :10]})
    with pytest.raises(CheckpointError, match="bn.num_batches_tracked"):
        m2.load_state_dict(sd | {"bn.num_batches_tracked": np.float32(1.5) * np.ones((), np.float32)})


def test_loading_a_checkpoint_of_another_model_names_the_key(tmp_path):
    m, opt = trained("mlp", steps=1)
    path = save_checkpoint(tmp_path / "mlp.safetensors", m, opt)
    other, _ = fresh("cnn")
    with pytest.raises(CheckpointError, match="0.weight|Missing key|Unexpected key"):
        load_checkpoint(path, other)


def test_truncated_and_corrupt_files(tmp_path):
    m, opt = trained("mlp", steps=1)
    path = save_checkpoint(tmp_path / "ck.safetensors", m, opt)
    data = open(path, "rb").read()
    for name, bad in [("truncated", data[: len(data) // 2]), ("header", data[:8] + b"{not json" + data[17:]),
                      ("empty", b""), ("noise", os.urandom(256))]:
        p = tmp_path / f"{name}.safetensors"
        p.write_bytes(bad)
        with pytest.raises(CheckpointError):
            load_checkpoint(p, fresh("mlp")[0])


def test_interrupted_save_keeps_the_previous_file(tmp_path, monkeypatch):
    m, opt = trained("mlp", steps=1)
    path = tmp_path / "ck.safetensors"
    save_checkpoint(path, m, opt)
    before = path.read_bytes()
    import safetensors.numpy

    def crash(arrays, filename, metadata=None):
        with open(filename, "wb") as f: f.write(b"half a file")
        raise KeyboardInterrupt("power cut")
    monkeypatch.setattr(safetensors.numpy, "save_file", crash)
    m2, opt2 = trained("mlp", steps=3)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, m2, opt2)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ck.safetensors"]   # no temporary left behind
    monkeypatch.undo()
    load_checkpoint(path, fresh("mlp")[0])   # still loads


@pytest.mark.vulkan
def test_checkpoint_from_vulkan_loads_on_cpu(tmp_path):
    m = build_model("mlp").to("vulkan")
    opt = optim.Adam(m.parameters(), lr=1e-2)
    x, y = np.random.default_rng(0).random((4, 64), dtype=np.float32), np.array([1, 2, 3, 4])
    loss = nn.functional.cross_entropy(m(tensor(x, device="vulkan")), tensor(y, device="vulkan"))
    opt.zero_grad(); loss.backward(); opt.step()
    path = save_checkpoint(tmp_path / "vk.safetensors", m, opt)
    c = build_model("mlp", seed=9)
    copt = optim.Adam(c.parameters(), lr=1e-2)
    load_checkpoint(path, c, copt)
    for (k, a), (_, b) in zip(m.state_dict().items(), c.state_dict().items()):
        assert a.numpy().tobytes() == b.numpy().tobytes(), k
    assert all(t.device == "cpu" for st in copt.state.values() for t in st.values() if isinstance(t, vkml.Tensor))
