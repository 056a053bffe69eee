"""vkml.nn's recurrent layers and cells (RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell; nbs/30f_nn_rnn.ipynb): against a
numpy reference of the equations written here apart from vkML's code (per-gate slices of PyTorch's stacked weights,
loops over layers, directions and time), on the CPU and on Vulkan; Vulkan's outputs and gradients against the CPU's;
gradients by gradcheck (float64, CPU); PyTorch's parameter names, shapes and initialisation; the options (layers,
directions, batch_first, unbatched input, initial states, bias=False, relu, dropout between layers); the typed errors;
a jitted training step of an LSTM model against the eager one; and PyTorch's own results, recorded in
tests/fixtures/torch_rnn.npz by tests/fixtures/make_torch_rnn.py (the fixture tests FAIL while it is missing)."""
import functools, importlib.util, json, math
from pathlib import Path
import numpy as np
import pytest

import vkml
import vkml.nn as nn
import oracle

HERE = Path(__file__).resolve().parent
DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]


def load_cases():
    "The cases of tests/fixtures/make_torch_rnn.py (importing it needs numpy alone): the same modules here and in torch."
    spec = importlib.util.spec_from_file_location("make_torch_rnn", HERE / "fixtures" / "make_torch_rnn.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MAKE = load_cases()
CASES = MAKE.CASES


# --- the reference: the equations in float64 numpy, apart from vkML's code --------------------------------------

def sigmoid(v): return 1.0 / (1.0 + np.exp(-v))


def ref_step(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    "One step of `mode` ('RNN_TANH', 'RNN_RELU', 'LSTM', 'GRU') from (h, c): (h', c'). Gate k is rows k·H..(k+1)·H."
    H = w_hh.shape[1]
    def pre(k, with_hidden=True):
        "W_i x + b_i (+ W_h h + b_h) of gate k."
        rows = slice(k * H, (k + 1) * H)
        a = x @ w_ih[rows].T + (0.0 if b_ih is None else b_ih[rows])
        return a + hid(k) if with_hidden else a
    def hid(k):
        rows = slice(k * H, (k + 1) * H)
        return h @ w_hh[rows].T + (0.0 if b_hh is None else b_hh[rows])
    if mode == "RNN_TANH": return np.tanh(pre(0)), c
    if mode == "RNN_RELU": return np.maximum(pre(0), 0.0), c
    if mode == "LSTM":
        i, f, g, o = sigmoid(pre(0)), sigmoid(pre(1)), np.tanh(pre(2)), sigmoid(pre(3))
        c_new = f * c + i * g
        return o * np.tanh(c_new), c_new
    r, z = sigmoid(pre(0)), sigmoid(pre(1))
    n = np.tanh(pre(2, with_hidden=False) + r * hid(2))
    return (1.0 - z) * n + z * h, c


def mode_of(module, kwargs):
    if module in ("LSTM", "LSTMCell"): return "LSTM"
    if module in ("GRU", "GRUCell"): return "GRU"
    return "RNN_RELU" if kwargs.get("nonlinearity") == "relu" else "RNN_TANH"


def ref_layers(mode, sd, x, h0=None, c0=None, num_layers=1, bidirectional=False, batch_first=False, **_):
    "PyTorch's RNN/LSTM/GRU forward: [output, h_n] (+ [c_n] for an LSTM), in float64, from the state dict `sd`."
    unbatched = x.ndim == 2
    x = x[:, None] if unbatched else x.transpose(1, 0, 2) if batch_first else x
    T, N = x.shape[:2]
    D, H = (2 if bidirectional else 1), sd["weight_hh_l0"].shape[1]
    if h0 is None: h0 = np.zeros((num_layers * D, N, H))
    elif unbatched: h0 = h0[:, None]
    if c0 is None: c0 = np.zeros((num_layers * D, N, H))
    elif unbatched: c0 = c0[:, None]
    seq, h_n, c_n = x.astype(np.float64), [], []
    for layer in range(num_layers):
        halves = []
        for d in range(D):
            s = f"_l{layer}" + ("_reverse" if d else "")
            p = [sd.get(n + s) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            h, c = h0[layer * D + d], c0[layer * D + d]
            out = np.zeros((T, N, H))
            for t in (range(T - 1, -1, -1) if d else range(T)):
                h, c = ref_step(mode, seq[t], h, c, *p)
                out[t] = h
            halves.append(out); h_n.append(h); c_n.append(c)
        seq = np.concatenate(halves, -1)
    out, h_n, c_n = seq, np.stack(h_n), np.stack(c_n)
    if unbatched: out, h_n, c_n = out[:, 0], h_n[:, 0], c_n[:, 0]
    elif batch_first: out = out.transpose(1, 0, 2)
    return [out, h_n, c_n] if mode == "LSTM" else [out, h_n]


def reference(spec, sd, inputs):
    "The reference's outputs for a case of CASES, flattened as make_torch_rnn.call flattens the module's."
    mode = mode_of(spec["module"], spec["kwargs"])
    sd = {k: np.asarray(v, np.float64) for k, v in sd.items()}
    x = np.asarray(inputs["input"], np.float64)
    if MAKE.is_cell(spec):
        one = x.ndim == 1
        xb = x[None] if one else x
        zero = np.zeros((xb.shape[0], spec["kwargs"]["hidden_size"]))
        h = zero if "h0" not in inputs else (inputs["h0"][None] if one else inputs["h0"])
        c = zero if "c0" not in inputs else (inputs["c0"][None] if one else inputs["c0"])
        h1, c1 = ref_step(mode, xb, h, c, sd["weight_ih"], sd["weight_hh"], sd.get("bias_ih"), sd.get("bias_hh"))
        outs = [h1, c1] if mode == "LSTM" else [h1]
        return [o[0] for o in outs] if one else outs
    return ref_layers(mode, sd, x, inputs.get("h0"), inputs.get("c0"), **spec["kwargs"])


def terms_k(spec) -> int:
    "How many terms feed one output through the recurrence: steps · layers · (inputs + directions·hidden + bias)."
    kw = spec["kwargs"]
    steps = 1 if MAKE.is_cell(spec) else spec["input"][-2]
    D = 2 if kw.get("bidirectional") else 1
    return steps * kw.get("num_layers", 1) * (max(kw["input_size"], D * kw["hidden_size"]) + kw["hidden_size"] + 1)


def close(got, want, k, what="", table=oracle.REFERENCE):
    """float32 against a reference: `table`'s bound (the float64 reference's, or the CPU's for parity) with rtol
    scaled by √k and taken relative to the tensor's largest value (a recurrence mixes every element into every other)."""
    rtol, atol = table["float32"]
    want = np.asarray(want, np.float64)
    scale = float(np.abs(want).max()) if want.size else 0.0
    oracle.assert_close(np.asarray(got), want, bound=atol + rtol * math.sqrt(k) * scale, what=what, same_dtype=False)


# --- running a case on vkML ------------------------------------------------------------------------------------

def build(spec, device="cpu", seed=0):
    vkml.manual_seed(seed)
    m = getattr(nn, spec["module"])(**spec["kwargs"], device=device)
    return m.train(spec.get("train", True))


def random_inputs(spec, seed=1) -> dict:
    rng = np.random.default_rng(seed)
    shapes = {"input": tuple(spec["input"]), "h0": MAKE.state_shape(spec), "c0": MAKE.state_shape(spec)}
    return {k: rng.standard_normal(shapes[k]) for k in MAKE.input_names(spec)}


def run(m, spec, inputs: dict, device, upstream=None):
    """Call `m` on `inputs` (float32 on `device`, requiring grad); backward from Σ⟨output, upstream⟩ (random when not
    given): ({output name: value}, {input or parameter name: gradient}, the upstream tensors used)."""
    ts = {k: vkml.tensor(np.asarray(a, np.float32), device=device, requires_grad=True) for k, a in inputs.items()}
    outs = MAKE.call(m, spec, ts)
    names = MAKE.output_names(spec)
    if upstream is None:
        rng = np.random.default_rng(7)
        upstream = [rng.standard_normal(o.shape) for o in outs]
    loss = None
    for o, w in zip(outs, upstream):
        term = (o * vkml.tensor(np.asarray(w, np.float32), device=device)).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    grads = {k: t.grad for k, t in ts.items()} | {k: p.grad for k, p in m.named_parameters()}
    vkml.realize(*outs, *grads.values())
    return dict(zip(names, (o.numpy() for o in outs))), {k: g.numpy() for k, g in grads.items()}, upstream


def state_dict_np(m) -> dict:
    return {k: v.numpy() for k, v in m.state_dict().items()}


# --- forward against the reference, on each device -------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_forward_matches_the_reference(case, device):
    spec = CASES[case]
    m = build(spec, device)
    inputs = random_inputs(spec)
    outs, _, _ = run(m, spec, inputs, device)
    want = reference(spec, state_dict_np(m), inputs)
    assert list(outs) == MAKE.output_names(spec) and len(want) == len(outs)
    for (name, got), w in zip(outs.items(), want):
        assert got.shape == w.shape, (name, got.shape, w.shape)
        close(got, w, terms_k(spec), what=f"{case}: {name}")


@pytest.mark.vulkan
@pytest.mark.parametrize("case", list(CASES))
def test_vulkan_equals_the_cpu(case):
    "Outputs and every gradient (input, initial states, parameters), the same module and upstream gradient on both."
    spec = CASES[case]
    inputs = random_inputs(spec)
    m_cpu = build(spec, "cpu")
    m_vk = build(spec, "vulkan")
    for a, b in zip(m_cpu.parameters(), m_vk.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())      # one seed, one model, on every device
    outs_c, grads_c, up = run(m_cpu, spec, inputs, "cpu")
    outs_v, grads_v, _ = run(m_vk, spec, inputs, "vulkan", up)
    k = terms_k(spec)
    for name in outs_c: close(outs_v[name], outs_c[name], k, f"{case}: {name}", oracle.PARITY)
    assert grads_c.keys() == grads_v.keys()
    for name in grads_c: close(grads_v[name], grads_c[name], k, f"{case}: grad {name}", oracle.PARITY)


# --- gradients ---------------------------------------------------------------------------------------------------

GRAD_CASES = {   # small: gradcheck differentiates every element of every input and parameter
    "rnn_tanh_h0": dict(module="RNN", kwargs=dict(input_size=2, hidden_size=3), input=[3, 2, 2], hx=True),
    "rnn_relu_2layers_bidirectional_nobias": dict(module="RNN", kwargs=dict(input_size=2, hidden_size=2, num_layers=2,
                                                  nonlinearity="relu", bias=False, bidirectional=True), input=[3, 2, 2], hx=True),
    "lstm_2layers_batch_first_h0_c0": dict(module="LSTM", kwargs=dict(input_size=2, hidden_size=2, num_layers=2,
                                           batch_first=True), input=[2, 3, 2], hx=True),
    "lstm_bidirectional_unbatched": dict(module="LSTM", kwargs=dict(input_size=2, hidden_size=2, bidirectional=True),
                                         input=[3, 2], hx=False),
    "gru_bidirectional_batch_first_h0": dict(module="GRU", kwargs=dict(input_size=2, hidden_size=2, bidirectional=True,
                                             batch_first=True), input=[2, 3, 2], hx=True),
    "gru_2layers_nobias_unbatched_h0": dict(module="GRU", kwargs=dict(input_size=2, hidden_size=2, num_layers=2, bias=False),
                                            input=[3, 2], hx=True),
    "rnncell_tanh_hx": dict(module="RNNCell", kwargs=dict(input_size=3, hidden_size=2), input=[2, 3], hx=True),
    "rnncell_relu": dict(module="RNNCell", kwargs=dict(input_size=3, hidden_size=2, nonlinearity="relu"), input=[2, 3], hx=False),
    "lstmcell_hx": dict(module="LSTMCell", kwargs=dict(input_size=3, hidden_size=2), input=[2, 3], hx=True),
    "lstmcell_unbatched": dict(module="LSTMCell", kwargs=dict(input_size=3, hidden_size=2), input=[3], hx=False),
    "grucell_hx": dict(module="GRUCell", kwargs=dict(input_size=3, hidden_size=2), input=[2, 3], hx=True),
    "grucell_nobias_unbatched_hx": dict(module="GRUCell", kwargs=dict(input_size=3, hidden_size=2, bias=False), input=[3], hx=True),
}


def gradcheck_module(m, spec, inputs: dict) -> bool:
    "vkml.gradcheck over the inputs and every parameter: the parameters are swapped for gradcheck's tensors in the call."
    in_names, p_names = list(inputs), [n for n, p in m._parameters.items() if p is not None]   # (a cell's None biases)
    saved = dict(m._parameters)
    def fn(*ts):
        m._parameters.update(zip(p_names, ts[len(in_names):]))
        return MAKE.call(m, spec, dict(zip(in_names, ts[:len(in_names)])))
    try: return vkml.gradcheck(fn, [*inputs.values(), *(saved[n].numpy().astype(np.float64) for n in p_names)])
    finally: m._parameters.update(saved)


@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_gradcheck(case):
    spec = GRAD_CASES[case]
    assert gradcheck_module(build(spec, seed=3), spec, random_inputs(spec, seed=4))


def test_gradients_match_the_reference_by_differences():
    "The gradient of a 2-layer bidirectional LSTM's loss against central differences of the numpy reference."
    spec = CASES["lstm_2layers_bidirectional_h0_c0"]
    m = build(spec)
    inputs = random_inputs(spec)
    _, grads, up = run(m, spec, inputs, "cpu")
    sd = state_dict_np(m)
    def loss(sd_, inputs_): return sum(float((o * w).sum()) for o, w in zip(reference(spec, sd_, inputs_), up))
    rng = np.random.default_rng(2)
    for name in ["input", "h0", "c0", "weight_hh_l0_reverse", "bias_ih_l1", "weight_ih_l1"]:
        where = sd if name in sd else inputs
        for _ in range(4):
            idx = tuple(int(rng.integers(s)) for s in where[name].shape)
            hi = {k: np.array(v, np.float64) for k, v in where.items()}; hi[name][idx] += 1e-6
            lo = {k: np.array(v, np.float64) for k, v in where.items()}; lo[name][idx] -= 1e-6
            num = (loss(hi, inputs) - loss(lo, inputs)) / 2e-6 if where is sd else (loss(sd, hi) - loss(sd, lo)) / 2e-6
            assert abs(grads[name][idx] - num) <= 1e-4 + 1e-3 * abs(num), (name, idx, grads[name][idx], num)


# --- parameters: PyTorch's names, shapes, order and draw -----------------------------------------------------------

def test_state_dict_names_and_shapes_are_pytorchs():
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    want = []
    for layer, n_in in ((0, 3), (1, 8)):
        for s in (f"_l{layer}", f"_l{layer}_reverse"):
            want += [(f"weight_ih{s}", (16, n_in)), (f"weight_hh{s}", (16, 4)), (f"bias_ih{s}", (16,)), (f"bias_hh{s}", (16,))]
    assert [(k, v.shape) for k, v in lstm.state_dict().items()] == want
    assert lstm._flat_weights_names == [k for k, _ in want]
    assert [(k, v.shape) for k, v in nn.GRU(3, 4, bias=False).state_dict().items()] == [("weight_ih_l0", (12, 3)), ("weight_hh_l0", (12, 4))]
    assert [(k, v.shape) for k, v in nn.RNN(3, 4, num_layers=2).state_dict().items()] == [
        ("weight_ih_l0", (4, 3)), ("weight_hh_l0", (4, 4)), ("bias_ih_l0", (4,)), ("bias_hh_l0", (4,)),
        ("weight_ih_l1", (4, 4)), ("weight_hh_l1", (4, 4)), ("bias_ih_l1", (4,)), ("bias_hh_l1", (4,))]
    for cls, gates in ((nn.RNNCell, 1), (nn.LSTMCell, 4), (nn.GRUCell, 3)):
        assert [(k, v.shape) for k, v in cls(3, 4).state_dict().items()] == [
            ("weight_ih", (4 * gates, 3)), ("weight_hh", (4 * gates, 4)), ("bias_ih", (4 * gates,)), ("bias_hh", (4 * gates,))]
        c = cls(3, 4, bias=False)
        assert c.bias_ih is None and c.bias_hh is None and list(c.state_dict()) == ["weight_ih", "weight_hh"]
    assert [[p.shape for p in ws] for ws in nn.GRU(3, 4, bidirectional=True).all_weights] == [[(12, 3), (12, 4), (12,), (12,)]] * 2


def test_a_state_dict_loads_by_name_and_a_wrong_one_is_refused():
    a, b = nn.GRU(3, 4, num_layers=2), nn.GRU(3, 4, num_layers=2)
    b.load_state_dict(a.state_dict())
    x = vkml.randn(5, 2, 3)
    np.testing.assert_array_equal(a(x)[0].numpy(), b(x)[0].numpy())
    with pytest.raises(vkml.VkmlError, match="size mismatch"):
        nn.LSTM(3, 4, num_layers=2).load_state_dict(a.state_dict())      # a GRU's 12 rows where an LSTM has 16
    with pytest.raises(vkml.VkmlError, match="Missing key"):
        nn.GRU(3, 4, num_layers=2, bidirectional=True).load_state_dict(a.state_dict())


def test_default_init_is_pytorchs():
    "Every parameter from U(±1/√hidden_size); the same seed draws the same model, on every device."
    vkml.manual_seed(5)
    m = nn.LSTM(10, 64, num_layers=2)
    bound = 1 / math.sqrt(64)
    for name, p in m.named_parameters():
        a = p.numpy()
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.9 * bound, name
    w = m.weight_hh_l1.numpy().ravel()
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound and abs(w.mean()) < 0.05 * bound
    vkml.manual_seed(5)
    np.testing.assert_array_equal(nn.LSTM(10, 64, num_layers=2).weight_hh_l1.numpy(), m.weight_hh_l1.numpy())
    before = {k: v.numpy() for k, v in m.state_dict().items()}
    params = list(m.parameters())
    m.reset_parameters()
    assert all(a is b for a, b in zip(m.parameters(), params)) and all(p.requires_grad for p in params)   # in place
    assert not np.array_equal(m.weight_ih_l0.numpy(), before["weight_ih_l0"])
    assert np.abs(m.weight_ih_l0.numpy()).max() <= bound


# --- options ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("layers,bidirectional,batch_first,unbatched", [
    (1, False, False, False), (2, False, True, False), (1, True, False, True), (3, True, True, False), (2, True, True, True)])
def test_shapes(kind, layers, bidirectional, batch_first, unbatched):
    T, N, I, H = 4, 3, 2, 5
    D = 2 if bidirectional else 1
    m = getattr(nn, kind)(I, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    shape = (T, I) if unbatched else (N, T, I) if batch_first else (T, N, I)
    state = (D * layers, H) if unbatched else (D * layers, N, H)
    hx = (vkml.zeros(*state), vkml.zeros(*state)) if kind == "LSTM" else vkml.zeros(*state)
    for args in ((), (hx,)):
        out, h = m(vkml.randn(*shape), *args)
        assert out.shape == (shape[:-1] + (D * H,))
        for s in (h if kind == "LSTM" else (h,)): assert s.shape == state


def test_initial_states_are_used_and_the_default_is_zeros():
    spec = CASES["gru_2layers_bidirectional_batch_first_h0"]
    m = build(spec)
    inputs = random_inputs(spec)
    x = vkml.tensor(inputs["input"].astype(np.float32))
    zeros = vkml.zeros(*MAKE.state_shape(spec))
    np.testing.assert_array_equal(m(x)[0].numpy(), m(x, zeros)[0].numpy())
    assert not np.allclose(m(x)[0].numpy(), m(x, vkml.tensor(inputs["h0"].astype(np.float32)))[0].numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_acts_between_layers_in_training_only(device):
    vkml.manual_seed(0)
    m = nn.LSTM(3, 6, num_layers=3, dropout=0.5, device=device)
    x = vkml.tensor(np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32), device=device)
    want = ref_layers("LSTM", state_dict_np(m), x.numpy(), num_layers=3)
    m.eval()
    close(m(x)[0].numpy(), want[0], 5 * 3 * 7, "eval: no dropout")
    m.train()
    a, b = m(x)[0].numpy(), m(x)[0].numpy()
    assert not np.allclose(a, want[0]) and not np.allclose(a, b)     # dropped, with new masks each call
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        one = nn.GRU(3, 4, dropout=0.9, device=device)
    np.testing.assert_array_equal(one(x)[0].numpy(), one.eval()(x)[0].numpy())   # nothing after the last layer


def test_a_layer_over_one_step_is_its_cell():
    for kind in ("RNN", "LSTM", "GRU"):
        layer, cell = getattr(nn, kind)(3, 4), getattr(nn, kind + "Cell")(3, 4)
        cell.load_state_dict({k.removesuffix("_l0"): v for k, v in layer.state_dict().items()})
        x, h = vkml.randn(1, 2, 3), vkml.randn(1, 2, 4)
        hx = (h, vkml.randn(1, 2, 4)) if kind == "LSTM" else h
        out, _ = layer(x, hx)
        got = cell(x[0], (hx[0][0], hx[1][0]) if kind == "LSTM" else h[0])
        got = got[0] if kind == "LSTM" else got
        oracle.assert_close(out.numpy()[0], got.numpy(), k=8)


def test_repr_is_pytorchs():
    assert repr(nn.LSTM(3, 4)) == "LSTM(3, 4)"
    assert repr(nn.GRU(3, 4, num_layers=2, bias=False, batch_first=True, dropout=0.1, bidirectional=True)) == \
        "GRU(3, 4, num_layers=2, bias=False, batch_first=True, dropout=0.1, bidirectional=True)"
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == "RNNCell(3, 4, nonlinearity=relu)"
    assert repr(nn.GRUCell(3, 4, bias=False)) == "GRUCell(3, 4, bias=False)"


# --- typed errors -------------------------------------------------------------------------------------------------

class FakePacked:
    "What a PackedSequence looks like from outside (data and batch_sizes)."
    data, batch_sizes = None, None


@pytest.mark.parametrize("call,exc,text", [
    (lambda: nn.LSTM(3, 4, proj_size=2), vkml.ArgumentError, "proj_size"),
    (lambda: nn.LSTM(3, 4)(FakePacked()), vkml.ArgumentError, "PackedSequence"),
    (lambda: nn.GRU(3, 4)(FakePacked()), vkml.ArgumentError, "pad the sequences"),
    (lambda: nn.RNN(3, 4, nonlinearity="gelu"), vkml.ArgumentError, "'tanh' or 'relu'"),
    (lambda: nn.RNNCell(3, 4, nonlinearity="sigmoid"), vkml.ArgumentError, "'tanh' or 'relu'"),
    (lambda: nn.GRU(3, 0), vkml.ArgumentError, "hidden_size must be a positive int"),
    (lambda: nn.GRU(3.5, 4), vkml.ArgumentError, "input_size must be a positive int"),
    (lambda: nn.LSTMCell(3, -1), vkml.ArgumentError, "hidden_size"),
    (lambda: nn.RNN(3, 4, num_layers=0), vkml.ArgumentError, "num_layers"),
    (lambda: nn.RNN(3, 4, num_layers=2, dropout=-0.1), vkml.ArgumentError, "dropout should be a number in [0, 1]"),
    (lambda: nn.RNN(3, 4, num_layers=2, dropout="0.5"), vkml.ArgumentError, "dropout"),
    (lambda: nn.GRU(3, 4, dtype=vkml.float64), vkml.DTypeError, "float32"),
    (lambda: nn.GRUCell(3, 4, dtype=vkml.float16), vkml.DTypeError, "float32"),
    (lambda: nn.RNNBase("TRANSFORMER", 3, 4), vkml.ArgumentError, "unknown mode"),
    (lambda: nn.GRU(3, 4)(np.zeros((5, 2, 3), np.float32)), vkml.DTypeError, "vkml.tensor"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5, 2, 3, dtype=vkml.float64)), vkml.DTypeError, ".float()"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5, 2, 3, 1)), vkml.ShapeError, "2-D (unbatched: T, input_size) or 3-D"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5)), vkml.ShapeError, "2-D"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5, 2, 2)), vkml.ShapeError, "input_size=3"),
    (lambda: nn.GRU(3, 4, batch_first=True)(vkml.zeros(2, 0, 3)), vkml.ShapeError, "empty"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5, 2, 3), vkml.zeros(1, 3, 4)), vkml.ShapeError, "(1, 2, 4)"),
    (lambda: nn.GRU(3, 4, num_layers=2)(vkml.zeros(5, 2, 3), vkml.zeros(1, 2, 4)), vkml.ShapeError, "(2, 2, 4)"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5, 2, 3), vkml.zeros(2, 4)), vkml.ShapeError, "should be 3-D"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5, 3), vkml.zeros(1, 1, 4)), vkml.ShapeError, "should be 2-D"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5, 2, 3), vkml.zeros(1, 2, 5)), vkml.ShapeError, "hidden_size"),
    (lambda: nn.GRU(3, 4)(vkml.zeros(5, 2, 3), (vkml.zeros(1, 2, 4),)), vkml.ArgumentError, "one tensor h_0"),
    (lambda: nn.LSTM(3, 4)(vkml.zeros(5, 2, 3), vkml.zeros(1, 2, 4)), vkml.ArgumentError, "(h_0, c_0)"),
    (lambda: nn.LSTM(3, 4)(vkml.zeros(5, 2, 3), (vkml.zeros(1, 2, 4),)), vkml.ArgumentError, "(h_0, c_0)"),
    (lambda: nn.LSTM(3, 4)(vkml.zeros(5, 2, 3), (vkml.zeros(1, 2, 4), vkml.zeros(1, 2, 3))), vkml.ShapeError, "c_0"),
    (lambda: nn.LSTM(3, 4)(vkml.zeros(5, 2, 3), (vkml.zeros(1, 2, 4), np.zeros((1, 2, 4)))), vkml.DTypeError, "c_0"),
    (lambda: nn.RNNCell(3, 4)(vkml.zeros(2, 2, 3)), vkml.ShapeError, "1-D (one sample) or 2-D"),
    (lambda: nn.RNNCell(3, 4)(vkml.zeros(2, 5)), vkml.ShapeError, "input_size=3"),
    (lambda: nn.RNNCell(3, 4)(vkml.zeros(2, 3), vkml.zeros(3, 4)), vkml.ShapeError, "hx must have shape (2, 4)"),
    (lambda: nn.GRUCell(3, 4)(vkml.zeros(3), vkml.zeros(1, 4)), vkml.ShapeError, "hx must have shape (4,)"),
    (lambda: nn.LSTMCell(3, 4)(vkml.zeros(2, 3), vkml.zeros(2, 4)), vkml.ArgumentError, "(h_0, c_0)"),
    (lambda: nn.LSTMCell(3, 4)(vkml.zeros(2, 3), (vkml.zeros(2, 4), vkml.zeros(2, 5))), vkml.ShapeError, "cx"),
    (lambda: nn.LSTMCell(3, 4)(vkml.zeros(2, 3, dtype=vkml.float16)), vkml.DTypeError, "float16"),
])
def test_typed_errors(call, exc, text):
    with pytest.raises(exc) as e: call()
    assert isinstance(e.value, vkml.VkmlError) and text in str(e.value), str(e.value)


@pytest.mark.vulkan
def test_an_input_on_another_device_is_a_device_error():
    m = nn.LSTM(3, 4)
    with pytest.raises(vkml.DeviceError, match=r"\.to\('cpu'\)"): m(vkml.zeros(5, 2, 3, device="vulkan"))
    m.to("vulkan")
    with pytest.raises(vkml.DeviceError, match="h_0"):
        m(vkml.zeros(5, 2, 3, device="vulkan"), (vkml.zeros(1, 2, 4), vkml.zeros(1, 2, 4)))


# --- a jitted training step -----------------------------------------------------------------------------------------

class SequenceClassifier(nn.Module):
    "An LSTM over the sequence and a linear layer on its last step's output."
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, num_layers=2, batch_first=True, dropout=0.2)
        self.head = nn.Linear(8, 3)
    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def train_sequence_model(use_jit: bool, steps: int = 6):
    vkml.manual_seed(0)
    model = SequenceClassifier().to("vulkan")
    opt = vkml.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    if use_jit: step = vkml.jit(step)
    rng = np.random.default_rng(3)
    losses = []
    for _ in range(steps):
        x = vkml.tensor(rng.standard_normal((5, 7, 4)).astype(np.float32), device="vulkan")
        y = vkml.tensor(rng.integers(0, 3, 5), device="vulkan")
        losses.append(step(x, y).item())
    return np.array(losses), [p.numpy() for p in model.parameters()], (step, x, y)


@pytest.mark.vulkan
def test_a_jitted_lstm_training_step_replays_and_equals_the_eager_one():
    eager, eager_params, _ = train_sequence_model(False)
    jitted, jit_params, (step, x, y) = train_sequence_model(True)
    assert step.captured == 1 and step.calls == 6          # one warm-up, one capture, four replays
    np.testing.assert_allclose(jitted, eager, rtol=1e-5, atol=1e-6)
    for a, b in zip(jit_params, eager_params): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert len(set(np.round(jitted, 6))) == 6              # it trained: every step's loss differs
    vkml.reset_stats()
    step(x, y)                                             # a replay: the unrolled step's Python does not run again
    s = vkml.stats()
    assert s["submissions"] == 1 and s["dispatches"] == 0 and step.captured == 1, s


# --- PyTorch's results (tests/fixtures/torch_rnn.npz) ------------------------------------------------------------------

NPZ = HERE / "fixtures" / "torch_rnn.npz"


@functools.lru_cache(maxsize=1)
def _read_npz() -> dict:
    with np.load(NPZ, allow_pickle=False) as z: return {k: z[k] for k in z.files}


def torch_results() -> dict:
    "The npz's arrays by name; a missing npz FAILS the test that asks (it is not a skip: the comparison must run)."
    if not NPZ.exists():
        pytest.fail(f"{NPZ.relative_to(HERE.parent)} is missing: run `python tests/fixtures/make_torch_rnn.py` where torch "
                    f"is installed and commit the npz it writes", pytrace=False)
    return _read_npz()


def test_the_fixture_has_every_case():
    z = torch_results()
    assert json.loads(str(z["meta/cases"])) == list(CASES)
    assert NPZ.stat().st_size < 1_000_000


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_matches_pytorch(case, device):
    "PyTorch's weights loaded by name; vkML's outputs and gradients (input, initial states, parameters) against PyTorch's."
    spec, z = CASES[case], torch_results()
    config = json.loads(str(z[f"{case}/config"]))
    assert (config["module"], config["kwargs"], config["inputs"], config["outputs"]) == \
        (spec["module"], spec["kwargs"], MAKE.input_names(spec), MAKE.output_names(spec)), "the npz is from another CASES"
    m = build(spec, device, seed=123)                                   # weights of its own, then PyTorch's
    assert list(m.state_dict()) == config["params"]                     # the same names, in the same order
    m.load_state_dict({name: z[f"{case}/{name}"] for name in config["params"]})
    for name in config["params"]: np.testing.assert_array_equal(m.state_dict()[name].numpy(), z[f"{case}/{name}"].astype(np.float32))
    inputs = {name: z[f"{case}/{name}"] for name in config["inputs"]}
    upstream = [z[f"{case}/grad_{name}"] for name in config["outputs"]]
    outs, grads, _ = run(m, spec, inputs, device, upstream)
    k = terms_k(spec)
    for name in config["outputs"]: close(outs[name], z[f"{case}/{name}"], k, f"{case} on {device}: {name}")
    assert set(grads) == set(config["inputs"]) | set(config["params"])
    for name in grads: close(grads[name], z[f"{case}/grad/{name}"], k, f"{case} on {device}: grad {name}")


@pytest.mark.vulkan
def test_gate_gradients_are_written_into_the_rows_of_the_gates_gradient():
    """An LSTM step's four gate gradients come from one fused kernel and meet in a concatenation along the gates' axis
    (batch rows before it): the kernel writes each into its part of every row (the schedule's row placement)."""
    from vkml.backends.vulkan import profile
    B, H = 6, 16
    x0 = np.random.default_rng(0).standard_normal((B, 4 * H)).astype(np.float32)
    c0 = np.random.default_rng(1).standard_normal((B, H)).astype(np.float32)
    res = {}
    for d in ("cpu", "vulkan"):
        x = vkml.tensor(x0, device=d, requires_grad=True)
        i, f, g, o = x.chunk(4, 1)
        h = o.sigmoid() * (f.sigmoid() * vkml.tensor(c0, device=d) + i.sigmoid() * g.tanh()).tanh()
        (h * h).sum().backward()
        with profile() as prof: res[d] = x.grad.numpy()
        if d == "vulkan": assert list(prof) == [n for n in prof if n.startswith("gen_")] and len(prof) == 1, prof   # no copy
    oracle.assert_close(res["vulkan"], res["cpu"], k=8)
    # nn.LSTM over 5 steps: each step's 4 gate gradients are no longer copied (90 copies before, 10 now)
    for d in ("cpu", "vulkan"):
        vkml.manual_seed(0)
        m = nn.LSTM(8, 16, batch_first=True).to(d)
        y, _ = m(vkml.tensor(np.random.default_rng(2).standard_normal((4, 5, 8)).astype(np.float32), device=d))
        (y * y).sum().backward()
        with profile() as prof: res[d] = [p.grad.numpy() for p in m.parameters()]
        if d == "vulkan": assert prof["copy_f32"]["count"] < 5 * 4, prof
    for a, w in zip(res["vulkan"], res["cpu"]): oracle.assert_close(a, w, k=5 * 16)
