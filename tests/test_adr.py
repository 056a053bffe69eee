"""Every architecture decision record has the four sections and a row in adr/README.md."""
import re
import pytest
from conftest import ROOT

ADRS = sorted((ROOT / "adr").glob("[0-9][0-9][0-9][0-9]-*.md"))
SECTIONS = ["Context", "Decision", "Alternatives", "Consequences"]


def test_there_are_adrs():
    assert ADRS and ADRS[0].name.startswith("0001-")


@pytest.mark.parametrize("adr", ADRS, ids=[p.name[:4] for p in ADRS])
def test_adr_form(adr):
    text = adr.read_text(encoding="utf-8")
    assert re.match(rf"# ADR {adr.name[:4]}: \S", text), "the first line is `# ADR NNNN: title`, NNNN as in the file name"
    heads = re.findall(r"^## (\w+)", text, re.M)
    assert [h for h in heads if h in SECTIONS] == SECTIONS, f"sections {heads}, expected {SECTIONS} in order"
    assert f"({adr.name})" in (ROOT / "adr" / "README.md").read_text(encoding="utf-8"), "add a row to adr/README.md"


def test_numbers_are_unique():
    nums = [p.name[:4] for p in ADRS]
    assert len(nums) == len(set(nums)), nums
