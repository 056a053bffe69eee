"""Reading a family's values PyTorch computed: tests/fixtures/make_torch_<family>.py (its CASES; importing it needs
numpy alone, so the tests see the same cases torch ran) and tests/fixtures/torch_<family>.npz, which holds for a case
C its inputs C/in<i>, outputs C/out<j>, the loss weights C/w<j> and gradients C/grad<i>."""
import importlib.util
from pathlib import Path
import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class TorchFixture:
    "The generator module (`make`) and the npz of one family (`misc`, `forms`, `stats`, `library`)."
    def __init__(self, family: str):
        spec = importlib.util.spec_from_file_location(f"make_torch_{family}", FIXTURES / f"make_torch_{family}.py")
        self.make = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.make)
        self.path, self._arrays = FIXTURES / f"torch_{family}.npz", {}

    def npz(self) -> dict:
        "The npz's arrays by name; a missing npz FAILS the test that asks (the comparison must run)."
        if not self.path.exists():
            pytest.fail(f"{self.path} is missing: run tests/fixtures/make_{self.path.stem}.py where torch is installed "
                        f"and commit the npz", pytrace=False)
        if not self._arrays:
            with np.load(self.path) as z: self._arrays.update({k: z[k] for k in z.files})
        return self._arrays

    def arrays(self, name) -> list:
        "Case `name`'s inputs, in order."
        d, out, i = self.npz(), [], 0
        while f"{name}/in{i}" in d: out.append(d[f"{name}/in{i}"]); i += 1
        return out

    def outputs(self, name, key="out") -> list:
        "One entry per output of case `name`: its value (`key` 'out') or its loss weight ('w'; None where it has none)."
        d, out, j = self.npz(), [], 0
        while f"{name}/out{j}" in d: out.append(d.get(f"{name}/{key}{j}")); j += 1
        return out
