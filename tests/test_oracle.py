"""The oracle itself: its bound passes what it should and fails what it should, its random numbers are
vkML's, and no other test file keeps a comparison helper or the hash of its own."""
import re
import numpy as np
import pytest
import oracle
from conftest import ROOT


def test_the_bound_is_the_parity_bound():
    oracle.assert_close(np.float32([1.0, np.nan, np.inf]), np.float32([1.0 + 9e-6, np.nan, np.inf]))
    with pytest.raises(AssertionError, match="outside the bound"): oracle.assert_close(np.float32([1.0]), np.float32([1.0001]))
    with pytest.raises(AssertionError, match="NaN"): oracle.assert_close(np.float32([np.nan]), np.float32([1.0]))
    with pytest.raises(AssertionError, match="infinity"): oracle.assert_close(np.float32([-np.inf]), np.float32([np.inf]))
    with pytest.raises(AssertionError, match="differ"): oracle.assert_close(np.int32([1, 2]), np.int32([1, 3]))
    oracle.assert_close(np.float32([100.0 + 0.05]), np.float32([100.0]), k=10_000, terms=np.float32([100.0]))  # sqrt(k)-scaled


def test_random_numbers_are_vkmls():
    from vkml.core.elementwise import rand_bits
    for seed, offset in [(0, 0), (7, 2**32 - 3), (2**64 - 1, 5), (-1, 123), (7, 2**32), (7, 5 * 2**32 + 9)]:
        np.testing.assert_array_equal(oracle.rand_bits(seed, offset, 9), rand_bits(seed, offset, 9).astype(np.uint64))


def test_one_oracle():
    "The comparison and the hash live in tests/oracle.py only."
    for f in sorted((ROOT / "tests").glob("*.py")):
        if f.name in ("oracle.py", "test_oracle.py"): continue
        src = f.read_text(encoding="utf-8")
        assert "0x21F0AAAD" not in src, f"{f.name} keeps its own copy of the RAND hash: use oracle.uniform"
        assert not re.search(r"assert_allclose\([^)]*equal_nan", src), f"{f.name} compares floats itself: use oracle.assert_close"
