"""python/dinoml/tools/cuda_timing.py (the GPU tools' event timing) against a stand-in for
torch.cuda whose clock advances by a known amount per call: the samples must be exactly the
per-call time, warm-up calls untimed, methods interleaved per round. On the GPU the same code runs
under scripts/gpu-check bench-ops / gpt2-run and tests/gpu/run_device.py."""
from __future__ import annotations

import os
import sys
import types

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "dinoml", "tools"))
import cuda_timing  # noqa: E402


def fake_torch():
    clock = {"ms": 0.0, "syncs": 0}

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.t = None

        def record(self):
            self.t = clock["ms"]

        def synchronize(self):
            assert self.t is not None

        def elapsed_time(self, other):
            return other.t - self.t

    def synchronize():
        clock["syncs"] += 1

    cuda = types.SimpleNamespace(Event=Event, synchronize=synchronize)
    return types.SimpleNamespace(cuda=cuda), clock


def test_event_samples_are_the_time_per_call():
    torch, clock = fake_torch()
    calls = []

    def fn():
        calls.append(clock["ms"])
        clock["ms"] += 0.25

    s = cuda_timing.event_samples(torch, fn, reps=4, inner=8, warm=3)
    assert s == [0.25] * 4
    assert len(calls) == 3 + 4 * 8 and clock["syncs"] == 1


def test_alternating_samples_interleave_methods():
    torch, clock = fake_torch()
    order = []

    def make(name, ms):
        def fn():
            order.append(name)
            clock["ms"] += ms
        return fn

    out = cuda_timing.alternating_samples(torch, {"a": make("a", 1.0), "b": make("b", 3.0)}, rounds=3, inner=2, warm=1)
    assert out == {"a": [1.0] * 3, "b": [3.0] * 3}
    assert order == ["a", "b"] + ["a", "a", "b", "b"] * 3


def test_spread_and_interval():
    assert cuda_timing.spread([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    med, half = cuda_timing.median_ci95([1.0, 1.0, 1.0])
    assert med == 1.0 and half == 0.0
    med, half = cuda_timing.median_ci95([1.0, 3.0])
    assert med == 2.0 and half == pytest.approx(1.96 * 2 ** 0.5 / 2 ** 0.5)
    assert cuda_timing.median_ci95([5.0]) == (5.0, 0.0)


def fake_torch_with_graphs():
    """fake_torch plus streams and CUDA graphs: a call made while a graph captures is recorded in
    the graph (not run); a replay runs what was recorded."""
    torch, clock = fake_torch()
    clock["capture"] = None

    class Stream:
        def wait_stream(self, other):
            pass

    class CUDAGraph:
        def __init__(self):
            self.ops = []

        def replay(self):
            for ms in self.ops:
                clock["ms"] += ms

    class _Ctx:
        def __init__(self, enter=None, leave=None):
            self.enter, self.leave = enter, leave

        def __enter__(self):
            if self.enter:
                self.enter()

        def __exit__(self, *exc):
            if self.leave:
                self.leave()

    def graph(g, stream=None):
        return _Ctx(lambda: clock.__setitem__("capture", g), lambda: clock.__setitem__("capture", None))

    torch.cuda.Stream = Stream
    torch.cuda.current_stream = lambda: Stream()
    torch.cuda.stream = lambda s: _Ctx()
    torch.cuda.CUDAGraph = CUDAGraph
    torch.cuda.graph = graph
    return torch, clock


def test_graph_samples_time_one_replay_per_sample_cycling_the_inputs():
    torch, clock = fake_torch_with_graphs()
    order = []

    def make(name, ms):
        def fn():
            order.append(name)
            if clock["capture"] is not None:
                clock["capture"].ops.append(ms)
            else:
                clock["ms"] += ms
        return fn

    s = cuda_timing.graph_samples(torch, [make("a", 1.0), make("b", 3.0)], calls=4, reps=5)
    assert s == [pytest.approx(2.0)] * 5  # (1 + 3 + 1 + 3) / 4 per replay
    assert order == ["a", "b"] + ["a", "b", "a", "b"]  # warm-up of the first two, then the capture


def test_alternating_graph_samples_interleave_replays():
    torch, clock = fake_torch_with_graphs()
    order = []

    def make(name, ms):
        def fn():
            if clock["capture"] is not None:
                clock["capture"].ops.append(ms)
                order.append(name + "@capture")
            else:
                clock["ms"] += ms
        return fn

    out = cuda_timing.alternating_graph_samples(torch, {"a": [make("a", 1.0), make("a", 2.0)], "b": [make("b", 4.0)]},
                                                calls=2, rounds=3)
    assert out == {"a": [pytest.approx(1.5)] * 3, "b": [pytest.approx(4.0)] * 3}
    assert order == ["a@capture"] * 2 + ["b@capture"] * 2


def test_cycling_calls_in_turn():
    seen = []
    call = cuda_timing.cycling([lambda: seen.append(0), lambda: seen.append(1), lambda: seen.append(2)])
    for _ in range(7):
        call()
    assert seen == [0, 1, 2, 0, 1, 2, 0]
