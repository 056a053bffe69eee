"""A submission cut where a group of outputs is computed (`realize(..., cuts=...)`, nbs/12_tensor.ipynb, 27c_backend), and
host points a replay runs while the device computes the next segment (`host_point(..., ahead=True)`, nbs/28_replay.ipynb):
what data-parallel training uses to exchange a bucket of gradients while backward computes the next."""
import numpy as np
import pytest

import vkml
from vkml.core.graph import get_backend
from vkml.core.operands import ArgumentError
from vkml.engine.capture import JitError, capture_in_progress
from vkml.frontend.tensor import realize

pytestmark = pytest.mark.vulkan
DEV = "vulkan:0"


def chain(dev):
    a = vkml.tensor(np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64), device=dev)
    x = a @ a
    z = (x @ a).relu().sum(0)
    return a, x, z


def test_each_cut_ends_a_submission_once_its_outputs_are_computed_and_the_values_are_the_uncut_ones():
    dev = get_backend(DEV).device
    a, x, z = chain(DEV)
    seen = []
    s0 = dev.submitted
    realize(x, z, cuts=[([x], lambda s: seen.append(("x", s, x.node.buf is not None))),
                        ([z], lambda s: seen.append(("z", s, z.node.buf is not None)))])
    assert seen == [("x", s0 + 1, True), ("z", s0 + 2, True)]          # one submission each, in order
    _, x2, z2 = chain(DEV)
    s1 = dev.submitted                                                  # (a discrete GPU submits the upload of `a`)
    realize(x2, z2)                                                     # the same graph, not cut: one submission
    assert dev.submitted == s1 + 1
    np.testing.assert_array_equal(z.numpy(), z2.numpy())
    np.testing.assert_array_equal(x.numpy(), x2.numpy())


def test_cuts_of_computed_tensors_and_on_the_cpu_run_when_realize_is_done():
    _, x, _ = chain(DEV)
    realize(x)
    seen = []
    realize(x, cuts=[([x], seen.append)])                               # nothing to compute
    _, xc, zc = chain("cpu")
    realize(xc, zc, cuts=[([xc], seen.append), ([zc], seen.append)])     # the CPU does not submit
    assert seen == [None, None, None]


def test_a_cut_of_a_tensor_not_realized_or_on_two_devices_is_a_typed_error():
    _, x, z = chain(DEV)
    with pytest.raises(ArgumentError, match="every tensor of a cut"):
        realize(z, cuts=[([x], print)])
    _, xc, _ = chain("cpu")
    with pytest.raises(ArgumentError, match="one device"):
        realize(x, xc, cuts=[([x], print)])


def step_with_a_point(ahead: bool, seen: list, returns=False):
    "A jitted step cut after `h` by a host point that reads it."
    def step(x):
        h = x @ x
        g = h * 2
        notes = capture_in_progress()
        if notes is not None:
            def fn(arrays):
                seen.append(float(arrays[0].sum()))
                return [np.zeros(2, np.float32)] if returns else []
            realize(h, g, cuts=[([h], lambda s: notes.recording.host_point([h.node.buf], fn, "a point", ahead=ahead))])
        return (g + 1).sum()
    return vkml.jit(step)


@pytest.mark.parametrize("ahead", [True, False])
def test_a_replay_submits_the_segment_after_an_ahead_point_before_running_it(ahead):
    seen = []
    f = step_with_a_point(ahead, seen)
    x = lambda i: vkml.tensor(np.full((8, 8), i, np.float32), device=DEV)
    for i in range(3): f(x(i)).item()                                    # eager, captured, replayed
    cap = next(st.captured for caps in f.captures.values() for st in caps)
    cap.trace = []
    assert f(x(5)).item() == 2 * 8 * 8 * 8 * 25 + 64                     # the replay's values
    assert seen[-1] == 64 * 8 * 25                                       # the point read this replay's h
    kinds = [(e[0], e[1]) for e in cap.trace]
    if ahead: assert kinds == [("submit", 0), ("submit", 1), ("point", 1)], cap.trace
    else: assert kinds == [("submit", 0), ("point", 1), ("submit", 1)], cap.trace
    point = cap.trace[-1] if ahead else cap.trace[1]
    assert point[3] <= point[4] <= point[5]                              # waited, then ran


def test_an_ahead_point_that_returns_arrays_is_refused_at_the_capture():
    f = step_with_a_point(True, [], returns=True)
    f(vkml.ones((8, 8), device=DEV))
    with pytest.raises(JitError, match="ahead=True"):
        f(vkml.ones((8, 8), device=DEV))


def test_a_point_at_the_capture_reads_the_step_inputs_once_earlier_work_is_done():
    """Regression: at the capture a point read nothing's serial (`wait(self.last)`, 0 before the step's first
    submission) and, where memory is read in place, the static inputs before their copies were submitted: it read
    garbage, and a point that reads nothing (DistributedDataParallel's guard) ran while earlier work still read
    the shared buckets it guards."""
    from vkml.engine.jit import host_call
    dev = get_backend(DEV).device
    seen = []
    def step(x):
        notes = capture_in_progress()
        if notes is not None:                                            # a point that reads nothing
            notes.recording.host_point([], lambda arrays: (seen.append(("empty", dev.poll())), [])[1], "a guard")
        host_call(lambda arrays: (seen.append(("x", dev.poll(), arrays[0].tolist())), [])[1], [x], "a point")
        return x * 2
    f = vkml.jit(step)
    a = vkml.tensor(np.linspace(-1, 1, 1024 * 1024, dtype=np.float32).reshape(1024, 1024), device=DEV)
    a.numpy()
    for i in range(3):                                                   # eager, captured, replayed
        realize(a @ a @ a)                                               # in flight when the step begins
        before = dev.submitted
        seen.clear()
        x = vkml.tensor(np.arange(4, dtype=np.float32) + 10 * i, device=DEV)
        np.testing.assert_array_equal(f(x).numpy(), 2 * (np.arange(4) + 10 * i))
        assert [s[-1] for s in seen if s[0] == "x"] == [[10.0 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3]], seen
        if i: assert all(s[1] >= before for s in seen), (before, seen)  # captured, replayed: what came before was done
    assert len(f.captures) == 1
