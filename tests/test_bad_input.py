"""Every bad input to vkml.frontend.functions raises its typed error before any graph node is built.

Each row of `BAD` is (the call, the error type, a piece of the message that names the problem or
the fix). The test counts `Node` constructions during the call: a bad call must build none, so it
leaves nothing half-built behind (and the random generator's offset does not move).
"""
import math
import numpy as np
import pytest
import vkml.frontend.functions as VF
from vkml.core.dtypes import (VkmlError, DTypeError, ShapeError, RankError, AxisError, DeviceError,
                         EmptyReductionError, IndexOutOfRangeError, float32, float16, int32, int64, bool_)
from vkml.frontend.functions import ArgumentError, EinsumError, IndexingError
from vkml.frontend.tensor import Node, Tensor, tensor, apply
from vkml.core.ops import Op

x23 = tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
h23 = tensor(np.ones((2, 3), np.float16))
i23 = tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
l3 = tensor(np.array([0, 2, 1], np.int64))
l23 = tensor(np.zeros((2, 3), np.int64))
b23 = tensor(np.ones((2, 3), bool))
x4 = tensor(np.zeros((1, 1, 2, 2), np.float32))
i4 = tensor(np.zeros((1, 1, 2, 2), np.int64))
e03 = tensor(np.zeros((0, 3), np.float32))
ie03 = tensor(np.zeros((0, 3), np.int32))
x3 = tensor(np.ones(3, np.float32))
d3 = tensor(np.zeros(3))   # float64
# every other input a bad call needs, built here so that the calls themselves build nothing
x31, o0, o22, o24, o33 = x3.reshape(3, 1), VF.ones(()), VF.ones(2, 2), VF.ones(2, 4), VF.ones(3, 3)
b4, l2, l31, i3, i0 = tensor(np.ones(4, bool)), l3[:2], tensor(np.zeros((3, 1), np.int64)), i23[0], tensor(np.int32(1))
b3, f2 = tensor(np.ones(3, bool)), l3[:2].float()
i32_32, le0 = i23.reshape(3, 2), tensor(np.zeros(0, np.int64))
o111, o11 = tensor(np.ones((1, 1, 1), np.float32)), tensor(np.ones((1, 1), np.float32))
io112, io211 = tensor(np.ones((1, 1, 2), np.int64)), tensor(np.ones((2, 1, 1), np.int64))

FLOAT_ONLY = ["exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid", "erf", "erfc",
              "leaky_relu", "elu", "selu", "gelu", "silu", "mish", "softplus", "softsign", "mean", "var", "std",
              "logsumexp", "norm"]

BAD = [
    # rank > 4
    ("zeros rank 5", lambda: VF.zeros(1, 1, 1, 1, 2), RankError, "rank 5"),
    ("randn rank 5", lambda: VF.randn(1, 1, 1, 1, 2), RankError, "rank 5"),
    ("tensor rank 5", lambda: tensor(np.zeros((1,) * 5, np.float32)), RankError, "rank 5"),
    ("unsqueeze rank 5", lambda: x4.unsqueeze(0), RankError, "rank 5"),
    ("reshape rank 5", lambda: x23.reshape(1, 1, 1, 2, 3), RankError, "rank 5"),
    ("expand rank 5", lambda: x4.expand(3, 1, 1, 2, 2), RankError, "rank 5"),
    ("stack rank 5", lambda: VF.stack([x4, x4]), RankError, "rank 5"),
    ("getitem None rank 5", lambda: x4[None], RankError, "rank 5"),
    ("repeat rank 5", lambda: x23.repeat(1, 1, 1, 1, 1), RankError, "rank 5"),
    ("one_hot rank 5", lambda: VF.one_hot(i4, 3), RankError, "rank 5"),
    ("einsum rank 5", lambda: VF.einsum("abc,de->abcde", o111, o11), RankError, "rank 5"),
    ("einsum int product rank 5", lambda: VF.einsum("abc,cde->abde", io112, io211), RankError, "rank 5"),
    # shapes that do not fit
    ("add shapes", lambda: x23 + x31, ShapeError, "(2, 3) and (3, 1)"),
    ("add shapes numpy", lambda: x23 + np.ones(4, np.float32), ShapeError, "(2, 3) and (4,)"),
    ("where shapes", lambda: VF.where(b23, x23, o33), ShapeError, "(3, 3)"),
    ("where cond shape", lambda: VF.where(b4, x23, x23), ShapeError, "(4,)"),
    ("reshape numel", lambda: x23.reshape(4, 2), ShapeError, "(2, 3)"),
    ("reshape two -1", lambda: x23.reshape(-1, -1), ShapeError, "-1"),
    ("reshape -1 with 0", lambda: e03.reshape(-1, 0), ShapeError, "ambiguous"),
    ("expand mismatch", lambda: x23.expand(2, 4), ShapeError, "(2, 3)"),
    ("expand fewer dims", lambda: x23.expand(3), ShapeError, "fewer"),
    ("cat shapes", lambda: VF.cat([x23, o22]), ShapeError, "(2, 2)"),
    ("cat 0-d", lambda: VF.cat([o0, o0]), ShapeError, "0-d"),
    ("stack shapes", lambda: VF.stack([x23, x3]), ShapeError, "(3,)"),
    ("masked_fill_ mask too big", lambda: x3.masked_fill_(b23, 0.0), ShapeError, "(2, 3)"),   # in place: x3 keeps its shape
    ("masked_fill tensor value", lambda: x23.masked_fill(b23, x3), ShapeError, "scalar"),
    ("index_add source", lambda: x23.index_add(1, l3, o24), ShapeError, "(2, 4)"),
    ("gather larger", lambda: x23.gather(1, l31), ShapeError, "(3, 1)"),
    ("gather rank", lambda: x23.gather(1, l3), ShapeError, "(3,)"),
    ("pad odd", lambda: VF.pad(x23, (1,)), ShapeError, "even"),
    ("pad too long", lambda: VF.pad(x3, (1, 1, 1, 1)), ShapeError, "(3,)"),
    ("pad crops too much", lambda: VF.pad(x3, (-2, -2)), ShapeError, "crops"),
    ("tril 1-d", lambda: VF.tril(x3), ShapeError, "rank >= 2"),
    ("repeat too few", lambda: x23.repeat(2), ShapeError, "at least 2"),
    ("einsum sizes", lambda: VF.einsum("ij,jk->ik", x23, x23), ShapeError, "(2, 3) and (2, 3)"),
    ("split 0-d", lambda: VF.split(o0, 1), ShapeError, "rank >= 1"),
    ("zeros negative", lambda: VF.zeros(2, -1), ShapeError, "non-negative"),
    # axes out of range
    *[(f"{n} axis", (lambda n=n: getattr(VF, n)(x23, 2)), AxisError, "out of range")
      for n in ("sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "logsumexp", "cumsum", "var", "std")],
    ("sum axis -3", lambda: x23.sum(-3), AxisError, "-3"),
    ("sum axis twice", lambda: x23.sum((0, -2)), AxisError, "twice"),
    ("norm axis", lambda: x23.norm(dim=5), AxisError, "5"),
    ("transpose axis", lambda: x23.transpose(0, 2), AxisError, "2"),
    ("unsqueeze axis", lambda: x3.unsqueeze(3), AxisError, "3"),
    ("squeeze axis", lambda: x23.squeeze(4), AxisError, "4"),
    ("flatten axis", lambda: x23.flatten(0, 5), AxisError, "5"),
    ("permute axis", lambda: x23.permute(0, 2), AxisError, "2"),
    ("permute repeat", lambda: x23.permute(0, 0), AxisError, "permutation"),
    ("permute count", lambda: x23.permute(0), AxisError, "needs 2"),
    ("cat axis", lambda: VF.cat([x23, x23], 2), AxisError, "2"),
    ("stack axis", lambda: VF.stack([x3, x3], 3), AxisError, "3"),
    ("index_select axis", lambda: x23.index_select(2, l3), AxisError, "2"),
    ("flip axis", lambda: x23.flip(3), AxisError, "3"),
    ("split axis", lambda: x23.split(1, 2), AxisError, "2"),
    ("gather axis", lambda: x23.gather(-3, l23), AxisError, "-3"),
    ("dim not int", lambda: x23.sum(1.0), AxisError, "int"),
    # mixing dtypes: the message names the cast
    ("add f32 i32", lambda: x23 + i23, DTypeError, ".to(vkml.float32)"),
    ("add i32 f32", lambda: i23 + x23, DTypeError, ".float()"),
    ("mul f32 f16", lambda: x23 * h23, DTypeError, ".to(vkml.float32)"),
    ("sub i32 i64", lambda: i23 - l23, DTypeError, ".to(vkml.int64)"),
    ("maximum mixed", lambda: VF.maximum(x23, i23), DTypeError, ".float()"),
    ("eq mixed", lambda: x23 == i23, DTypeError, ".to(vkml.float32)"),
    ("where mixed", lambda: VF.where(b23, x23, i23), DTypeError, ".to(vkml.float32)"),
    ("cat mixed", lambda: VF.cat([x23, h23]), DTypeError, ".to(vkml.float32)"),
    ("stack mixed", lambda: VF.stack([x23, i23]), DTypeError, ".float()"),
    ("index_add mixed", lambda: x23.index_add(0, l2, h23), DTypeError, ".to(vkml.float32)"),
    ("einsum mixed", lambda: VF.einsum("ij,jk->ik", x23, i32_32), DTypeError, ".float()"),
    ("masked_fill mixed", lambda: x23.masked_fill(b23, i0), DTypeError, ".float()"),
    ("clamp tensor bound mixed", lambda: x23.clamp(i23), DTypeError, ".float()"),
    # Python scalars: a float with an integer tensor names .float()
    ("i32 * 0.5", lambda: i23 * 0.5, DTypeError, ".float()"),
    ("i64 + 1.5", lambda: l23 + 1.5, DTypeError, ".float()"),
    ("0.5 - i32", lambda: 0.5 - i23, DTypeError, ".float()"),
    ("add alpha float on int", lambda: VF.add(i23, i23, alpha=0.5), DTypeError, ".float()"),
    ("clamp float bound on int", lambda: i23.clamp(0.5), DTypeError, ".float()"),
    ("pad float value on int", lambda: VF.pad(i23, (1, 1), value=0.5), DTypeError, ".float()"),
    ("full float in int", lambda: VF.full((2,), 0.5, dtype=int64), DTypeError, ".float()"),
    ("masked_fill float on int", lambda: i23.masked_fill(b23, 0.5), DTypeError, ".float()"),
    ("where float scalar on int", lambda: VF.where(b23, i23, 0.5), DTypeError, ".float()"),
    ("int scalar too big", lambda: i23 + 2**40, DTypeError, "does not fit"),
    ("int into bool", lambda: b23 == 2, DTypeError, ".long()"),
    # '/' and the float-only math on integers name .float()
    ("i / i", lambda: i23 / i23, DTypeError, ".float()"),
    ("i / 2", lambda: i23 / 2, DTypeError, ".float()"),
    ("2 / i", lambda: 2 / i23, DTypeError, ".float()"),
    ("i ** -1", lambda: i23 ** -1, ArgumentError, "negative integer powers"),   # PyTorch refuses it too
    *[(f"{n} of int32", (lambda n=n: getattr(VF, n)(i23)), DTypeError, ".float()") for n in FLOAT_ONLY],
    *[(f"{n} of bool", (lambda n=n: getattr(VF, n)(b23)), DTypeError, ".float()") for n in ("exp", "gelu", "mean")],
    ("neg of bool", lambda: -b23, DTypeError, ".long()"),
    ("add bools", lambda: b23 + b23, DTypeError, ".long()"),
    ("argmax of bool", lambda: b23.argmax(), DTypeError, ".long()"),
    ("rand int", lambda: VF.rand(3, dtype=int64), DTypeError, ".float()"),
    ("randn int", lambda: VF.randn(3, dtype=int32), DTypeError, ".float()"),
    ("arange bool", lambda: VF.arange(3, dtype=bool_), DTypeError, "bool"),
    ("arange float in int", lambda: VF.arange(0, 2, 0.5, dtype=int64), DTypeError, ".float()"),
    ("mean dtype int", lambda: x23.mean(dtype=int64), DTypeError, ".float()"),
    # empty extents
    ("mean empty", lambda: e03.mean(0), EmptyReductionError, "empty"),
    ("mean empty all", lambda: e03.mean(), EmptyReductionError, "empty"),
    ("argmax empty", lambda: e03.argmax(0), EmptyReductionError, "empty"),
    ("argmin empty all", lambda: e03.argmin(), EmptyReductionError, "empty"),
    ("amax int empty", lambda: ie03.amax(0), EmptyReductionError, ".float()"),
    ("amin int empty", lambda: ie03.amin(), EmptyReductionError, ".float()"),
    ("max(dim) empty", lambda: e03.max(0), EmptyReductionError, "empty"),
    ("var empty", lambda: e03.var(0), EmptyReductionError, "empty"),
    ("norm inf empty", lambda: VF.norm(e03, math.inf, 0), EmptyReductionError, "empty"),
    # float64 meeting float32 (never promoted), and dtypes vkML does not have
    ("float64 array operand", lambda: x3 + np.zeros(3), DTypeError, "`.double()`"),
    ("float64 tensor operand", lambda: x3 * d3, DTypeError, "never promotes"),
    ("int8 array tensor", lambda: tensor(np.zeros(3, np.int8)), DTypeError, ".astype(np.int64)"),
    ("complex dtype", lambda: VF.zeros(2, dtype="complex64"), DTypeError, ".astype(np.float32)"),
    ("int16 cast", lambda: x3.cast(np.int16), DTypeError, ".astype(np.int64)"),
    ("uint8 array operand", lambda: x3 + np.zeros(3, np.uint8), DTypeError, "uint8"),
    ("list operand", lambda: VF.add(x3, [1, 2, 3]), DTypeError, "vkml.tensor"),
    ("elementwise row given too few inputs", lambda: apply(Op.LERP, x3, x3), ShapeError, "LERP takes 3 input(s), got 2"),
    ("no tensor", lambda: VF.add(2, 3), DTypeError, "Tensor"),
    ("exp of float", lambda: VF.exp(2.0), DTypeError, "vkml.tensor"),
    ("where cond not bool", lambda: VF.where(x23, x23, x23), DTypeError, ".bool()"),
    ("masked_fill mask not bool", lambda: x23.masked_fill(i23, 0.0), DTypeError, ".bool()"),
    # index tensors and __getitem__
    ("index out of range", lambda: x23[2], IndexOutOfRangeError, "out of range"),
    ("negative index out of range", lambda: x23[:, -4], IndexOutOfRangeError, "out of range"),
    ("float list index", lambda: x23[[0.5]], IndexingError, "ints or bools"),
    ("float index", lambda: x23[1.0], IndexingError, "float"),
    ("string index", lambda: x23["a"], IndexingError, "str"),
    ("mask of the wrong shape", lambda: x23[b3], IndexingError, "mask's shape"),
    ("too many indices", lambda: x23[0, 0, 0], IndexingError, "too many"),
    ("two ellipses", lambda: x23[..., ...], IndexingError, "ellipsis"),
    ("zero step", lambda: x23[::0], IndexingError, "zero"),
    ("index tensors that do not broadcast", lambda: x23[l2, l3], ShapeError, "do not broadcast"),
    ("float tensor index", lambda: x23[:, x3], IndexingError, "int64, int32 or bool"),
    ("list index out of range", lambda: x23[[0, 2]], IndexOutOfRangeError, "out of range"),
    ("index_select int32", lambda: x23.index_select(1, i3), DTypeError, ".long()"),
    ("index_select 2-d", lambda: x23.index_select(1, l23), IndexingError, "1-D"),
    ("index_select 0-d", lambda: o0.index_select(0, l3), IndexOutOfRangeError, "size 1"),
    ("gather int32", lambda: x23.gather(1, i23), DTypeError, ".long()"),
    ("index_add int32", lambda: x23.index_add(0, i3, x23), DTypeError, ".long()"),
    ("one_hot int32", lambda: VF.one_hot(i23, 6), DTypeError, ".long()"),
    ("one_hot empty infer", lambda: VF.one_hot(le0), ArgumentError, "num_classes"),
    # argument values
    ("pad mode", lambda: VF.pad(x23, (1, 1), mode="reflect"), ArgumentError, "constant"),
    ("gelu approximate", lambda: VF.gelu(x23, approximate="fast"), ArgumentError, "'tanh'"),
    ("clamp no bounds", lambda: x23.clamp(), ArgumentError, "'min' or 'max'"),
    ("clamp string bound", lambda: x23.clamp("a"), DTypeError, "numbers or tensors"),
    ("hardtanh None bound", lambda: VF.hardtanh(x23, None, 1.0), DTypeError, "number"),
    ("hardtanh min > max", lambda: VF.hardtanh(x23, 1.0, -1.0), ArgumentError, "cannot be greater"),
    ("arange zero step", lambda: VF.arange(0, 3, 0), ArgumentError, "zero"),
    ("arange wrong way", lambda: VF.arange(3, 0), ArgumentError, "away"),
    ("linspace negative", lambda: VF.linspace(0, 1, -1), ArgumentError, "steps"),
    ("div rounding_mode", lambda: VF.div(x23, x23, rounding_mode="floor"), ArgumentError, "rounding_mode"),
    ("split zero", lambda: x23.split(0, 1), ArgumentError, "positive"),
    ("split sections", lambda: x23.split([1, 1], 1), ArgumentError, "add up"),
    ("flatten order", lambda: x23.flatten(1, 0), ArgumentError, "start_dim"),
    ("norm nuc", lambda: x23.norm("nuc"), ArgumentError, "nuclear"),
    ("norm nan", lambda: x23.norm(float("nan")), ArgumentError, "'fro'"),
    ("norm negative of empty", lambda: e03.norm(-1), EmptyReductionError, "empty"),
    ("cat empty list", lambda: VF.cat([]), ArgumentError, "non-empty"),
    ("tril float diagonal", lambda: VF.tril(x23, 0.5), ArgumentError, "int"),
    ("unknown device", lambda: VF.zeros(2, device="gpu"), DeviceError, "'gpu'"),
    # einsum
    ("einsum implicit sizes", lambda: VF.einsum("ij,jk", x23, x23), ShapeError, "(2, 3) and (2, 3)"),
    ("einsum diagonal sizes", lambda: VF.einsum("ii->i", x23), ShapeError, "repeated"),
    ("einsum diagonal out", lambda: VF.einsum("ij->ii", o22), EinsumError, "twice"),
    ("einsum two ellipses", lambda: VF.einsum("...j...,jk->...k", x23, x23), EinsumError, "subscript"),
    ("einsum ellipsis out only", lambda: VF.einsum("ij->...ij", x23), EinsumError, "'...'"),
    ("einsum three sizes", lambda: VF.einsum("i,i,i->", x3, x3, f2), ShapeError, "index 'i'"),
    ("einsum count", lambda: VF.einsum("ij,jk->ik", x23), EinsumError, "2 operands"),
    ("einsum rank", lambda: VF.einsum("ijk->i", x23), EinsumError, "(2, 3)"),
    ("einsum unknown out", lambda: VF.einsum("ij->k", x23), EinsumError, "'k'"),
    ("einsum bad letter", lambda: VF.einsum("i1->i", x23), EinsumError, "subscript"),
    ("einsum bool", lambda: VF.einsum("ij->j", b23), DTypeError, "bool"),
]

@pytest.fixture
def nodes_built(monkeypatch):
    "A counter of `Node`s constructed while the test runs."
    count = [0]
    init = Node.__init__
    def counting(self, *a, **k):
        count[0] += 1
        init(self, *a, **k)
    monkeypatch.setattr(Node, "__init__", counting)
    return count

@pytest.mark.parametrize("call,exc,msg", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input(call, exc, msg, nodes_built):
    offset = VF.default_generator.offset
    with pytest.raises(exc) as info:
        call()
    assert isinstance(info.value, VkmlError), type(info.value)
    assert msg in str(info.value), f"{msg!r} not in {str(info.value)!r}"
    assert nodes_built[0] == 0, f"{nodes_built[0]} node(s) built before the error"
    assert VF.default_generator.offset == offset

def test_counter_sees_nodes(nodes_built):
    "The node counter itself works: a good call builds nodes."
    x23 + 1
    assert nodes_built[0] == 3   # CONST, EXPAND (a scalar is broadcast by one view), ADD

def test_inputs_untouched_after_errors():
    before = (x23.node, x23.node.srcs, x23.shape, x23.dtype)
    for _, call, exc, _ in BAD:
        try: call()
        except VkmlError: pass
    assert (x23.node, x23.node.srcs, x23.shape, x23.dtype) == before
    np.testing.assert_array_equal(x23.numpy(), np.arange(6).reshape(2, 3))

def test_good_neighbours_still_work():
    "The edges next to the errors are accepted: a non-empty axis of an empty tensor, float empty amax, int + 1."
    assert e03.mean(1).shape == (0,) and e03.argmax(1).shape == (0,)
    assert e03.amax(0).numpy().tolist() == [-math.inf] * 3 and e03.amin(0).numpy().tolist() == [math.inf] * 3
    assert (i23 + 1).dtype is int32 and (x23 * 2).dtype is float32 and (h23 * 2).dtype is float16
    assert (b23 == True).dtype is bool_ and (l23 + 2**40).dtype is int64


# --- index values out of range are refused before any kernel reads them (data indices, every backend) ---
@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("case", ["gather", "index_select", "index_add", "one_hot", "embedding"])
def test_out_of_range_index_values_are_refused_on_every_backend(device, case, request):
    if device == "vulkan": request.getfixturevalue("vulkan")
    import vkml, vkml.nn.functional as F
    x = vkml.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    calls = {
        "gather": lambda: vkml.gather(x, 1, vkml.tensor([[0, 3], [1, 2]], device=device)),
        "index_select": lambda: vkml.index_select(x, 1, vkml.tensor([-1], device=device)),
        "index_add": lambda: vkml.index_add(x, 0, vkml.tensor([2], device=device), vkml.ones(1, 3, device=device)),
        "one_hot": lambda: vkml.one_hot(vkml.tensor([0, 3], device=device), 3),
        "embedding": lambda: F.embedding(vkml.tensor([4], device=device), x),
    }
    with pytest.raises(vkml.IndexOutOfRangeError, match="out of range"):
        calls[case]()
