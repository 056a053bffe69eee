"""The porting check: training scripts written for PyTorch (tests/porting/scripts.py: an MLP through a DataLoader with
a schedule, a CNN with BatchNorm and gradient clipping, an LSTM tagger, a Transformer encoder) run unchanged with
`import vkml as torch`, from PyTorch's starting weights, and give PyTorch's losses (tests/fixtures/torch_porting.npz,
written by tests/fixtures/make_torch_porting.py), on the CPU and on Vulkan. A name a script uses that vkML lacks fails
here as it would fail a user."""
import sys
from pathlib import Path
import numpy as np
import pytest

import vkml
import vkml.utils.data  # noqa: F401 (torch.utils.data)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "porting"))
from scripts import SCRIPTS  # noqa: E402

NPZ = np.load(HERE / "fixtures" / "torch_porting.npz")
DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]
# The losses of a few float32 steps: each step's loss sums errors of the order of the parity bound, and an optimiser
# step turns them into weights a little apart; a wrong gradient or a wrong default moves them by far more.
RTOL, ATOL = 2e-4, 1e-5


def torch_weights(name) -> dict:
    pre = f"{name}/w/"
    return {k[len(pre):]: NPZ[k] for k in NPZ.files if k.startswith(pre)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_pytorch_script_gives_pytorchs_losses(name, device):
    losses, _ = SCRIPTS[name](vkml, torch_weights(name), device)
    np.testing.assert_allclose(losses, NPZ[f"{name}/losses"], rtol=RTOL, atol=ATOL, err_msg=f"{name} on {device}")


def test_the_check_can_fail():
    "Starting from other weights, the same script's losses are not PyTorch's."
    w = {k: v * 1.01 for k, v in torch_weights("mlp_classifier").items()}
    losses, _ = SCRIPTS["mlp_classifier"](vkml, w)
    assert not np.allclose(losses, NPZ["mlp_classifier/losses"], rtol=RTOL, atol=ATOL)
