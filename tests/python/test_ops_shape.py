"""Parity of shape and data-movement ops (docs/ops.md "Shape and data movement").

Every op runs over all eight dtypes (data movement must not care about the element type),
with static shapes and a dynamic dim B run at several sizes; results are compared exactly
against NumPy.  Also: trace-time errors must be clear (unknown attribute, shape mismatch).
"""
import re

import numpy as np
import pytest

import op_harness as H
from op_harness import Batch, Case, Gen, Inp

B_DIM = {"B": dict(min=1, max=6, typical=3, buckets=[2, 6])}
B_RUNS = [{"B": b} for b in (1, 2, 5)]
TO_END = 2 ** 31  # docs/ops.md: an end >= 2^31 means "to the end"


def _gen(dtype):
    if dtype == "uint8":
        return Gen(0, 100)
    return Gen(-100, 100) if dtype in H.INT_DTYPES else Gen(-2, 2)


def _torch():
    import torch
    return torch


def _unary(dtype, tag, shape, build, oracle, torch=None):
    return Case(f"{tag}-{dtype}", {"x": Inp(shape, dtype, _gen(dtype))},
                lambda ops, t: build(ops, t["x"]), lambda x: oracle(x["x"]), dtype, exact=True,
                torch=(lambda x: torch(x["x"])) if torch else None)


def _view_cases(dt):
    u = lambda *a, **k: _unary(dt, *a, **k)  # noqa: E731
    return [
        u("reshape-static", (2, 3, 4), lambda o, x: o.reshape(x, shape=[4, 6]), lambda x: x.reshape(4, 6)),
        u("reshape-neg1", (2, 3, 4), lambda o, x: o.reshape(x, shape=[6, -1]), lambda x: x.reshape(6, -1)),
        u("reshape-dyn", ("B", 6, 4), lambda o, x: o.reshape(x, shape=[-1, 24]), lambda x: x.reshape(-1, 24)),
        u("reshape-dyn-split", ("B", 12), lambda o, x: o.reshape(x, shape=[-1, 3, 4]),
          lambda x: x.reshape(-1, 3, 4)),
        u("flatten-default", ("B", 3, 4), lambda o, x: o.flatten(x), lambda x: x.reshape(-1),
          torch=lambda x: x.flatten()),
        u("flatten-start1", ("B", 3, 4, 2), lambda o, x: o.flatten(x, start_dim=1),
          lambda x: x.reshape(x.shape[0], -1), torch=lambda x: x.flatten(1)),
        u("flatten-0to1", ("B", 3, 4), lambda o, x: o.flatten(x, start_dim=0, end_dim=1),
          lambda x: x.reshape(-1, 4), torch=lambda x: x.flatten(0, 1)),
        u("flatten-neg", (2, 3, 4, 5), lambda o, x: o.flatten(x, start_dim=-3, end_dim=-2),
          lambda x: x.reshape(2, 12, 5), torch=lambda x: x.flatten(-3, -2)),
        u("squeeze-default", (1, 3, 1, 4), lambda o, x: o.squeeze(x), lambda x: x.reshape(3, 4)),
        u("squeeze-ax2", (1, 3, 1, 4), lambda o, x: o.squeeze(x, axes=[2]), lambda x: x.reshape(1, 3, 4)),
        u("squeeze-neg", (3, 1, 4), lambda o, x: o.squeeze(x, axes=[-2]), lambda x: x.reshape(3, 4)),
        # A dynamic extent is never squeezed by default, even when it is 1 at run time.
        u("squeeze-dyn", ("B", 1, 4), lambda o, x: o.squeeze(x), lambda x: np.squeeze(x, axis=1)),
        u("unsqueeze-0", ("B", 4), lambda o, x: o.unsqueeze(x, axes=[0]), lambda x: np.expand_dims(x, 0)),
        u("unsqueeze-neg", (3, 4), lambda o, x: o.unsqueeze(x, axes=[-1]), lambda x: np.expand_dims(x, -1)),
        u("unsqueeze-1_3", (3, 4), lambda o, x: o.unsqueeze(x, axes=[1, 3]),
          lambda x: np.expand_dims(x, (1, 3))),
    ]


def _movement_cases(dt):
    u = lambda *a, **k: _unary(dt, *a, **k)  # noqa: E731
    g = _gen(dt)
    return [
        u("permute-201", ("B", 3, 4), lambda o, x: o.permute(x, dims=[2, 0, 1]), lambda x: x.transpose(2, 0, 1),
          torch=lambda x: x.permute(2, 0, 1)),
        u("permute-0213", (2, 3, 4, 5), lambda o, x: o.permute(x, dims=[0, 2, 1, 3]),
          lambda x: x.transpose(0, 2, 1, 3)),
        u("permute-neg", ("B", 3, 4), lambda o, x: o.permute(x, dims=[-1, 0, 1]), lambda x: x.transpose(2, 0, 1)),
        u("transpose-0m1", ("B", 3, 4), lambda o, x: o.transpose(x, dim0=0, dim1=-1),
          lambda x: np.swapaxes(x, 0, -1), torch=lambda x: x.transpose(0, -1)),
        u("transpose-12", (2, 5, 7), lambda o, x: o.transpose(x, dim0=1, dim1=2), lambda x: np.swapaxes(x, 1, 2)),
        Case(f"concatenate-ax1-{dt}", {"a": Inp(("B", 2, 4), dt, g), "b": Inp(("B", 3, 4), dt, g)},
             lambda o, t: o.concatenate([t["a"], t["b"]], axis=1),
             lambda x: np.concatenate([x["a"], x["b"]], axis=1), dt, exact=True),
        Case(f"concatenate-axm1-3in-{dt}",
             {"a": Inp((2, 3), dt, g), "b": Inp((2, 1), dt, g), "c": Inp((2, 4), dt, g)},
             lambda o, t: o.concatenate([t["a"], t["b"], t["c"]], axis=-1),
             lambda x: np.concatenate([x["a"], x["b"], x["c"]], axis=-1), dt, exact=True),
        Case(f"concatenate-ax0dyn-{dt}", {"a": Inp(("B", 4), dt, g), "b": Inp((3, 4), dt, g)},
             lambda o, t: o.concatenate([t["a"], t["b"]]),
             lambda x: np.concatenate([x["a"], x["b"]], axis=0), dt, exact=True),
        u("split-ax1", ("B", 6, 4), lambda o, x: o.split(x, sizes=[2, 3, 1], axis=1),
          lambda x: tuple(np.split(x, [2, 5], axis=1))),
        u("split-axm1", (2, 4), lambda o, x: o.split(x, sizes=[1, 3], axis=-1),
          lambda x: tuple(np.split(x, [1], axis=-1))),
        u("split-ax0", (2, 5), lambda o, x: o.split(x, sizes=[1, 1]), lambda x: tuple(np.split(x, [1], axis=0))),
        u("slice-step2", ("B", 10, 6), lambda o, x: o.slice(x, starts=[1], ends=[9], axes=[1], steps=[2]),
          lambda x: x[:, 1:9:2]),
        u("slice-neg-to_end", ("B", 10, 6), lambda o, x: o.slice(x, starts=[-3], ends=[TO_END], axes=[-1]),
          lambda x: x[..., -3:]),
        u("slice-clamp", ("B", 10, 6), lambda o, x: o.slice(x, starts=[2, 0], ends=[100, -1], axes=[1, 2]),
          lambda x: x[:, 2:100, 0:-1]),
        u("slice-default_axes", (4, 5), lambda o, x: o.slice(x, starts=[1, 0], ends=[3, 5]), lambda x: x[1:3, 0:5]),
        u("slice-dyn_axis", ("B", 10, 6), lambda o, x: o.slice(x, starts=[0], ends=[1], axes=[0]), lambda x: x[0:1]),
        # symbolic bounds: the first B rows of a fixed buffer (position ids sliced to seq), and
        # [B - 1 : B] of a B-long axis; B stays within the extent for every value of the dim
        Case(f"slice-sym_end-{dt}", {"x": Inp(("B", 3), dt, _gen(dt)), "buf": Inp((8, 3), dt, _gen(dt))},
             lambda o, t: o.slice(t["buf"], starts=[0], ends=[t["x"].shape[0]], axes=[0]),
             lambda x: x["buf"][: x["x"].shape[0]], dt, exact=True),
        u("slice-sym_start", ("B", 4), lambda o, x: o.slice(x, starts=[x.shape[0] - 1], ends=[x.shape[0]], axes=[0]),
          lambda x: x[x.shape[0] - 1:]),
        u("slice-neg-step3", (2, 10), lambda o, x: o.slice(x, starts=[-9], ends=[-1], axes=[1], steps=[3]),
          lambda x: x[:, -9:-1:3]),
        u("expand-keep", ("B", 1, 4), lambda o, x: o.expand(x, shape=[-1, 3, 4]),
          lambda x: np.broadcast_to(x, (x.shape[0], 3, 4))),
        u("expand-rank_up", (4,), lambda o, x: o.expand(x, shape=[2, 3, 4]), lambda x: np.broadcast_to(x, (2, 3, 4))),
        u("expand-2d", (3, 1), lambda o, x: o.expand(x, shape=[2, 3, 5]), lambda x: np.broadcast_to(x, (2, 3, 5))),
    ]


def _pad_value(dt):
    return 1.0 if dt == "bool" else 3.0 if dt in H.INT_DTYPES else 1.5


def _pad_cases(dt):
    u = lambda *a, **k: _unary(dt, *a, **k)  # noqa: E731
    v = _pad_value(dt)
    npv = bool(v) if dt == "bool" else v
    return [
        u("pad-constant", ("B", 3, 4), lambda o, x: o.pad(x, pads=[0, 1, 2, 0, 2, 1], mode="constant", value=v),
          lambda x: np.pad(x, ((0, 0), (1, 2), (2, 1)), mode="constant", constant_values=npv)),
        u("pad-constant-default", (3, 4), lambda o, x: o.pad(x, pads=[1, 1, 1, 1]),
          lambda x: np.pad(x, ((1, 1), (1, 1)))),
        u("pad-reflect", (2, 4, 5), lambda o, x: o.pad(x, pads=[0, 1, 2, 0, 2, 3], mode="reflect"),
          lambda x: np.pad(x, ((0, 0), (1, 2), (2, 3)), mode="reflect")),
        u("pad-edge", ("B", 3, 4), lambda o, x: o.pad(x, pads=[0, 2, 1, 0, 0, 3], mode="edge"),
          lambda x: np.pad(x, ((0, 0), (2, 0), (1, 3)), mode="edge")),
    ]


def _index_cases(dt):
    g = _gen(dt)
    cases = []
    for it in ("int32", "int64"):
        cases.append(Case(f"embedding-{it}-{dt}", {"i": Inp(("B", 5), it, Gen(0, 9)), "w": Inp((10, 8), dt, g)},
                          lambda o, t: o.embedding(t["i"], t["w"]), lambda x: x["w"][x["i"]], dt, exact=True,
                          torch=lambda x: _torch().nn.functional.embedding(x["i"].long(), x["w"])))
    # Negative indices wrap (NumPy take / ONNX Gather).
    cases += [
        Case(f"gather-ax0-int64-{dt}", {"x": Inp((5, 6), dt, g), "i": Inp((2, 3), "int64", Gen(-5, 4))},
             lambda o, t: o.gather(t["x"], t["i"], axis=0), lambda x: np.take(x["x"], x["i"] % 5, axis=0), dt,
             exact=True),
        Case(f"gather-ax1-int32-{dt}", {"x": Inp(("B", 6, 3), dt, g), "i": Inp((4,), "int32", Gen(-6, 5))},
             lambda o, t: o.gather(t["x"], t["i"], axis=1), lambda x: np.take(x["x"], x["i"] % 6, axis=1), dt,
             exact=True),
        Case(f"gather-axm1-int64-{dt}", {"x": Inp((3, 4, 5), dt, g), "i": Inp((2,), "int64", Gen(-5, 4))},
             lambda o, t: o.gather(t["x"], t["i"], axis=-1), lambda x: np.take(x["x"], x["i"] % 5, axis=-1), dt,
             exact=True),
    ]
    return cases


def _creation_cases(dt):
    cases = []
    if dt != "bool":
        if dt in H.FLOAT_DTYPES:
            variants = (("frac", 0.5, 3.0, 0.25), ("neg_step", 2.0, -1.0, -0.5))
        else:
            variants = (("step3", 2, 11, 3), ("neg_step", 10, 0, -3) if dt != "uint8" else ("to9", 0, 9, 1))
        for tag, a, b, s in variants:
            cases.append(Case(f"arange-{tag}-{dt}", {},
                              lambda o, t, a=a, b=b, s=s: o.arange(start=a, end=b, step=s, dtype=dt),
                              lambda x, a=a, b=b, s=s: np.arange(a, b, s).astype(np.float64), dt, exact=True))
    if dt == "int64":
        cases.append(Case("arange-defaults", {}, lambda o, t: o.arange(end=5), lambda x: np.arange(5), "int64"))
    if dt in ("int64", "float32"):
        # symbolic length: as many elements as x has rows (the batch dim), start + i * step
        cases.append(Case(f"arange-length-{dt}", {"x": Inp(("B", 2), dt, _gen(dt))},
                          lambda o, t: o.arange(start=3, step=2, length=[t["x"].shape[0]], dtype=dt),
                          lambda x: 3 + 2 * np.arange(x["x"].shape[0], dtype=np.float64), dt, exact=True))
    v = _pad_value(dt)
    cases.append(Case(f"full-{dt}", {}, lambda o, t: o.full(shape=[2, 3], value=v, dtype=dt),
                      lambda x: np.full((2, 3), bool(v) if dt == "bool" else v), dt, exact=True))
    return cases


def shape_batch(dt):
    cases = _view_cases(dt) + _movement_cases(dt) + _pad_cases(dt) + _index_cases(dt) + _creation_cases(dt)
    return Batch(f"shape-{dt}", cases, dims=B_DIM, runs=B_RUNS)


BATCHES = [shape_batch(dt) for dt in H.ALL_DTYPES]

# Known failures: case id (or 'id@B=..') -> reason; see KNOWN_FAILURES.md.
XFAIL = {}


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES, XFAIL))
def test_shape_parity(batch, case, run, tmp_path_factory):
    H.check(batch, case, run, "compiled", tmp_path_factory)


def test_shape_results_known_before_compile():
    """Shape inference runs while tracing: x.shape is available on traced tensors."""
    seen = {}

    def fn(ops, t):
        y = ops.concatenate([t["a"], t["b"]], axis=1)
        seen["shape"] = y.shape
        return ops.output(y, "y")

    H.api_trace(fn, {"a": ((2, 3), "float32"), "b": ((2, 4), "float32")})
    assert [int(s) for s in seen["shape"]] == [2, 7]


# ---- trace-time errors --------------------------------------------------------------------------

def _trace_error(fn, inputs):
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(H._as_tuple(fn(ops, t))[0], "y"), inputs)
    return str(ei.value)


def test_unknown_attribute_names_it():
    msg = _trace_error(lambda o, t: o.permute(t["x"], dims=[1, 0], perm=[1, 0]), {"x": ((2, 3), "float32")})
    assert "permute" in msg and re.search(r"\bperm\b", msg), msg


def test_unknown_attribute_on_generated_op_names_it():
    msg = _trace_error(lambda o, t: o.gemm_rcr(t["a"], t["b"], alpha=2.0),
                       {"a": ((2, 3), "float32"), "b": ((4, 3), "float32")})
    assert "gemm_rcr" in msg and re.search(r"\balpha\b", msg), msg


def test_missing_required_attribute_names_it():
    # sizes=None drops the attribute, so the registry's required-attribute check must speak.
    msg = _trace_error(lambda o, t: o.split(t["x"], sizes=None), {"x": ((4,), "float32")})
    assert "split" in msg and "sizes" in msg, msg


def test_reshape_size_mismatch():
    msg = _trace_error(lambda o, t: o.reshape(t["x"], shape=[4, 2]), {"x": ((2, 3), "float32")})
    assert "reshape" in msg and ("6" in msg or "8" in msg), msg


def test_concatenate_extent_mismatch():
    msg = _trace_error(lambda o, t: o.concatenate([t["a"], t["b"]], axis=0),
                       {"a": ((2, 3), "float32"), "b": ((2, 4), "float32")})
    assert "concatenate" in msg and "3" in msg and "4" in msg, msg


def test_concatenate_dtype_mismatch():
    msg = _trace_error(lambda o, t: o.concatenate([t["a"], t["b"]], axis=0),
                       {"a": ((2, 3), "float32"), "b": ((2, 3), "int32")})
    assert "concatenate" in msg, msg


def test_split_sizes_must_sum_to_extent():
    msg = _trace_error(lambda o, t: o.split(t["x"], sizes=[2, 2], axis=1), {"x": ((2, 5), "float32")})
    assert "split" in msg and "5" in msg, msg


def test_slice_rejects_non_positive_step():
    msg = _trace_error(lambda o, t: o.slice(t["x"], starts=[0], ends=[2], steps=[0]), {"x": ((4,), "float32")})
    assert "slice" in msg and "step" in msg, msg


def test_slice_symbolic_end_beyond_the_extent_is_refused():
    """x[:B] of a 4-row buffer while B may reach 6: NumPy would clamp, which no symbolic extent
    expresses, so the trace fails and names the bound and the extent."""
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.slice(t["buf"], starts=[0], ends=[t["x"].shape[0]], axes=[0]), "y"),
                    {"x": (("B", 2), "float32"), "buf": ((4, 2), "float32")}, dims=B_DIM)
    msg = str(ei.value)
    assert "slice end 'B'" in msg and "[0, 4]" in msg, msg


def test_permute_rejects_non_permutation():
    msg = _trace_error(lambda o, t: o.permute(t["x"], dims=[0, 0]), {"x": ((2, 3), "float32")})
    assert "permute" in msg, msg


def test_gather_axis_out_of_range():
    msg = _trace_error(lambda o, t: o.gather(t["x"], t["i"], axis=2),
                       {"x": ((2, 3), "float32"), "i": ((2,), "int64")})
    assert "gather" in msg and "axis" in msg, msg


def test_embedding_rejects_float_indices():
    msg = _trace_error(lambda o, t: o.embedding(t["i"], t["w"]),
                       {"i": ((2,), "float32"), "w": ((4, 3), "float32")})
    assert "embedding" in msg, msg
