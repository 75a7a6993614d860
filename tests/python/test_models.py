"""Whole models against PyTorch: the 2-layer MLP and the transformer encoder block of
examples/, compiled with dynamic batch and seq, checked at every bucket boundary (fp32, 1e-4),
plus what the artifact says about fusion and memory planning."""
from __future__ import annotations

import re

import numpy as np
import pytest

import dinoml as dml
from dinoml.testing import deterministic, dim_grid

torch = pytest.importorskip("torch")

import mlp  # noqa: E402  examples/mlp.py
import transformer_block  # noqa: E402  examples/transformer_block.py

TOL = 1e-4


def _torch_state(consts):
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in consts.items()}


@pytest.fixture(scope="module")
def mlp_case(tmp_path_factory):
    consts = mlp.make_constants(seed=3)
    ref = torch.nn.Sequential(torch.nn.Linear(mlp.IN_FEATURES, mlp.HIDDEN), torch.nn.GELU(),
                              torch.nn.Linear(mlp.HIDDEN, mlp.OUT_FEATURES)).eval()
    ref.load_state_dict(_torch_state(consts))
    art = dml.compile(mlp.build_spec(consts), target="cpu", out=str(tmp_path_factory.mktemp("models") / "mlp"))
    return art, ref


@pytest.fixture(scope="module")
def transformer_case(tmp_path_factory):
    torch.manual_seed(0)
    ref = torch.nn.TransformerEncoderLayer(transformer_block.D_MODEL, transformer_block.NHEAD,
                                           dim_feedforward=transformer_block.DIM_FF, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=False).eval()
    with torch.no_grad():  # non-trivial norm parameters, so a swapped weight/bias would show
        ref.norm1.weight.uniform_(0.5, 1.5)
        ref.norm2.bias.uniform_(-0.2, 0.2)
    # The torch state_dict is passed as is: names and shapes must match dml.nn's.
    spec = transformer_block.build_spec(ref.state_dict())
    art = dml.compile(spec, target="cpu", out=str(tmp_path_factory.mktemp("models") / "tb"))
    return art, ref


def _check_every_boundary(art, ref, features):
    session = dml.runtime.load(art.path).create_session()
    checked = 0
    for i, dims in enumerate(dim_grid(mlp.batch, mlp.seq)):
        x = deterministic([dims["batch"], dims["seq"], features], seed=500 + i)
        y = session.run_numpy({"x": x})["output"]
        with torch.no_grad():
            want = ref(torch.from_numpy(x)).numpy()
        assert y.shape == want.shape, dims
        np.testing.assert_allclose(y, want, rtol=TOL, atol=TOL, err_msg=str(dims))
        checked += 1
    assert checked == 5 * 4  # batch {1,2,4,5,8} x seq {1,16,17,64}


def test_mlp_matches_torch_at_every_bucket_boundary(mlp_case):
    art, ref = mlp_case
    _check_every_boundary(art, ref, mlp.IN_FEATURES)


def test_transformer_block_matches_torch_at_every_bucket_boundary(transformer_case):
    art, ref = transformer_case
    _check_every_boundary(art, ref, transformer_block.D_MODEL)


def _kernel_ops(art):
    return [(e.get("op", ""), str(e.get("selected", ""))) for e in art.kernel_manifest]


def test_mlp_uses_fused_gemm_epilogue(mlp_case):
    ops = _kernel_ops(mlp_case[0])
    assert any(re.fullmatch(r"gemm_r[cr]r_bias_\w+", op) for op, _ in ops), ops


def test_transformer_uses_fused_gemm_epilogues_and_fused_attention(transformer_case):
    ops = _kernel_ops(transformer_case[0])
    fused_gemms = {op for op, _ in ops if re.fullmatch(r"gemm_r[cr]r_bias_\w+", op)}
    assert fused_gemms, ops
    # stride_attention_operands (target cpu too): q/k/v are read in place from the QKV projection and
    # the output is written as [B, S, H, D], so both head permutes are aliases (no copy kernel).
    assert ("scaled_dot_product_attention", "dml_cpu_sdpa_strided.streamed") in ops, ops
    assert [sel for op, sel in ops if op == "permute"] == ["alias", "alias"], ops
    assert not any(op in ("softmax", "bmm_rcr", "bmm_rrr") for op, _ in ops), ops


def _plan(art):
    plan = art.metadata["memory_plan"]
    assert len(plan["buckets"]) == 3 * 2  # batch buckets x seq buckets
    return max(b["arena_bytes"] for b in plan["buckets"]), plan["sum_intermediate_bytes"]


def test_memory_plan_of_mlp(mlp_case):
    # After epilogue fusion the MLP has two buffers that are live together: nothing to reuse.
    largest, total = _plan(mlp_case[0])
    assert 0 < largest <= total


def test_memory_plan_reuses_buffers_in_transformer(transformer_case):
    largest, total = _plan(transformer_case[0])
    assert 0 < largest < total, (largest, total)


def test_transformer_reference_interpreter_agrees(transformer_case):
    art, ref = transformer_case
    spec = transformer_block.build_spec(ref.state_dict())
    x = deterministic([2, 17, transformer_block.D_MODEL], seed=9)
    with torch.no_grad():
        want = ref(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(dml.reference(spec, {"x": x})["output"], want, rtol=TOL, atol=TOL)
