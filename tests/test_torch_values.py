"""vkML's elementwise operators against the values PyTorch computed (tests/fixtures/torch_ops.npz, written by
tests/fixtures/make_torch_opinfo.py): each case's inputs run through the operator of the registry on the CPU and on
Vulkan, and the results must match PyTorch's within the parity bound of the dtype (tests/oracle.py), NaN, infinities
and integers exactly. The fixture covers every one- and two-tensor row of the operator table, and the OpInfo
coverage the registry reports is computed from tests/fixtures/opinfo_names.json, never typed."""
import json
from pathlib import Path
import numpy as np
import pytest

import vkml.frontend.registry as REG
from vkml.frontend.tensor import tensor
import oracle

FIXTURES = Path(__file__).parent / "fixtures"
DATA = np.load(FIXTURES / "torch_ops.npz")
CASES = {c["name"]: c for c in json.loads(str(DATA["meta/cases"]))}
KEYS = sorted({k.rsplit("/", 1)[0] for k in DATA.files if not k.startswith("meta/")})   # name/dtype[/special]


def _run(key, device):
    name = key.split("/")[0]
    c = CASES[name]
    ins = [DATA[f"{key}/in{j}"] for j in range(len(c["domains"]))]
    fn = REG.OPERATORS[c["op"]].fn
    with np.errstate(all="ignore"):
        return fn(*[tensor(a, device=device) for a in ins], **c["kwargs"]).numpy()


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("key", KEYS)
def test_matches_torch(key, device):
    want = DATA[f"{key}/out"]
    got = _run(key, device)
    oracle.assert_close(got, want, what=f"{key} on {device} (torch {DATA['meta/torch_version']})")


def test_every_elementwise_operator_has_torch_values():
    "A new one- or two-tensor row of the operator table needs a case in make_torch_opinfo.py."
    ops = {c["op"] for c in CASES.values()}
    missing = sorted(n for n in [*REG.names(form="unary"), *REG.names(form="binary")] if n not in ops)
    assert not missing, f"add these to tests/fixtures/make_torch_opinfo.py and run it: {missing}"
    assert all(f"{n}/float32/out" in DATA and f"{n}/float64/out" in DATA for n in CASES if not CASES[n]["ints"])


def test_a_wrong_value_is_caught():
    "The comparison can fail: floor against torch's ceil."
    key = next(k for k in KEYS if k.startswith("ceil/float32") and "special" not in k)
    got = REG.OPERATORS["floor"].fn(tensor(DATA[f"{key}/in0"])).numpy()
    with pytest.raises(AssertionError): oracle.assert_close(got, DATA[f"{key}/out"])


def test_opinfo_coverage_is_computed_from_the_fixture():
    names = json.loads((FIXTURES / "opinfo_names.json").read_text())
    cov = REG.opinfo_coverage(names["names"], names["aliases"])
    assert cov["opinfo_names"] == len(set(names["names"])) and set(cov["matched"]) <= set(REG.OPERATORS)
    assert set(cov["matched"].values()) <= set(names["names"])
    assert cov["covered"] == len({REG.opinfo_name(n, set(names["names"])) for n in REG.OPERATORS} - {None})
    # registering an operator under an OpInfo name the table lacks moves the count by one
    absent = next(n for n in names["names"] if REG.opinfo_name(n, set(names["names"])) and n not in REG.OPERATORS
                  and f"nn.functional.{n}" not in REG.OPERATORS and "." not in n)
    REG.register_operator(absent, "test", lambda x: x, lambda: tensor([1.0]))
    try: assert REG.opinfo_coverage(names["names"])["covered"] == cov["covered"] + 1
    finally: REG.unregister_operator(absent)
