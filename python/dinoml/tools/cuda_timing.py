"""GPU timing and kernel-time tables shared by the CUDA tools, checks and kernel harnesses
(benchmark-ops cuda, tests/gpu/run_device.py, gpt2_run.py, bench/cuda/*_bench.py): CUDA events
around back-to-back calls on the current stream or around replays of a captured CUDA graph, and
torch.profiler (CUPTI) kernel times, which also see the kernels of a replayed CUDA
graph and of a DinoML artifact running on the same stream.

Every function takes the `torch` module as its first argument, so importing this file needs no
PyTorch (the GPU machine's scripts pass theirs; the unit test passes a stand-in).
"""
from __future__ import annotations

import math
import statistics
from typing import Callable, Dict, List, Optional, Sequence


def event_samples(torch, fn: Callable[[], object], reps: int, inner: int, warm: int = 3) -> List[float]:
    """`reps` samples of ms per call: each sample times `inner` back-to-back calls between two CUDA
    events on the current stream (after `warm` untimed calls and a synchronize)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(inner):
            fn()
        e1.record()
        e1.synchronize()
        out.append(e0.elapsed_time(e1) / inner)
    return out


def cycling(fns: Sequence[Callable[[], object]]) -> Callable[[], object]:
    """One callable that calls fns[0], fns[1], ... in turn (several input sets keep L2 cold)."""
    state = {"i": 0}

    def call():
        fn = fns[state["i"] % len(fns)]
        state["i"] += 1
        return fn()
    return call


def capture_graph(torch, fns: Sequence[Callable[[], object]], calls: int):
    """One CUDA graph that makes `calls` calls cycling through `fns`, replayed once (warm). Warm-up
    and capture run on a side stream (libraries such as cuBLASLt set up their per-stream state
    before the capture)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns[:2]:
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    call = cycling(fns)
    with torch.cuda.graph(graph, stream=s):
        for _ in range(calls):
            call()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def replay_ms(torch, graph, calls: int) -> float:
    """ms per call of one replay of `graph` (which makes `calls` calls), between two events."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    graph.replay()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / calls


def graph_samples(torch, fns: Sequence[Callable[[], object]], calls: int, reps: int) -> List[float]:
    """`reps` samples of ms per call from replays of one CUDA graph that makes `calls` calls cycling
    through `fns` (capture_graph); each sample is one replay between two events."""
    graph = capture_graph(torch, fns, calls)
    out = [replay_ms(torch, graph, calls) for _ in range(reps)]
    del graph
    return out


def alternating_graph_samples(torch, fns: Dict[str, Sequence[Callable[[], object]]], calls: int,
                              rounds: int) -> Dict[str, List[float]]:
    """graph_samples for several methods (one graph each, `calls` calls cycling through its list)
    taken in alternating rounds, one replay of each per round, so a drift of the GPU's clocks or of
    the machine is shared by all of them."""
    graphs = {k: capture_graph(torch, f, calls) for k, f in fns.items()}
    out = {k: [] for k in fns}
    for _ in range(rounds):
        for k, g in graphs.items():
            out[k].append(replay_ms(torch, g, calls))
    del graphs
    return out


def alternating_samples(torch, fns: Dict[str, Callable[[], object]], rounds: int, inner: int,
                        warm: int = 3) -> Dict[str, List[float]]:
    """event_samples for several methods taken in alternating rounds (one sample of each per round),
    so a drift of the GPU's clocks or of the machine is shared by all of them."""
    for fn in fns.values():
        for _ in range(warm):
            fn()
    torch.cuda.synchronize()
    out = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            out[k] += event_samples(torch, fn, 1, inner, warm=0)
    return out


def spread(samples: Sequence[float]):
    """(median, min, max) of the samples."""
    return statistics.median(samples), min(samples), max(samples)


def median_ci95(samples: Sequence[float]):
    """(median, half-width of a 95 % normal-approximation interval of the mean) of the samples."""
    half = 1.96 * statistics.stdev(samples) / math.sqrt(len(samples)) if len(samples) > 1 else 0.0
    return statistics.median(samples), half


def kernel_table(torch, fn: Callable[[], object], runs: int = 2,
                 category: Optional[Callable[[str], str]] = None) -> dict:
    """Per-kernel device time of `fn` (torch.profiler / CUPTI), summed by kernel name over `runs`
    runs and divided by `runs`: {"total_us", "kernels": [{kernel, us_per_run, calls_per_run[,
    category]}] (slowest first), "categories": {category: us}} (categories only with `category`)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        if "CUDA" not in str(getattr(e, "device_type", "")):
            continue
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0)
        if us > 0:
            row = {"kernel": e.key[:160], "us_per_run": us / runs, "calls_per_run": e.count / runs}
            if category:
                row["category"] = category(e.key)
            rows.append(row)
    rows.sort(key=lambda r: -r["us_per_run"])
    out = {"total_us": sum(r["us_per_run"] for r in rows), "kernels": rows}
    if category:
        cats: Dict[str, float] = {}
        for r in rows:
            cats[r["category"]] = cats.get(r["category"], 0.0) + r["us_per_run"]
        out["categories"] = cats
    return out


def d2d_copy_bandwidth(torch, nbytes: int = 1 << 30, copies: int = 20) -> float:
    """The device-to-device copy yardstick of the bandwidth-bound kernels: `copies` eager copies of
    `nbytes` between CUDA events after 3 warm-ups, (bytes read + bytes written) per second."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(copies):
        dst.copy_(src)
    e1.record()
    e1.synchronize()
    bw = 2 * nbytes / (e0.elapsed_time(e1) / copies * 1e-3)
    del src, dst
    return bw
