"""Training scripts written the way PyTorch users write them, run unchanged on PyTorch and on vkML.

Each function takes the library as `torch` (PyTorch itself, or a namespace that maps PyTorch's module names to
vkML's: tests/test_porting.py's `vkml_as_torch`), the starting weights as a dict of numpy arrays (None: keep the
library's own and return them) and the device, trains a few steps on fixed data and returns (the losses, the
starting weights). tests/fixtures/make_torch_porting.py runs them on PyTorch and stores both; tests/test_porting.py
runs them on vkML from PyTorch's starting weights and compares the losses. Importing this file needs numpy alone."""
import numpy as np


def _start(model, torch, weights, device):
    "Load PyTorch's starting weights by name (or record this library's), then move the model to `device`."
    if weights is None: weights = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
    else: model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    return model.to(device), weights


def mlp_classifier(torch, weights=None, device="cpu", steps=12):
    "An MLP on a TensorDataset through a DataLoader: SGD with momentum and weight decay, StepLR, accuracy."
    nn, F = torch.nn, torch.nn.functional
    from_np = np.random.default_rng(0)
    X = torch.tensor(from_np.standard_normal((96, 20)).astype(np.float32))
    y = torch.tensor(from_np.integers(0, 4, 96))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=16, shuffle=False)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.out = nn.Linear(20, 64), nn.Linear(64, 32), nn.Linear(32, 4)
            self.drop = nn.Dropout(0.0)
        def forward(self, x):
            x = F.relu(self.fc1(x))
            x = self.drop(torch.tanh(self.fc2(x)))
            return self.out(x)

    model, weights = _start(Net(), torch, weights, device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    criterion = nn.CrossEntropyLoss()
    losses = []
    model.train()
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        opt.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        opt.step(); sched.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        acc = (model(X.to(device)).argmax(dim=1) == y.to(device)).float().mean().item()
    return losses + [acc], weights


def cnn_batchnorm(torch, weights=None, device="cpu", steps=6):
    """A small CNN with BatchNorm on 1x12x12 images: Adam, gradient clipping, running statistics, eval mode. (No bias
    before a BatchNorm, as ResNets have it: its gradient is zero up to rounding, which Adam would turn into whole steps.)"""
    nn = torch.nn
    rng = np.random.default_rng(1)
    model = nn.Sequential(
        nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(16, 3))
    model, weights = _start(model, torch, weights, device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for step in range(steps):
        x = torch.tensor(rng.standard_normal((8, 1, 12, 12)).astype(np.float32)).to(device)
        t = torch.tensor(rng.integers(0, 3, 8)).to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), t)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        x = torch.tensor(rng.standard_normal((4, 1, 12, 12)).astype(np.float32)).to(device)
        losses += model(x).sum(dim=1).cpu().numpy().tolist()
    return losses, weights


def lstm_tagger(torch, weights=None, device="cpu", steps=6):
    "An embedding, a two-layer LSTM (batch_first) and a linear head: AdamW, one label per sequence."
    nn = torch.nn
    rng = np.random.default_rng(2)

    class Tagger(nn.Module):
        def __init__(self, vocab=30, emb=16, hidden=24, classes=5):
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, num_layers=2, batch_first=True)
            self.head = nn.Linear(hidden, classes)
        def forward(self, tokens):
            out, (h, c) = self.lstm(self.emb(tokens))
            return self.head(out[:, -1, :])

    model, weights = _start(Tagger(), torch, weights, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    losses = []
    for _ in range(steps):
        tokens = torch.tensor(rng.integers(0, 30, (6, 9))).to(device)
        labels = torch.tensor(rng.integers(0, 5, 6)).to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(tokens), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, weights


def transformer_regressor(torch, weights=None, device="cpu", steps=5):
    "A TransformerEncoder (batch_first, no dropout) over a sequence with learned positions: MSE, Adam, cosine schedule."
    nn = torch.nn
    rng = np.random.default_rng(3)

    class Model(nn.Module):
        def __init__(self, d=16, T=7):
            super().__init__()
            self.inp = nn.Linear(3, d)
            self.pos = nn.Parameter(torch.zeros(1, T, d))
            layer = nn.TransformerEncoderLayer(d_model=d, nhead=4, dim_feedforward=32, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2)
            self.out = nn.Linear(d, 1)
        def forward(self, x):
            h = self.enc(self.inp(x) + self.pos)
            return self.out(h.mean(dim=1)).squeeze(-1)

    model, weights = _start(Model(), torch, weights, device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    losses = []
    for _ in range(steps):
        x = torch.tensor(rng.standard_normal((5, 7, 3)).astype(np.float32)).to(device)
        target = torch.tensor(rng.standard_normal(5).astype(np.float32)).to(device)
        opt.zero_grad()
        loss = nn.MSELoss()(model(x), target)
        loss.backward()
        opt.step(); sched.step()
        losses.append(loss.item())
    return losses, weights


def mnist_style(torch, weights=None, device="cpu", steps=4):
    "The classic MNIST tutorial's idioms: view(size(0), -1), log_softmax + nll_loss, torch.max, a saved and reloaded state dict."
    import io
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(4)

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.fc1 = nn.Linear(4 * 4 * 4, 10)
        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = x.view(x.size(0), -1)
            return F.log_softmax(self.fc1(x), dim=1)

    model, weights = _start(Net(), torch, weights, device)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        data = torch.from_numpy(rng.standard_normal((6, 1, 10, 10)).astype(np.float32)).to(device)
        target = torch.from_numpy(rng.integers(0, 10, 6)).to(device)
        opt.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    model2, _ = _start(Net(), torch, {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}, device)
    model2.load_state_dict(torch.load(buf))
    with torch.no_grad():
        out = model2(data)
        _, pred = torch.max(out, 1)
        correct = pred.eq(target.view_as(pred)).sum().item()
    return losses + [float(out.sum().item()), float(correct)], weights


def conv_autoencoder(torch, weights=None, device="cpu", steps=4):
    "An autoencoder: strided convolutions down, ConvTranspose2d and an upsample back, a skip by torch.cat, BCE on a sigmoid."
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(5)

    def init(m):                                     # the user's initialiser, applied with Module.apply
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None: nn.init.zeros_(m.bias)

    class AE(nn.Module):
        def __init__(self):
            super().__init__()
            self.down1 = nn.Conv2d(1, 4, 3, stride=2, padding=1)
            self.down2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
            self.up1 = nn.ConvTranspose2d(8, 4, kernel_size=2, stride=2)
            self.up2 = nn.Upsample(scale_factor=2, mode="nearest")
            self.out = nn.Conv2d(8, 1, kernel_size=1)
        def forward(self, x):
            d1 = F.leaky_relu(self.down1(x), 0.1)
            d2 = F.leaky_relu(self.down2(d1), 0.1)
            u1 = torch.relu(self.up1(d2))
            h = torch.cat([u1, d1], dim=1)
            return torch.sigmoid(self.out(self.up2(h)))

    net = AE()
    net.apply(init)
    model, weights = _start(net, torch, weights, device)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.8, 0.99), eps=1e-7)
    losses = []
    for _ in range(steps):
        x = torch.tensor(rng.uniform(0, 1, (4, 1, 8, 8)).astype(np.float32)).to(device)
        opt.zero_grad()
        loss = F.binary_cross_entropy(model(x), x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses + [float(torch.flatten(model(x), 1).mean().item())], weights


SCRIPTS = {f.__name__: f for f in (mlp_classifier, cnn_batchnorm, lstm_tagger, transformer_regressor, mnist_style,
                                   conv_autoencoder)}
