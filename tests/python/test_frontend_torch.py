"""The PyTorch front end (dinoml.frontends.torch, issue 38): tiny transformers models built from
configs with random weights (no downloads) and small CNNs written like torchvision's, exported with
dynamic batch / sequence, compiled for the CPU and compared with eager PyTorch at several sizes;
plus the errors (unsupported op with its source line, data-dependent control flow, wrong input
dtype) and a saved .pt2 through `dinoml compile`. The full-size corpus is
bench/models/torch_corpus.py."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import dinoml as dml  # noqa: E402
from dinoml.frontends.torch import TorchConversionError, TorchExportError  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_vision_models as tv  # noqa: E402

Dim = torch.export.Dim


def _flat(out):
    """Eager outputs by the front end's names."""
    if isinstance(out, torch.Tensor):
        return {"out": out}
    if isinstance(out, dict):  # dicts and transformers ModelOutputs
        return {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
    return {f"out.{i}": v for i, v in enumerate(out)}


def _close(got, want, rtol=1e-4, name=""):
    got, want = got.float().numpy(), want.float().numpy()
    assert got.shape == want.shape, (name, got.shape, want.shape)
    scale = max(float(np.abs(want).max()), 1e-6)
    err = float(np.abs(got - want).max())
    assert err <= rtol * scale, f"{name}: max |err| {err:.3g} > {rtol} x max |ref| {scale:.3g}"


def _roundtrip(tmp_path, model, args, dynamic_shapes, runs, rtol=1e-4, **kw):
    """compile_torch, then run at every input tuple of `runs` against eager."""
    model.eval()
    mod = dml.compile_torch(model, args, target="cpu", out=str(tmp_path / "art"), dynamic_shapes=dynamic_shapes,
                            **kw)
    sess = mod.create_session()
    names = [i.name for i in mod.inputs]
    for run in runs:
        with torch.no_grad():
            want = _flat(model(*run))
        got = sess.run_torch(dict(zip(names, run)))
        assert set(got) == set(want), (sorted(got), sorted(want))
        for k in want:
            _close(got[k], want[k], rtol, k)
    return mod


B = Dim("batch", min=1, max=4)
S = Dim("seq", min=2, max=32)


def _ids(b, s, vocab=96):
    return torch.randint(0, vocab, (b, s), generator=torch.Generator().manual_seed(b * 100 + s))


def test_bert(tmp_path):
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    m = tf.BertModel(tf.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                   vocab_size=96, max_position_embeddings=32))
    mod = _roundtrip(tmp_path, m, (_ids(2, 8),), {"input_ids": {0: B, 1: S}},
                     [(_ids(1, 5),), (_ids(3, 16),), (_ids(4, 32),)])
    assert {o.name for o in mod.outputs} == {"last_hidden_state", "pooler_output"}
    assert [i.name for i in mod.inputs] == ["input_ids"]


@pytest.mark.parametrize("head", [True, False])
def test_gpt2(tmp_path, head):
    tf = pytest.importorskip("transformers")
    torch.manual_seed(1)
    cfg = tf.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=96, n_positions=32, use_cache=False,
                        bos_token_id=0, eos_token_id=0)
    m = tf.GPT2LMHeadModel(cfg) if head else tf.GPT2Model(cfg)
    mod = _roundtrip(tmp_path, m, (_ids(2, 8),), {"input_ids": {0: B, 1: S}}, [(_ids(1, 3),), (_ids(2, 17),)])
    assert {o.name for o in mod.outputs} == ({"logits"} if head else {"last_hidden_state"})


def test_llama_gqa_rope_rmsnorm_swiglu(tmp_path):
    tf = pytest.importorskip("transformers")
    torch.manual_seed(2)
    m = tf.LlamaForCausalLM(tf.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                           num_key_value_heads=2, intermediate_size=64, vocab_size=96,
                                           max_position_embeddings=32, use_cache=False, bos_token_id=0,
                                           eos_token_id=0, pad_token_id=0))
    _roundtrip(tmp_path, m, (_ids(2, 8),), {"input_ids": {0: B, 1: S}}, [(_ids(1, 4),), (_ids(3, 19),)])


def test_vit(tmp_path):
    tf = pytest.importorskip("transformers")
    torch.manual_seed(3)
    m = tf.ViTModel(tf.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                 image_size=32, patch_size=8))
    x = torch.randn(2, 3, 32, 32)
    _roundtrip(tmp_path, m, (x,), {"pixel_values": {0: B}}, [(torch.randn(1, 3, 32, 32),),
                                                            (torch.randn(4, 3, 32, 32),)])


def test_whisper_encoder(tmp_path):
    tf = pytest.importorskip("transformers")
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    torch.manual_seed(4)
    m = WhisperEncoder(tf.WhisperConfig(d_model=32, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=64,
                                        num_mel_bins=16, max_source_positions=20))
    _roundtrip(tmp_path, m, (torch.randn(2, 16, 40),), {"input_features": {0: B}},
               [(torch.randn(1, 16, 40),), (torch.randn(3, 16, 40),)])


@pytest.mark.parametrize("arch", ["resnet", "mobilenet_v3", "convnext"])
def test_cnn(tmp_path, arch):
    torch.manual_seed(5)
    if arch == "resnet":
        m = tv.ResNet((1, 1, 1, 1), 8, num_classes=10)
    elif arch == "mobilenet_v3":
        m = tv.MobileNetV3(tv.MNV3_LARGE[:5], 64, 10, 8)  # depthwise, SE, hardswish/hardsigmoid
    else:
        m = tv.ConvNeXt((1, 1), (16, 32), 10, layer_scale=0.5)
    runs = [(torch.randn(1, 3, 32, 32),), (torch.randn(3, 3, 32, 32),)]
    _roundtrip(tmp_path, m, (torch.randn(2, 3, 32, 32),), {"x": {0: B}}, runs)


def test_resnet_with_dynamic_height_and_width(tmp_path):
    """Any H x W through residual blocks: the strided 3x3 conv and the strided 1x1 downsample give
    (H + 1)/2 by different formulas, and the add between them needs the two to be one extent."""
    torch.manual_seed(6)
    m = tv.ResNet((1, 1, 1, 1), 8, num_classes=10)
    H, W = Dim("h", min=40, max=96), Dim("w", min=40, max=96)
    runs = [(torch.randn(1, 3, 40, 40),), (torch.randn(2, 3, 45, 77),), (torch.randn(1, 3, 96, 51),)]
    _roundtrip(tmp_path, m, (torch.randn(2, 3, 64, 64),), {"x": {0: B, 2: H, 3: W}}, runs,
               dims={"h": [40, 64, 96], "w": [40, 64, 96]})


def test_dims_buckets_and_fixed():
    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    spec = dml.from_torch(m, (torch.randn(2, 8),), dynamic_shapes={"input": {0: Dim("batch", min=1, max=16)}},
                          dims={"batch": [1, 4, 16]})
    (d,) = spec.dims
    assert (d.name, d.min, d.max, d.buckets) == ("batch", 1, 16, (1, 4, 16))
    # parameters are constants under their state_dict names
    assert {"0.weight", "0.bias"} <= {t["name"] for t in spec.to_dict()["tensors"] if t["kind"] == "constant"}
    fixed = dml.from_torch(m, (torch.randn(2, 8),), dynamic_shapes={"input": {0: Dim("batch", min=1, max=16)}},
                           dims={"batch": 4})
    assert not fixed.dims and [e.value for e in fixed.inputs[0]["shape"]] == [4, 8]
    with pytest.raises(ValueError, match="no upper bound"):
        dml.from_torch(m, (torch.randn(2, 8),), dynamic_shapes={"input": {0: Dim("batch")}})


def test_tuple_outputs_and_half_dtypes(tmp_path):
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)

        def forward(self, x):
            y = self.lin(x)
            return y.softmax(-1), torch.nn.functional.gelu(y)

    m = Two()
    mod = _roundtrip(tmp_path, m, (torch.randn(2, 16),), None, [(torch.randn(2, 16),)])
    assert [o.name for o in mod.outputs] == ["out.0", "out.1"]
    for dt, name, tol in ((torch.bfloat16, "bfloat16", 2e-2), (torch.float16, "float16", 3e-3)):
        mb = Two().to(dt)
        x = torch.randn(3, 16).to(dt)
        modb = dml.compile_torch(mb, (x,), out=str(tmp_path / name))
        assert modb.inputs[0].dtype == name
        got = modb.create_session().run_torch({"x": x})
        with torch.no_grad():
            want = mb(x)
        for i in range(2):
            assert got[f"out.{i}"].dtype == dt
            _close(got[f"out.{i}"], want[i], rtol=tol, name=f"{name} out.{i}")


class _Unsupported(torch.nn.Module):
    def forward(self, x):
        a = torch.flip(x, [1])  # LINE-FLIP
        b = torch.flip(a, [1])
        return torch.atan2(a, b)  # LINE-ATAN2


def _line(marker):
    with open(__file__) as f:
        return next(i + 1 for i, ln in enumerate(f) if ln.rstrip().endswith(marker) and "_line(" not in ln)


def test_unsupported_ops_listed_once_with_source_line():
    with pytest.raises(TorchConversionError) as e:
        dml.from_torch(_Unsupported(), (torch.randn(2, 4),))
    msg = str(e.value)
    assert msg.count("aten.flip") == 1 and msg.count("aten.atan2") == 1, msg
    assert f"test_frontend_torch.py\", line {_line('# LINE-FLIP')}" in msg, msg
    assert f"line {_line('# LINE-ATAN2')}" in msg, msg


def test_data_dependent_control_flow():
    class Branchy(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # LINE-BRANCH
                return x * 2
            return x - 1

    with pytest.raises(TorchExportError, match="data-dependent control flow") as e:
        dml.from_torch(Branchy(), (torch.randn(2, 4),))
    assert f"test_frontend_torch.py\", line {_line('# LINE-BRANCH')}" in str(e.value), str(e.value)


def test_wrong_input_dtype(tmp_path):
    m = torch.nn.Linear(4, 2)
    mod = dml.compile_torch(m, (torch.randn(3, 4),), out=str(tmp_path / "a"))
    with pytest.raises(dml.InvalidArgumentError, match="input 'input' has dtype .*float64.*expects float32"):
        mod.create_session().run_torch({"input": torch.randn(3, 4, dtype=torch.float64)})


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dinoml.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ))


def test_saved_program_cli(tmp_path):
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval()
    x = torch.randn(2, 3, 8, 8)
    ep = torch.export.export(m, (x,), dynamic_shapes={"input": {0: Dim("batch", min=1, max=8)}})
    path = str(tmp_path / "convbn.pt2")
    torch.export.save(ep, path)
    r = _cli("compile", path, "--target", "cpu", "--out", str(tmp_path / "art"), "--dim", "input_0=1:8:2,8")
    assert r.returncode == 0, r.stderr
    mod = dml.runtime.load(str(tmp_path / "art"))
    assert mod.inputs[0].axes[0] == ("input_0", 1, 8)
    for b in (1, 5):
        xb = torch.randn(b, 3, 8, 8)
        with torch.no_grad():
            _close(mod.create_session().run_torch({"input": xb})["out"], m(xb), name=f"batch {b}")
    bad = _cli("compile", path, "--out", str(tmp_path / "x"), "--dim", "nope=3")
    assert bad.returncode == 1 and "name no dynamic dim" in bad.stderr


@pytest.mark.skipif(not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")),
                    reason="nvcc is needed to build a CUDA artifact")
def test_cuda_artifact_from_torch(tmp_path):
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    m = tf.BertModel(tf.BertConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=1,
                                   intermediate_size=64, vocab_size=96, max_position_embeddings=32)).eval()
    spec = dml.from_torch(m, (_ids(2, 8),), dynamic_shapes={"input_ids": {0: B, 1: S}})
    art = dml.compile(spec, target="cuda", arch="sm_90a", out=str(tmp_path / "cuda"))
    assert (art.manifest["target"], art.manifest["arch"]) == ("cuda", "sm_90a")
    assert os.path.exists(os.path.join(art.path, "module.so"))
    ops = {k["op"] for k in art.kernel_manifest}
    assert "scaled_dot_product_attention" in ops
