"""The digits demo: training lowers the loss; one seed gives the same trajectory on the CPU and on Vulkan;
a training step on Vulkan is one submission and, from the second step on, allocates no memory; no PROD
node; the command's output against a golden copy (timings masked); its checkpoint reproduces its accuracy.
`--model gpt` (nbs/38_gpt.ipynb): the loss falls, one seed repeats it, the CPU and Vulkan agree, the command
prints its progress and writes its figures."""
import json, os, re, subprocess, sys
from pathlib import Path
import numpy as np
import pytest

import vkml
import vkml.frontend.autograd  # noqa: F401
import vkml.nn as nn
import vkml.optim as optim
from vkml import demo
from vkml.data import DataLoader
from vkml.core.ops import Op
from vkml.frontend.tensor import toposort

ROOT = Path(__file__).resolve().parents[1]


def batches(kind, n, bs=32, device="cpu", seed=0):
    xtr, ytr, _, _ = demo.digits(kind)
    it = iter(DataLoader(xtr, ytr, batch_size=bs, shuffle=True, seed=seed, device=device))
    return [next(it) for _ in range(n)]


def trajectory(kind, device, steps, seed=0):
    model = demo.build_model(kind, seed).to(device)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    return [demo.train_step(model, opt, x, y)[0] for x, y in batches(kind, steps, device=device, seed=seed)], model


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_loss_falls(kind):
    losses, _ = trajectory(kind, "cpu", 30)
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])


def test_same_seed_same_trajectory_on_cpu():
    a, _ = trajectory("mlp", "cpu", 5)
    b, _ = trajectory("mlp", "cpu", 5)
    assert a == b
    c, _ = trajectory("mlp", "cpu", 5, seed=1)
    assert c != a


@pytest.mark.vulkan
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_same_trajectory_on_cpu_and_vulkan(kind):
    steps = 12
    cpu, mc = trajectory(kind, "cpu", steps)
    vk, mv = trajectory(kind, "vulkan", steps)
    # the parity bound of one loss (a reduction over matmul/conv terms), widening as the steps compound
    for i, (a, b) in enumerate(zip(vk, cpu)):
        assert abs(a - b) <= (1e-5 + 1e-4 * abs(b)) * (1 + i), (i, a, b)
    for (k, p), (_, q) in zip(mv.state_dict().items(), mc.state_dict().items()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-3, atol=1e-4, err_msg=k)


@pytest.mark.vulkan
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_one_realize_per_step_and_steady_memory(kind):
    "An eager step is one realize (submitted in parts as it is recorded: tests/test_submit_parts.py), the same each step."
    import vkml.backends.vulkan as V
    model = demo.build_model(kind).to("vulkan")
    opt = optim.Adam(model.parameters(), lr=1e-2)
    dev = model.device
    subs, realizes, mem = [], [], []
    for x, y in batches(kind, 6, device="vulkan"):
        s0 = V.stats()
        demo.train_step(model, opt, x, y)
        s1 = V.stats()
        subs.append(s1["submissions"] - s0["submissions"]); realizes.append(s1["realizes"] - s0["realizes"])
        m = V.memory_stats(dev)
        mem.append((m["allocations"], m["bytes_reserved"]))
    assert realizes == [1] * 6 and len(set(subs[1:])) == 1, (realizes, subs)   # (the first also uploads the weights)
    assert len(set(mem[1:])) == 1, mem   # from the second step on: no new vkAllocateMemory, no new reserve


def test_no_prod_node_in_a_training_step(monkeypatch):
    seen = []
    real = optim.realize
    monkeypatch.setattr(optim, "realize", lambda *ts: (seen.append({n.op for n in toposort([t.node for t in ts])}), real(*ts)))
    for kind in ("mlp", "cnn"):
        trajectory(kind, "cpu", 1)
    assert len(seen) == 2 and all(Op.PROD not in ops and Op.MATMUL in ops for ops in seen)


def test_parity_check_agrees_with_itself_on_cpu():
    (x, y), = batches("cnn", 1)
    dev, ref, bound = demo.first_step_parity(demo.build_model("cnn"), x.numpy(), y.numpy(), "cnn")
    assert dev == ref and bound > 0 and 2.0 < ref < 2.6   # ~ln 10 from a fresh model


# --- the command ---------------------------------------------------------------------------------

GOLDEN = """\
vkML digits demo: mlp on <DEVICE>
data: 1437 train / 360 test images; model: 9,610 parameters
set-up: <T> s (data, device, model)
first-step loss: <DEV> <L> | cpu <L> | |diff| <D> <= bound <B>: ok
epoch 1/1: loss 0.8850  train acc 0.748  test acc 0.894  | <T> s, <N> samples/s
<SUBMISSIONS>training: <T> s for 1 epochs (<N> samples/s)
checkpoint: <OUT>/digits_mlp.safetensors
plot: <OUT>/digits_mlp.png
final test accuracy: 0.894
"""


def mask(text, out):
    text = text.replace(str(out), "<OUT>")
    text = re.sub(r"(mlp on )\S+.*", r"\1<DEVICE>", text)
    text = re.sub(r"first-step loss: \S+ [\d.]+ \| cpu [\d.]+ \| \|diff\| [\d.e+-]+ <= bound [\d.e+-]+",
                  "first-step loss: <DEV> <L> | cpu <L> | |diff| <D> <= bound <B>", text)
    text = re.sub(r"\d+\.\d+ s\b", "<T> s", text)
    text = re.sub(r"\d+ samples/s", "<N> samples/s", text)
    return text


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    "`python -m vkml.demo --epochs 1 --model mlp` (on cpu when there is no Vulkan device), run once."
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import vulkan_status
    out = tmp_path_factory.mktemp("demo_out")
    args = [sys.executable, "-m", "vkml.demo", "--epochs", "1", "--model", "mlp", "--out", str(out)]
    on_vulkan = vulkan_status()[0]
    if not on_vulkan: args += ["--device", "cpu"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return r, out, on_vulkan


def test_demo_output_golden(demo_run):
    r, out, on_vulkan = demo_run
    text = mask(r.stdout, out)
    if on_vulkan:   # the replays submit once; the first (eager, warm-up) step goes in parts as it is recorded
        m = re.search(r"submissions per training step: ([\d.]+) \((\d+) submissions in 45 steps\)\n", text)
        assert m and 45 <= int(m.group(2)) <= 48 and m.group(1) == f"{int(m.group(2)) / 45:.2f}", text
        text = text.replace(m.group(0), "<SUBMISSIONS>")
    assert text == (GOLDEN if on_vulkan else GOLDEN.replace("<SUBMISSIONS>", ""))
    assert "epoch 1/1" in r.stderr   # the progress bar goes to stderr


def test_demo_checkpoint_reproduces_accuracy(demo_run):
    r, out, _ = demo_run
    acc = float(re.search(r"final test accuracy: ([\d.]+)", r.stdout).group(1))
    model = demo.build_model("mlp", seed=7)   # other weights, replaced by the checkpoint's
    info = demo.load_checkpoint(out / "digits_mlp.safetensors", model)
    _, _, xte, yte = demo.digits("mlp")
    got = demo.evaluate(model, xte, yte, "cpu")
    assert round(got, 3) == acc and info["test_acc"] == pytest.approx(got, abs=1e-6)
    assert (out / "digits_mlp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_notebook_import_does_not_train():
    "Importing vkml.demo (as nbdev and the docs do) must not run main()."
    r = subprocess.run([sys.executable, "-c", "import vkml.demo; print('imported')"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.stdout.strip() == "imported", r.stdout + r.stderr


def test_bad_arguments():
    with pytest.raises(SystemExit): demo.parse_args(["--model", "resnet"])
    with pytest.raises(vkml.DeviceError): demo.main(["--device", "tpu", "--out", "/nonexistent"])


@pytest.mark.vulkan
def test_changing_lr_needs_no_new_pipeline_and_stays_one_realize():
    "Batch norm's deferred statistics, dropout's mask and a scheduled lr join the one realize of each step."
    import vkml.backends.vulkan as V
    import vkml.frontend.functions as VF
    VF.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.2),
                          nn.Flatten(), nn.Linear(64, 10)).to("vulkan")
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = optim.CosineAnnealingLR(opt, T_max=5)
    subs, pipes = [], []
    for x, y in batches("cnn", 5, device="vulkan"):
        s = V.stats()
        demo.train_step(model, opt, x, y)
        sched.step()
        t = V.stats()
        subs.append((t["realizes"] - s["realizes"], t["submissions"] - s["submissions"])); pipes.append(t["pipelines_created"])
    assert [r for r, _ in subs] == [1] * 5 and len(set(subs[1:])) == 1, subs
    assert len(set(pipes[1:])) == 1, pipes
    assert model[1].running_mean.node.realized and model[1].num_batches_tracked.item() == 5


# --- --model gpt: the character-level GPT of nbs/38_gpt.ipynb --------------------------------------

from vkml import demo_gpt


def gpt_losses(device, steps, seed=0):
    "The per-step losses of the tiny GPT trained for `steps` steps on `device`."
    text = demo_gpt.load_corpus()
    vocab = demo_gpt.CharVocab(text)
    train_ids, val_ids = demo_gpt.split_ids(vocab.encode(text))
    cfg, tc = demo_gpt.configs("tiny", len(vocab), steps=steps, eval_interval=steps)
    model = demo_gpt.build_gpt(cfg, seed).to(device)
    return demo_gpt.train_gpt(model, train_ids, val_ids, tc, seed=seed)["step_loss"]


def test_gpt_loss_falls_and_repeats_on_cpu():
    a = gpt_losses("cpu", 30)
    assert np.mean(a[-5:]) < np.mean(a[:5]) - 0.5
    assert gpt_losses("cpu", 30) == a


@pytest.mark.vulkan
def test_gpt_same_trajectory_on_cpu_and_vulkan():
    cpu, vk = gpt_losses("cpu", 8), gpt_losses("vulkan", 8)
    for i, (a, b) in enumerate(zip(vk, cpu)):   # the parity bound of one loss, widening as the steps compound
        assert abs(a - b) <= (1e-5 + 1e-4 * abs(b)) * (1 + i), (i, a, b)


def test_gpt_command(tmp_path):
    "`python -m vkml.demo --model gpt --size tiny --steps 4`: its progress, its figures (JSON) and its plot."
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import vulkan_status
    args = ["-m", "vkml.demo", "--model", "gpt", "--size", "tiny", "--steps", "4", "--out", str(tmp_path)]
    if not vulkan_status()[0]: args += ["--device", "cpu"]
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r"^step 4/4: train loss [\d.]+, val loss [\d.]+ \| lr [\d.e+-]+ \| [\d,]+ tokens/s$", r.stdout, re.M), r.stdout
    assert re.search(r"^training: [\d.]+ s for 4 steps; [\d,]+ tokens/s", r.stdout, re.M), r.stdout
    assert "gpt:" in r.stderr   # the progress bar
    doc = json.loads((tmp_path / "gpt_tiny.json").read_text())
    assert doc["command"] == "python -m vkml.demo " + " ".join(args[2:])
    assert len(doc["step_loss"]) == 4 and doc["tokens_per_s"] > 0 and doc["train_config"]["steps"] == 4
    assert doc["sample_after"].startswith("The ") and doc["evals"][-1][0] == 4
    assert (tmp_path / "gpt_tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gpt_figures_to_a_json_file(tmp_path, capsys):
    r = demo.main(["--model", "gpt", "--size", "tiny", "--steps", "3", "--device", "cpu", "--lr", "0.002",
                   "--batch-size", "2", "--out", str(tmp_path / "gpt.json"), "--no-progress"])
    doc = json.loads((tmp_path / "gpt.json").read_text())
    assert r["plot"] is None and sorted(p.name for p in tmp_path.iterdir()) == ["gpt.json"]
    tc = doc["train_config"]
    assert (tc["lr"], tc["batch_size"]) == (0.002, 2) and tc["min_lr"] == pytest.approx(0.0002)   # min_lr follows lr
    assert "size tiny on cpu" in capsys.readouterr().out


def test_gpt_bad_arguments(monkeypatch):
    with pytest.raises(SystemExit): demo.parse_args(["--model", "gpt", "--size", "huge"])
    with pytest.raises(SystemExit, match="--model gpt"): demo.main(["--model", "cnn", "--size", "tiny", "--out", "/nonexistent"])
    with pytest.raises(SystemExit, match="digits"): demo.main(["--model", "gpt", "--distributed", "--out", "/nonexistent"])
    with pytest.raises(SystemExit, match="AdamW"): demo.main(["--model", "gpt", "--optimizer", "sgd", "--out", "/nonexistent"])
    monkeypatch.setenv("VKML_GPT_SIZE", "huge")
    with pytest.raises(vkml.VkmlError, match="VKML_GPT_SIZE"): demo_gpt.size_from_env()
