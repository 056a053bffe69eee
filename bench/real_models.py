"""Real models in vkML beside PyTorch, in one process: nanoGPT's character model, a CNN with BatchNorm, ResNet-20.

    python bench/real_models.py --out bench/results/real_models_h200.json     # every case, the real sizes
    python bench/real_models.py --small --out /tmp/real.json                   # tiny sizes: lavapipe + CPU torch, < 2 min

Each case builds the model once per mode, from one set of starting weights (drawn by numpy, loaded into both
libraries by name), and times training steps on the same batches: medians of wall-clock times after warm-up, each
step ending with the loss read on the host, as bench/vs_torch.py does. The modes:

  vkML      eager, jit (vkml.jit), amp (vkml.amp.autocast + GradScaler, eager), amp_jit (the same, under vkml.jit)
  PyTorch   eager, amp_bf16 (autocast to bfloat16), amp_f16 (autocast to float16 + GradScaler),
            graph and graph_f16 (the fp32 / float16-autocast step captured as a CUDA graph: static inputs, warm-up
            on a side stream, as torch.cuda.graphs' docs say; no GradScaler, whose step reads the host; CUDA only)

For each mode: ms per step, the first and last losses, the peak device memory (PyTorch: torch.cuda.max_memory_allocated;
vkML: vkml.memory_stats()["peak_bytes_in_use"], with the bytes in use when the mode starts and after it, since
every mode runs in this one process), and GPU time per step by kernel family (vkML: vkml.profile() over
eager steps, whose shaders are named by kind; PyTorch: torch.profiler's kernels, grouped by name; without CUDA, its
CPU ops). The ratios pair the modes: PyTorch's time ÷ vkML's (above 1: vkML is faster), eager with eager, vkML's jit
with PyTorch's CUDA graph, and each amp mode with PyTorch's float16 one. A mode or a case that fails records its error
in the JSON and the run goes on. Torch runs on 'cuda' when it is available, else on the CPU; vkML on 'vulkan'.

Cases:
  gpt       nanoGPT's shakespeare-char model: 6 layers, 6 heads, 384 wide, block 256, vocab 65, no biases, tied
            embedding, dropout 0; batch 32, AdamW lr 3e-4
  cnn_bn    the CNN of bench/vs_torch.py's cifar_bn (3 x conv-BatchNorm-ReLU-maxpool, 32/64/128), 3x32x32, batch 128, Adam
  resnet20  ResNet-20 for CIFAR (He et al.: 3 stages of 3 basic blocks, 16/32/64 channels, BatchNorm, the parameter-free
            shortcut), 3x32x32, batch 128, SGD momentum 0.9, lr 0.1, weight decay 5e-4
"""
import argparse, contextlib, datetime, gc, json, math, os, platform, re, statistics, subprocess, sys, time, traceback, warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import vkml
import vkml.nn as vnn
import vkml.nn.functional as vF
import vkml.optim as voptim

try:
    import torch
    TORCH_DEV = "cuda" if torch.cuda.is_available() else "cpu"
except Exception:
    torch, TORCH_DEV = None, None

DEV = "vulkan"
# (vkml.jit's capture looks at every live object for tensors: torch's deprecated module attributes warn when touched)
warnings.filterwarnings("ignore", category=FutureWarning, message=".*torch.distributed.reduce_op.*")
VK_MODES = ("eager", "jit", "amp", "amp_jit")
TH_MODES = ("eager", "amp_bf16", "amp_f16", "graph", "graph_f16")
PAIRS = {"eager": ("eager", "eager"), "jit_vs_graph": ("jit", "graph"), "amp": ("amp", "amp_f16"),
         "amp_jit_vs_graph_f16": ("amp_jit", "graph_f16")}    # ratio name -> (vkML mode, PyTorch mode)


# ------------------------------------------------------------------ the models, in either library
class Lib:
    "What the model code needs of one library: nn, functional, arange."
    def __init__(self, name):
        self.name = name
        if name == "vkml": self.nn, self.F, self.arange = vnn, vF, lambda n, device: vkml.arange(n, device=device)
        else: self.nn, self.F, self.arange = torch.nn, torch.nn.functional, lambda n, device: torch.arange(n, device=device)


def gpt_model(lib, n_layer, n_head, n_embd, block_size, vocab_size):
    "nanoGPT's GPT (model.py) with bias=False and dropout 0: the same class in either library."
    nn, F = lib.nn, lib.F
    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd, bias=False), nn.Linear(n_embd, n_embd, bias=False)
        def forward(self, x):
            B, T, C = x.shape
            qkv = self.c_attn(x)
            q, k, v = (qkv[:, :, i * C:(i + 1) * C].reshape(B, T, n_head, C // n_head).transpose(1, 2) for i in range(3))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(B, T, C))
    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.gelu = nn.Linear(n_embd, 4 * n_embd, bias=False), nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=False)
        def forward(self, x): return self.c_proj(self.gelu(self.c_fc(x)))
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(n_embd, bias=False), CausalSelfAttention()
            self.ln_2, self.mlp = nn.LayerNorm(n_embd, bias=False), MLP()
        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd, bias=False)
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.lm_head.weight = self.wte.weight                  # weight tying, as nanoGPT
        def forward(self, idx):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(lib.arange(T, idx.device))
            for b in self.h: x = b(x)
            return self.lm_head(self.ln_f(x))
    return GPT()


def cnn_layers(nn, widths):
    "bench/vs_torch.py's cifar_bn CNN."
    layers, c = [], 3
    for w in widths:
        layers += [nn.Conv2d(c, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2)]
        c = w
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(c * 4 * 4, 10))


def resnet_model(lib, blocks_per_stage=3, widths=(16, 32, 64)):
    "ResNet-6n+2 for CIFAR (He et al. 2016, section 4.2), with the parameter-free shortcut (option A)."
    nn, F = lib.nn, lib.F
    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
            self.pad = (cout - cin) // 2 if stride != 1 or cin != cout else None
        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            sc = x if self.pad is None else F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))
            return F.relu(out + sc)
    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0])
            blocks, c = [], widths[0]
            for i, w in enumerate(widths):
                for j in range(blocks_per_stage):
                    blocks.append(BasicBlock(c, w, 2 if i > 0 and j == 0 else 1)); c = w
            self.layers = nn.Sequential(*blocks)
            self.linear = nn.Linear(c, 10)
        def forward(self, x):
            out = self.layers(F.relu(self.bn1(self.conv1(x))))
            return self.linear(F.adaptive_avg_pool2d(out, 1).reshape(x.shape[0], -1))
    return ResNet()


def init_weights(model, seed=0) -> dict:
    "Starting weights for every parameter and buffer of `model` (either library), by name, drawn by numpy: {name: array}."
    rng, out, seen = np.random.default_rng(seed), {}, {}
    for name, t in model.state_dict(keep_vars=True).items():
        shape, leaf = tuple(t.shape), name.rsplit(".", 1)[-1]
        if id(t) in seen: out[name] = out[seen[id(t)]]; continue      # a tied weight (nanoGPT's lm_head): the same array
        seen[id(t)] = name
        if leaf == "num_batches_tracked": out[name] = np.zeros((), np.int64); continue
        if leaf == "running_var" or (leaf == "weight" and len(shape) == 1): a = np.ones(shape)            # norms
        elif leaf in ("running_mean", "bias"): a = np.zeros(shape)
        elif len(shape) == 4: a = rng.standard_normal(shape) * math.sqrt(2.0 / (shape[1] * shape[2] * shape[3]))  # Kaiming
        else: a = rng.standard_normal(shape) * (0.02 / math.sqrt(2 * 6) if name.endswith("c_proj.weight") else 0.02)  # GPT's
        out[name] = a.astype(np.float32)
    return out


def count_params(model) -> int:
    return sum(int(np.prod(tuple(p.shape))) for p in model.parameters())


# ------------------------------------------------------------------ the cases
def case_specs(small: bool) -> dict:
    "name -> what, a model builder (a Lib -> model), the input batches' maker, the loss, the optimiser (name, kwargs)."
    g = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=65, batch=2) if small else \
        dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=65, batch=32)
    img_batch, widths = (2, (8, 16, 32)) if small else (128, (32, 64, 128))
    def tokens(k, seed=0):
        rng = np.random.default_rng(seed)
        return [(rng.integers(0, g["vocab_size"], (g["batch"], g["block_size"])), rng.integers(0, g["vocab_size"], (g["batch"], g["block_size"])))
                for _ in range(k)]
    def images(k, seed=0):
        rng = np.random.default_rng(seed)
        return [(rng.standard_normal((img_batch, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, img_batch)) for _ in range(k)]
    gpt_kw = {k: v for k, v in g.items() if k != "batch"}
    return {
        "gpt": dict(what=f"nanoGPT char model: {g['n_layer']} layers, {g['n_head']} heads, {g['n_embd']} wide, block {g['block_size']}, "
                         f"batch {g['batch']}, vocab {g['vocab_size']}, AdamW lr 3e-4",
                    build=lambda lib: gpt_model(lib, **gpt_kw), data=tokens, loss="lm", opt=("AdamW", dict(lr=3e-4))),
        "cnn_bn": dict(what=f"CNN with BatchNorm ({'/'.join(map(str, widths))}) on 3x32x32, batch {img_batch}, Adam lr 1e-3",
                       build=lambda lib: cnn_layers(lib.nn, widths), data=images, loss="ce",
                       opt=("Adam", dict(lr=1e-3))),
        "resnet20": dict(what=f"ResNet-{6 * (1 if small else 3) + 2} for CIFAR (16/32/64, BatchNorm) on 3x32x32, batch {img_batch}, "
                              f"SGD momentum 0.9, lr 0.1, wd 5e-4",
                         build=lambda lib: resnet_model(lib, 1 if small else 3), data=images, loss="ce",
                         opt=("SGD", dict(lr=0.1, momentum=0.9, weight_decay=5e-4))),
    }


# ------------------------------------------------------------------ vkML's side
VK_FAMILIES = [("matmul", r"^matmul"), ("conv", r"^(conv|im2col|col2im|wgrad)"), ("pool", r"pool"),
               ("reduce", r"^(reduce|argreduce|cumsum)"), ("fused elementwise", r"^gen"),
               ("indexing", r"^(gather|scatter|index_add|check_index)"), ("copy", r"^(copy|fill)"), ("other", r".")]
# (vkML's shaders by file: bench names each dispatch by its shader, the generated fused kernels `gen_<hash>`)


def family(name: str, table) -> str:
    return next(f for f, rx in table if re.search(rx, name, re.I))


def vk_setup(spec, weights, mode):
    "A vkML model loaded with `weights`, its optimiser, and a function running one step on numpy (x, y), returning the loss."
    model = spec["build"](Lib("vkml")).to(DEV)
    model.load_state_dict(weights)
    name, kw = spec["opt"]
    opt = getattr(voptim, name)(model.parameters(), **kw)
    amp = mode in ("amp", "amp_jit")
    scaler = vkml.amp.GradScaler(DEV, enabled=amp)
    def step(x, y):
        opt.zero_grad()
        with vkml.amp.autocast(DEV, enabled=amp):
            out = model(x)
            loss = vF.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    f = vkml.jit(step) if mode in ("jit", "amp_jit") else step
    def run(batch):
        x, y = batch
        return f(vkml.tensor(x, device=DEV), vkml.tensor(y, device=DEV)).item()
    run.scaler = scaler    # (bench/repeatable.py reads its scale after each step)
    return model, run


def vk_mode(spec, weights, data, mode, steps, warm, profile_steps):
    gc.collect()
    start = vkml.memory_stats()["bytes_in_use"]    # (what earlier modes left in use counts in this one's peak)
    model, run = vk_setup(spec, weights, mode)
    losses = [run(data[i % len(data)]) for i in range(warm)]
    vkml.reset_peak_memory_stats()
    times = []
    for i in range(steps):
        t0 = time.perf_counter(); losses.append(run(data[(warm + i) % len(data)])); times.append(time.perf_counter() - t0)
    r = dict(ms=statistics.median(times) * 1e3, loss_first=losses[0], loss_last=losses[-1],
             peak_bytes=vkml.memory_stats()["peak_bytes_in_use"], in_use_at_start=start)
    if profile_steps and mode in ("eager", "amp"):     # (a replayed step is one recording: its dispatches are not timed one by one)
        with vkml.profile() as p:
            for i in range(profile_steps): run(data[i % len(data)])
        fams = {}
        for name, e in p.items(): fams[family(name, VK_FAMILIES)] = fams.get(family(name, VK_FAMILIES), 0.0) + e["total_us"] / profile_steps
        r["gpu_us_per_step"] = {k: round(v, 1) for k, v in sorted(fams.items(), key=lambda kv: -kv[1])}
        r["dispatches_per_step"] = sum(e["count"] for e in p.values()) / profile_steps
    del model, run; gc.collect()
    r["in_use_after"] = vkml.memory_stats()["bytes_in_use"]   # (more than at the start: the mode left memory behind)
    return r


# ------------------------------------------------------------------ PyTorch's side
TH_FAMILIES = [("matmul", r"gemm|cutlass|xmma|cublas|matmul|mm_|_mm|addmm|bmm|sm\d+_|ampere|hopper|linear"),
               ("conv", r"conv|cudnn|implicit|winograd|wgrad|dgrad|im2col|col2im"),
               ("attention", r"flash|fmha|attention|efficient"),
               ("norm", r"norm|bn_|batch_norm|layer_norm"), ("softmax", r"softmax"), ("reduce", r"reduce|sum|mean"),
               ("optimizer", r"adam|sgd|multi_tensor|foreach|fused"), ("copy", r"memcpy|memset|copy|cat|fill"),
               ("elementwise", r"elementwise|vectorized|unrolled|gelu|relu|add|mul|where"), ("other", r".")]


def th_setup(spec, weights, mode):
    "A PyTorch model loaded with `weights` on TORCH_DEV, and a function running one step on numpy (x, y), returning the loss."
    dev = TORCH_DEV
    model = spec["build"](Lib("torch")).to(dev)
    model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})
    name, kw = spec["opt"]
    graph = mode.startswith("graph")
    if graph and dev != "cuda": raise RuntimeError("CUDA graphs need CUDA (torch runs on the CPU here)")
    if graph and name in ("Adam", "AdamW"): kw = dict(kw, capturable=True)
    opt = getattr(torch.optim, name)(model.parameters(), **kw)
    dtype = {"amp_bf16": torch.bfloat16, "amp_f16": torch.float16, "graph_f16": torch.float16}.get(mode)
    scaler = torch.amp.GradScaler(dev, enabled=mode == "amp_f16")
    def loss_of(x, y):
        ctx = torch.autocast(dev, dtype=dtype, cache_enabled=False if graph else None) if dtype else contextlib.nullcontext()
        with ctx:
            out = model(x)
            return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
    def eager_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_of(x, y)
        scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
        return loss
    if not graph:
        def run(batch):
            x, y = (torch.from_numpy(np.asarray(a)).to(dev) for a in batch)
            return eager_step(x, y).item()
        run.scaler = scaler
        return model, run
    return model, _graph_runner(model, opt, loss_of)


def _graph_runner(model, opt, loss_of):
    "The whole step captured as a CUDA graph (torch.cuda.graphs: warm up on a side stream, then capture; static inputs)."
    static = {}
    def capture(batch):
        static["x"], static["y"] = (torch.from_numpy(np.asarray(a)).cuda() for a in batch)
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                loss_of(static["x"], static["y"]).backward(); opt.step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            static["loss"] = loss_of(static["x"], static["y"])
            static["loss"].backward(); opt.step()
        static["graph"] = g
    def run(batch):
        if "graph" not in static: capture(batch)
        static["x"].copy_(torch.from_numpy(np.asarray(batch[0]))); static["y"].copy_(torch.from_numpy(np.asarray(batch[1])))
        static["graph"].replay()
        return static["loss"].item()
    return run


def th_mode(spec, weights, data, mode, steps, warm, profile_steps):
    cuda = TORCH_DEV == "cuda"
    model, run = th_setup(spec, weights, mode)
    losses = [run(data[i % len(data)]) for i in range(warm)]
    if cuda: torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(steps):
        t0 = time.perf_counter(); losses.append(run(data[(warm + i) % len(data)])); times.append(time.perf_counter() - t0)
    r = dict(ms=statistics.median(times) * 1e3, loss_first=losses[0], loss_last=losses[-1],
             peak_bytes=torch.cuda.max_memory_allocated() if cuda else None)
    if profile_steps:
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
        with torch.profiler.profile(activities=acts) as prof:
            for i in range(profile_steps): run(data[i % len(data)])
        fams, n = {}, 0
        for e in prof.key_averages():
            on_gpu = str(getattr(e, "device_type", "")).endswith("CUDA")
            t = getattr(e, "self_device_time_total", None) if cuda else e.self_cpu_time_total
            if t is None: t = getattr(e, "self_cuda_time_total", 0)
            if (cuda and not on_gpu) or not t: continue
            fams[family(e.key, TH_FAMILIES)] = fams.get(family(e.key, TH_FAMILIES), 0.0) + t / profile_steps
            n += e.count
        r["gpu_us_per_step" if cuda else "cpu_us_per_step"] = {k: round(v, 1) for k, v in sorted(fams.items(), key=lambda kv: -kv[1])}
        r["kernels_per_step" if cuda else "ops_per_step"] = n / profile_steps
    del model, run; gc.collect()
    if cuda: torch.cuda.empty_cache()
    return r


# ------------------------------------------------------------------ a case, both libraries
def run_case(name, spec, steps, warm, profile_steps, vk_modes=VK_MODES, th_modes=TH_MODES, log=print):
    "One case's row: both libraries' modes (each failure recorded, not raised) and the paired ratios."
    data = spec["data"](4)
    row = dict(case=name, what=spec["what"], vkml={}, torch={})
    weights = init_weights(spec["build"](Lib("vkml")))
    row["params"] = count_params(spec["build"](Lib("vkml")))
    for lib, modes, fn in (("vkml", vk_modes, vk_mode), ("torch", th_modes if torch is not None else (), th_mode)):
        for mode in modes:
            t0 = time.perf_counter()
            try: r = fn(spec, weights, data, mode, steps, warm, profile_steps)
            except Exception as e:
                r = dict(error=f"{type(e).__name__}: {e}", where=traceback.format_exc(limit=-3).strip().splitlines()[-3:])
            r["seconds"] = round(time.perf_counter() - t0, 1)
            row[lib][mode] = r
            gc.collect()
            log(f"  {name} {lib} {mode}: " + (f"{r['ms']:.2f} ms/step, loss {r['loss_first']:.4f} -> {r['loss_last']:.4f}"
                                               if "ms" in r else r["error"]))
    row["ratios"] = {k: row["torch"][t]["ms"] / row["vkml"][v]["ms"] for k, (v, t) in PAIRS.items()
                     if "ms" in row["vkml"].get(v, {}) and "ms" in row["torch"].get(t, {})}
    for prof, replay in (("eager", "jit"), ("amp", "amp_jit")):
        p, w = row["vkml"].get(prof, {}), row["vkml"].get(replay, {})
        if "gpu_us_per_step" in p and "ms" in w:
            p["profile_trusted"] = profile_trusted(sum(p["gpu_us_per_step"].values()), w["ms"] * 1e3)
    return row


def profile_trusted(gpu_us: float, replay_us: float) -> bool:
    """A second measure of a step's profile: the same step replayed (jit) takes about its GPU time in wall time, and
    GPU time cannot pass it by much (some hosts' timestamps counted every shader 4-5x long)."""
    return gpu_us <= 1.25 * replay_us


def provenance(argv):
    "bench/vs_torch.py's provenance (date, device, driver, commit, host, torch), with torch's device and this command."
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import vs_torch
    p = vs_torch.provenance(argv)
    p["torch"] = torch.__version__ if torch is not None else None
    tdev = (torch.cuda.get_device_name() if TORCH_DEV == "cuda" else "cpu") if torch is not None else None
    return dict(p, torch_device=tdev, command=" ".join(["python", "bench/real_models.py"] + argv))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--small", action="store_true", help="tiny sizes and few steps (lavapipe and CPU torch, under 2 minutes)")
    ap.add_argument("--cases", nargs="+", default=None, choices=["gpt", "cnn_bn", "resnet20"])
    ap.add_argument("--steps", type=int, default=None, help="timed steps per mode (default 30; 2 with --small)")
    ap.add_argument("--warm", type=int, default=None, help="warm-up steps per mode (default 5; 3 with --small: jit captures on the 2nd)")
    ap.add_argument("--profile-steps", type=int, default=None, help="steps profiled per mode (default 2; 1 with --small; 0: none)")
    ap.add_argument("--vk-modes", nargs="+", default=list(VK_MODES), choices=VK_MODES)
    ap.add_argument("--torch-modes", nargs="+", default=list(TH_MODES), choices=TH_MODES)
    a = ap.parse_args(argv)
    steps = a.steps if a.steps is not None else (2 if a.small else 30)
    warm = a.warm if a.warm is not None else (3 if a.small else 5)
    prof = a.profile_steps if a.profile_steps is not None else (1 if a.small else 2)
    specs = case_specs(a.small)
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"vkML on {DEV}, PyTorch on {TORCH_DEV}; {steps} timed steps after {warm} warm-up steps", flush=True)
    for name in a.cases or list(specs):
        t0 = time.perf_counter()
        try: r = run_case(name, specs[name], steps, warm, prof, a.vk_modes, a.torch_modes, log=lambda s: print(s, flush=True))
        except Exception as e: r = dict(case=name, error=f"{type(e).__name__}: {e}")
        r["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(r)
        out.write_text(json.dumps(dict(provenance=provenance(argv), small=a.small, steps=steps, warm=warm, results=rows,
                                       subset=bool(a.cases) and set(a.cases) != set(specs),
                                       peak_of_all_pools=True), indent=1))   # (see render_real_models: older files' peaks)
    print(f"\n{'case':<10}{'ratio':<22}{'vkML ms':>10}{'PyTorch ms':>12}{'ratio':>8}")
    for r in rows:
        if "error" in r: print(f"{r['case']:<10} ERROR {r['error']}"); continue
        for k, (v, t) in PAIRS.items():
            vm, tm = r["vkml"].get(v, {}).get("ms"), r["torch"].get(t, {}).get("ms")
            f = lambda x: "-" if x is None else f"{x:.2f}"
            print(f"{r['case']:<10}{k:<22}{f(vm):>10}{f(tm):>12}{f(r['ratios'].get(k)):>8}")
    return rows


if __name__ == "__main__":
    main()
