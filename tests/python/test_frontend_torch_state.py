"""Buffers the forward writes become session states (dinoml.frontends.torch, issue 38): a counter,
a running mean, KV caches written with index_copy_ / slice assignment / select assignment /
masked assignment, compiled for the CPU and run three times in one session against the eager
module run the same inputs; the states (by the buffers' module paths) match the eager buffers
after every run, reset_states restores the export-time values; writes that cannot become state
(an input, a parameter, a buffer changing its shape or dtype) are one clear error."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import dinoml as dml  # noqa: E402
from dinoml.frontends.torch import TorchConversionError  # noqa: E402


def _flat(out):
    if isinstance(out, torch.Tensor):
        return {"out": out}
    return {f"out.{i}": v for i, v in enumerate(out)}


def _check(got, want, name, rtol=1e-5):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    scale = max(float(np.abs(want).max()) if want.size else 0.0, 1.0)
    err = float(np.abs(got - want).max()) if want.size else 0.0
    assert err <= rtol * scale, f"{name}: max |err| {err:.3g} (max |ref| {scale:.3g})"


def _compile(tmp_path, model, args, **kw):
    model.eval()
    return dml.compile_torch(model, args, target="cpu", out=str(tmp_path / "art"), **kw)


def _runs(mod, model, runs, mutated):
    """Runs `runs` through one session and through a copy of the eager module side by side;
    outputs and the mutated buffers' states must agree after every run."""
    ref = copy.deepcopy(model)
    sess = mod.create_session()
    names = [i.name for i in mod.inputs]
    for run in runs:
        with torch.no_grad():
            want = _flat(ref(*run))
        got = sess.run_torch(dict(zip(names, run)))
        assert set(got) == set(want), (sorted(got), sorted(want))
        for k in want:
            _check(got[k].float().numpy(), want[k].float().numpy(), k)
        bufs = dict(ref.named_buffers())
        for b in mutated:
            _check(sess.get_state(b), bufs[b].float().numpy(), f"state {b}")
    return sess, ref


class Counter(torch.nn.Module):
    """An int64 step counter (rank 0) and a float one; a read-only buffer stays a constant."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("scale", torch.full((4,), 0.5))
        self.register_buffer("t", torch.zeros(1), persistent=False)

    def forward(self, x):
        self.steps += 1
        self.t.add_(0.25)
        return self.lin(x) * self.steps * self.scale + self.t, self.steps.clone()


def test_counter_carries_between_runs(tmp_path):
    torch.manual_seed(0)
    m = Counter()
    mod = _compile(tmp_path, m, (torch.randn(2, 4),))
    assert sorted(s.name for s in mod.states) == ["steps", "t"]  # zero-initialised: no flag state
    assert [i.name for i in mod.inputs] == ["x"] and [o.name for o in mod.outputs] == ["out.0", "out.1"]
    assert {s.name: s.dtype for s in mod.states}["steps"] == "int64"
    assert m.steps.item() == 0  # exporting does not run the forward on the module
    runs = [(torch.randn(2, 4),) for _ in range(3)]
    sess, ref = _runs(mod, m, runs, ["steps", "t"])
    assert int(sess.get_state("steps")) == 3
    sess.reset_states()
    _check(sess.run_torch({"x": runs[0][0]})["out.1"].numpy(), np.array(1), "steps after reset")


class RunningMean(torch.nn.Module):
    """Running statistics with non-zero initial values (ones, 2.0): an exponential moving mean
    and a running max, written with in-place mul_/add_ and copy_."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.ones(4))
        self.register_buffer("peak", torch.full((4,), 2.0))
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls = self.calls + 1  # rebinding a root-module buffer: export writes it back
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        self.peak.copy_(torch.maximum(self.peak, x.amax(0)))
        return (x - self.mean) / self.peak


def test_running_mean_starts_from_export_time_value(tmp_path):
    torch.manual_seed(1)
    m = RunningMean()
    mod = _compile(tmp_path, m, (torch.randn(3, 4),))
    assert sorted(s.name for s in mod.states) == ["calls", "dinoml.initialized", "mean", "peak"]
    runs = [(torch.randn(3, 4) * (i + 1),) for i in range(3)]
    sess, _ = _runs(mod, m, runs, ["mean", "peak", "calls"])
    assert float(sess.get_state("calls")) == 3
    # reset_states zeroes every state, the flag included: the next run starts from the initial values.
    sess.reset_states()
    _runs_after_reset = copy.deepcopy(m)
    with torch.no_grad():
        want = _runs_after_reset(*runs[0])
    _check(sess.run_torch({"x": runs[0][0]})["out"].numpy(), want.numpy(), "after reset")
    _check(sess.get_state("mean"), _runs_after_reset.mean.numpy(), "mean after reset")


class Attn(torch.nn.Module):
    """One attention head with a KV cache: k written with index_copy_ on [B, S, D] (in place),
    v with `v[:, pos] = ...` on [B, S, H, Dh] (a row write on a [B, S, H*Dh] view); attends over
    the rows up to the last position written (a prefill of T rows, then decode steps)."""

    def __init__(self, d=8, ctx=6):
        super().__init__()
        self.q = torch.nn.Linear(d, d)
        self.kv = torch.nn.Linear(d, 2 * d)
        self.register_buffer("k_cache", torch.zeros(1, ctx, d))
        self.register_buffer("v_cache", torch.zeros(1, ctx, 2, d // 2))
        self.register_buffer("seen", torch.zeros((), dtype=torch.int32))

    def forward(self, x, pos):
        self.seen += x.shape[1]  # in place inside a submodule
        k, v = self.kv(x).chunk(2, -1)
        self.k_cache.index_copy_(1, pos, k)
        self.v_cache[:, pos] = v.reshape(1, -1, 2, self.v_cache.shape[-1])
        scores = self.q(x) @ self.k_cache.transpose(1, 2) / 8 ** 0.5
        ctx = torch.arange(self.k_cache.shape[1])
        scores = scores.masked_fill(ctx[None, None, :] > pos[-1], float("-inf"))
        return scores.softmax(-1) @ self.v_cache.flatten(2)


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Attn(), Attn()])

    def forward(self, x, pos):
        for layer in self.layers:
            x = x + layer(x, pos)
        return x


def test_kv_cache_decoder(tmp_path):
    torch.manual_seed(2)
    m = Decoder()
    t = torch.export.Dim("t", min=1, max=4)  # rows written per run: a prefill, then decode steps
    mod = _compile(tmp_path, m, (torch.randn(1, 2, 8), torch.tensor([0, 1])),
                   dynamic_shapes={"x": {1: t}, "pos": {0: t}})
    names = sorted(s.name for s in mod.states)
    assert names == ["layers.0.k_cache", "layers.0.seen", "layers.0.v_cache", "layers.1.k_cache", "layers.1.seen",
                     "layers.1.v_cache"]
    runs = [(torch.randn(1, 3, 8), torch.tensor([0, 1, 2])), (torch.randn(1, 1, 8), torch.tensor([3])),
            (torch.randn(1, 2, 8), torch.tensor([4, 5]))]
    _runs(mod, m, runs, names)
    # The index_copy_ on the [B, S, D] cache is a kv_cache_write updated in place in the state.
    import json
    g = json.load(open(tmp_path / "art" / "graph.dinoir.json"))
    views = {t["name"]: t.get("view_of") for t in g["tensors"]}
    writes = [n for n in g["nodes"] if n["op"] == "kv_cache_write" and views.get(n["outputs"][0]) in names]
    assert {views[n["outputs"][0]] for n in writes} >= {"layers.0.k_cache", "layers.1.k_cache"}


class Prefill(torch.nn.Module):
    """A dynamic-length prefill into a static cache (`cache[:, :seq] = x`), then static slice,
    select and masked assignments and zero_ on a scratch buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 8, 3))
        self.register_buffer("scratch", torch.ones(2, 5))

    def forward(self, x):
        self.cache[:, : x.shape[1]] = x
        self.cache[:, -1] = self.cache[:, -1] + 1
        self.scratch[:, 1:3] = x[:, :2, 0] * 2
        self.scratch[self.scratch > 3] = -1.0
        y = self.cache.sum(1) + self.scratch.sum(1, keepdim=True)
        self.scratch.zero_()
        self.scratch[0] = y[0, :1]
        return y


def test_slice_select_and_mask_writes(tmp_path):
    torch.manual_seed(3)
    m = Prefill()
    seq = torch.export.Dim("seq", min=3, max=7)
    mod = _compile(tmp_path, m, (torch.randn(2, 4, 3),), dynamic_shapes={"x": {1: seq}})
    runs = [(torch.randn(2, s, 3) * 2,) for s in (4, 3, 7)]
    _runs(mod, m, runs, ["cache", "scratch"])


class _Convert(torch.nn.Module):
    """index_put / slice_scatter / select_scatter / copy as pure functions (no state)."""

    def forward(self, x, idx, y):
        a = x.clone()
        a[idx] = y[: idx.shape[0]]                             # rows of axis 0, 1-d index
        b = x.clone()
        b[:, idx[:2]] = x[:, :1] * 3                           # axis 1 (the last): an [N, 1] view
        c = torch.slice_scatter(x, y[:, :2] + 1, 1, 1, 3)      # columns 1..2
        d = torch.select_scatter(x, y[0], 0, -1)               # last row
        e = x.clone()
        e[idx.reshape(1, -1)] = 7.0                            # 2-d index, broadcast value
        return a, b, c, d, e


def test_write_converters_against_eager(tmp_path):
    torch.manual_seed(4)
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    idx = torch.tensor([3, -1, 0])
    mod = _compile(tmp_path, _Convert(), (x, idx, y))
    got = mod.create_session().run_torch({"x": x, "idx": idx, "y": y})
    want = _flat(_Convert()(x, idx, y))
    for k in want:
        _check(got[k].numpy(), want[k].numpy(), k)


# ---- what cannot become state ----------------------------------------------------------------------
class _InputWrite(torch.nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.w.add_(1)
        return x * self.w


class _ParamWrite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = _Inner()

    def forward(self, x):
        return self.block(x)


class _DtypeWrite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x):
        self.acc = self.acc.double() + x
        return self.acc.float()


class _ShapeWrite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("history", torch.zeros(2))

    def forward(self, x):
        self.history = torch.cat([self.history, x])
        return self.history.sum()


class _Rebind(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(2))

    def forward(self, x):
        self.total = self.total + x  # rebinding: kept by export only at the root module
        return self.total * 2


class _NestedRebind(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.acc = _Rebind()

    def forward(self, x):
        return self.acc(x)


@pytest.mark.parametrize("model, x, words", [
    (_NestedRebind(), torch.ones(2), ["buffer 'acc.total' of module acc", "rebound", "copy_",
                                      "self.total = self.total + x"]),
    (_InputWrite(), torch.ones(3), ["input 'x'", "read-only", "x.mul_(2)"]),
    (_ParamWrite(), torch.ones(3), ["parameter 'block.w' of module block", "register_buffer", "self.w.add_(1)"]),
    (_DtypeWrite(), torch.ones(3, dtype=torch.float64), ["buffer 'acc'", "float32[3]", "float64[3]"]),
    (_ShapeWrite(), torch.ones(1), ["buffer 'history'", "shape [3]", "torch.cat"]),
])
def test_writes_that_cannot_be_state(model, x, words):
    with pytest.raises(TorchConversionError) as e:
        dml.from_torch(model, (x,))
    msg = str(e.value)
    for w in words:
        assert w in msg, (w, msg)


def test_saved_program_states_through_the_reference_interpreter(tmp_path):
    # A .pt2 keeps the buffer writes; the Spec's states carry them in the reference interpreter too.
    from dinoml.frontends.torch import export, from_exported_program
    from dinoml.reference import reference
    torch.manual_seed(5)
    m = RunningMean()
    x0 = torch.randn(3, 4)
    torch.export.save(export(m, (x0,)), str(tmp_path / "m.pt2"))
    spec = from_exported_program(torch.export.load(str(tmp_path / "m.pt2")))
    assert sorted(t["name"] for t in spec.states) == ["calls", "dinoml.initialized", "mean", "peak"]
    ref, states = copy.deepcopy(m), None
    for i in range(3):
        x = torch.randn(3, 4)
        with torch.no_grad():
            want = ref(x)
        outs, states = reference(spec, {"x": x.numpy()}, states=states, return_states=True)
        _check(outs["out"], want.numpy(), f"run {i}")
        _check(states["mean"], ref.mean.numpy(), f"mean after run {i}")
