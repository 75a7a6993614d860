"""Real architectures through the ONNX importer (bench/onnx/real_models.py): exported with
Debian's PyTorch (random weights, dynamic batch axis), imported with dml.from_onnx with
--dim batch=1:8:2,8, compiled for the CPU, and compared with PyTorch at batch 1, 3 and 8 (both
buckets, and a batch between them) within 1e-4 (fp32)."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "onnx"))

torch = pytest.importorskip("torch")
import numpy as np  # noqa: E402
import real_models  # noqa: E402

import dinoml as dml  # noqa: E402

FAST = ["bert", "lstm"]
# The torchvision CNNs take longer to export and compile: opt in with DINOML_SLOW_TESTS=1
# (the script bench/onnx/real_models.py runs them all).
SLOW = ["resnet18", "mobilenet_v2"]
RUN_SLOW = os.environ.get("DINOML_SLOW_TESTS") == "1"


def _export_and_compile(m, example, names, tmp_path, stem):
    """Exports the torch module `m` (inputs `names` with a dynamic batch axis 0, output "y") at opset
    14, imports it with batch in [1, 8] and compiles it for the CPU; returns a session of the
    artifact and the ops of its optimised graph."""
    import json
    path = str(tmp_path / f"{stem}.onnx")
    torch.onnx.export(m, example, path, input_names=names, output_names=["y"],
                      dynamic_axes={n: {0: "batch"} for n in names}, opset_version=14)
    art = dml.compile(dml.from_onnx(path, dims={"batch": (1, 8)}), target="cpu", out=str(tmp_path / "art"))
    ops = [n["op"] for n in json.load(open(Path(art.path) / "graph.dinoir.json"))["nodes"]]
    return dml.runtime.load(art.path).create_session(), ops


@pytest.mark.parametrize(
    "name",
    FAST + [pytest.param(n, marks=pytest.mark.skipif(not RUN_SLOW, reason="slow: set DINOML_SLOW_TESTS=1")) for n in SLOW],
)
def test_real_model_matches_pytorch_across_batch_buckets(name, tmp_path):
    if name in SLOW:
        pytest.importorskip("torchvision")
    ok = real_models.check(name, str(tmp_path), batches=(1, 3, 8))
    assert ok, f"{name}: worst |err| {real_models.worst_error.get(name)} > {real_models.TOL}"


def test_opset14_encoder_fuses_layer_norm_and_attention(tmp_path):
    """At opset 14 PyTorch writes LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div and attention as
    MatMul/Softmax/MatMul: the importer's LayerNorm pattern and the fuse_attention pass turn them
    back into layer_norm and scaled_dot_product_attention, and the results still match PyTorch."""
    ok = real_models.check("bert_gelu", str(tmp_path), batches=(1, 3, 8), opset=14)
    assert ok, f"worst |err| {real_models.worst_error.get('bert_gelu')} > {real_models.TOL}"
    ops = set(real_models.ops_after["bert_gelu"])
    assert {"layer_norm", "scaled_dot_product_attention", "gemm_rrr_bias_gelu"} <= ops, ops
    assert not ops & {"softmax", "reduce_mean", "pow", "sqrt", "bmm_rrr", "erf"}, ops


def test_bert_style_masked_attention_export_fuses(tmp_path):
    """A BERT-style layer as Hugging Face writes it ([B, H, S, D] heads, kᵀ by transpose(-1, -2),
    scores / sqrt(D) + (1 - mask) · -10000 padding mask, softmax, LayerNorm) exported at opset 14:
    one masked scaled_dot_product_attention and two layer_norms, matching PyTorch at batch 1, 2, 5
    with padded rows."""
    import math

    import numpy as np

    torch.manual_seed(0)

    class Layer(torch.nn.Module):
        def __init__(self, d=64, h=4):
            super().__init__()
            self.h, self.dh = h, d // h
            self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.f1, self.f2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

        def heads(self, t):
            b, s, _ = t.shape
            return t.view(b, s, self.h, self.dh).permute(0, 2, 1, 3)

        def forward(self, x, mask):
            q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
            p = torch.softmax(scores + (1.0 - mask[:, None, None, :]) * -10000.0, dim=-1)
            c = torch.matmul(p, v).permute(0, 2, 1, 3).reshape(x.shape)
            x = self.ln1(x + self.o(c))
            return self.ln2(x + self.f2(torch.nn.functional.gelu(self.f1(x))))

    m = Layer().eval()
    seq = 24
    sess, ops = _export_and_compile(m, (torch.randn(2, seq, 64), torch.ones(2, seq)), ["x", "mask"], tmp_path, "layer")
    assert ops.count("scaled_dot_product_attention") == 1 and ops.count("layer_norm") == 2, ops
    assert not {"softmax", "bmm_rrr", "reduce_mean", "erf"} & set(ops), ops
    for b in (1, 2, 5):
        x, mask = torch.randn(b, seq, 64), torch.ones(b, seq)
        mask[-1, 7:] = 0
        with torch.no_grad():
            want = m(x, mask).numpy()
        got = sess.run_numpy({"x": x.numpy(), "mask": mask.numpy()})["y"]
        np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("form", ["masked_fill_padding", "where_causal"])
def test_where_masked_attention_export_fuses(form, tmp_path):
    """Attention masked with Where instead of an additive mask, as Hugging Face exports write it:
    scores.masked_fill(~keep, finfo(float32).min) with a [B, 1, 1, S] padding mask (a runtime
    cond, Where(cond, min, scores)), or torch.where(causal, scores, finfo.min) with a constant
    [1, 1, S, S] causal mask, exported at opset 14: fuse_attention turns the Where into the additive
    mask where(cond, 0, min) and fuses one scaled_dot_product_attention (no softmax left). Matches
    PyTorch at batch 1, 2, 5 within 1e-4, including a batch entry whose keys are all masked
    (uniform softmax in both)."""
    import math

    import numpy as np

    torch.manual_seed(0)
    seq, d, h = 16, 32, 4

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.h, self.dh = h, d // h
            self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
            self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

        def heads(self, t):
            b, s, _ = t.shape
            return t.view(b, s, self.h, self.dh).permute(0, 2, 1, 3)

        def forward(self, x, mask=None):
            q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
            lowest = torch.finfo(torch.float32).min
            if form == "masked_fill_padding":
                scores = scores.masked_fill(~(mask[:, None, None, :] > 0), lowest)
            else:
                scores = torch.where(self.causal[None, None], scores, torch.full([], lowest, dtype=scores.dtype))
            c = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(x.shape)
            return self.o(c)

    m = Attn().eval()
    names = ["x", "mask"] if form == "masked_fill_padding" else ["x"]
    example = (torch.randn(2, seq, d), torch.ones(2, seq))[: len(names)]
    sess, ops = _export_and_compile(m, example, names, tmp_path, "attn")
    assert ops.count("scaled_dot_product_attention") == 1, ops
    assert not {"softmax", "bmm_rrr"} & set(ops), ops
    for b in (1, 2, 5):
        x, mask = torch.randn(b, seq, d), torch.ones(b, seq)
        mask[0, 11:] = 0
        if b > 1:
            mask[-1] = 0  # every key masked: softmax of equal scores, uniform
        feeds = {"x": x, "mask": mask}
        with torch.no_grad():
            want = m(*(feeds[n] for n in names)).numpy()
        got = sess.run_numpy({n: feeds[n].numpy() for n in names})["y"]
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("order", ["where_then_add", "add_inside_where"])
def test_gpt2_style_causal_and_padding_masks_fuse(order, tmp_path):
    """GPT-2-style attention as Hugging Face writes it: a fused c_attn split into q, k, v, a causal
    bool buffer tril(ones(S, S)).view(1, 1, S, S) applied with torch.where(causal, scores,
    finfo.min) and then + attention_mask = (1 - pad_mask[:, None, None, :]) * finfo.min (also the
    reverse order, where(causal, scores + attention_mask, finfo.min)), exported at opset 14:
    fuse_attention combines the two masks into one additive mask (where(causal, 0, min) + mask,
    resp. where(causal, mask, min)) and fuses one scaled_dot_product_attention (no softmax left).
    Matches PyTorch at batch 1 and 3 within 1e-4 with padded keys, including left padding, whose
    first rows see only padded keys (uniform over the causal keys in both)."""
    import math

    import numpy as np

    torch.manual_seed(0)
    seq, d, h = 16, 32, 4

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.h, self.dh = h, d // h
            self.c_attn, self.c_proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq))

        def heads(self, t):
            b, s, _ = t.shape
            return t.view(b, s, self.h, self.dh).permute(0, 2, 1, 3)

        def forward(self, x, pad_mask):
            q, k, v = (self.heads(t) for t in self.c_attn(x).split(d, dim=2))
            w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
            lowest = torch.finfo(torch.float32).min
            attention_mask = (1.0 - pad_mask[:, None, None, :].float()) * lowest
            fill = torch.full([], lowest, dtype=w.dtype)
            if order == "where_then_add":
                w = torch.where(self.bias, w, fill) + attention_mask
            else:
                w = torch.where(self.bias, w + attention_mask, fill)
            c = torch.matmul(torch.softmax(w, dim=-1), v).permute(0, 2, 1, 3).reshape(x.shape)
            return self.c_proj(c)

    m = Attn().eval()
    example = (torch.randn(2, seq, d), torch.ones(2, seq, dtype=torch.long))
    sess, ops = _export_and_compile(m, example, ["x", "pad_mask"], tmp_path, "gpt2_attn")
    assert ops.count("scaled_dot_product_attention") == 1, ops
    assert not {"softmax", "bmm_rrr"} & set(ops), ops
    for b in (1, 3):
        x, pad_mask = torch.randn(b, seq, d), torch.ones(b, seq, dtype=torch.long)
        pad_mask[0, 12:] = 0  # right padding
        if b > 1:
            pad_mask[2, :5] = 0  # left padding: rows 0..4 see only padded keys
        with torch.no_grad():
            want = m(x, pad_mask).numpy()
        got = sess.run_numpy({"x": x.numpy(), "pad_mask": pad_mask.numpy()})["y"]
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, atol=1e-4)


def test_cumsum_export_compiles_and_matches_torch(tmp_path):
    """CumSum (as HF-style exports use it for position ids) through the compiled CPU path, float
    and int64, against PyTorch."""
    import numpy as np

    import dinoml as dml

    class M(torch.nn.Module):
        def forward(self, x, mask):
            return torch.cumsum(x, dim=1), torch.cumsum(mask, dim=1) * mask

    x = torch.randn(3, 9)
    mask = (torch.rand(3, 9) > 0.3).to(torch.int64)
    path = str(tmp_path / "cumsum.onnx")
    torch.onnx.export(M(), (x, mask), path, input_names=["x", "mask"], output_names=["y", "pos"], opset_version=17)
    art = dml.compile(dml.from_onnx(path), target="cpu", out=str(tmp_path / "art"))
    got = dml.runtime.load(art.path).create_session().run_numpy({"x": x.numpy(), "mask": mask.numpy()})
    want_y, want_pos = M()(x, mask)
    np.testing.assert_allclose(got["y"], want_y.numpy(), atol=1e-5)
    np.testing.assert_array_equal(got["pos"], want_pos.numpy())


@pytest.mark.parametrize("eq,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("i,i->", [(6,), (6,)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("abc->b", [(2, 3, 4)]),
])
def test_einsum_export_compiles_and_matches_torch(eq, shapes, tmp_path):
    """Einsum (float32) through the compiled CPU path against torch.einsum. (The backend node
    tests of Einsum use float64 inputs, which DinoML does not have.)"""
    import numpy as np

    import dinoml as dml

    class M(torch.nn.Module):
        def forward(self, *xs):
            return torch.einsum(eq, *xs)

    xs = [torch.randn(*s) for s in shapes]
    names = [f"x{i}" for i in range(len(xs))]
    path = str(tmp_path / "einsum.onnx")
    torch.onnx.export(M(), tuple(xs), path, input_names=names, output_names=["y"], opset_version=17)
    art = dml.compile(dml.from_onnx(path), target="cpu", out=str(tmp_path / "art"))
    got = dml.runtime.load(art.path).create_session().run_numpy({k: x.numpy() for k, x in zip(names, xs)})["y"]
    np.testing.assert_allclose(got, M()(*xs).numpy(), atol=1e-5, rtol=1e-5)


class _TinyFpn(torch.nn.Module):
    """A detector's neck in miniature: two stride-2 stages, the coarse one upsampled twice over
    (nearest Resize and a stride-2 ConvTranspose) and added to the finer one, as PP-OCR's DB
    head and FPNs do. ceil(H/2)/2·2 equals ceil(H/2) only when H is a multiple of 4."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, 2, 1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, 2, 1)
        self.up = torch.nn.ConvTranspose2d(8, 8, 2, 2)
        self.head = torch.nn.ConvTranspose2d(8, 1, 2, 2)

    def forward(self, x):
        f1 = torch.relu(self.c1(x))
        f2 = torch.relu(self.c2(f1))
        y = f1 + torch.nn.functional.interpolate(f2, scale_factor=2.0, mode="nearest") + self.up(f2)
        return torch.sigmoid(self.head(y))


def test_detector_neck_with_symbolic_height_and_width(tmp_path):
    """Any H x W that the preprocessing keeps a multiple of the stride (dims with divisible_by): one
    artifact, compared with ONNX Runtime at sizes between buckets."""
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    m = _TinyFpn().eval()
    path = str(tmp_path / "fpn.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (torch.randn(1, 3, 32, 48),), path, input_names=["x"], output_names=["prob"],
                          dynamic_axes={"x": {2: "h", 3: "w"}}, opset_version=17, dynamo=False)
    side = {"min": 16, "max": 96, "buckets": [48, 96], "divisible_by": 4}
    spec = dml.from_onnx(path, dims={"h": side, "w": side})
    sess = dml.runtime.load(dml.compile(spec, target="cpu", out=str(tmp_path / "art")).path).create_session()
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for h, w in ((16, 16), (36, 92), (96, 52)):
        x = np.random.default_rng(h * w).standard_normal((1, 3, h, w)).astype(np.float32)
        got = sess.run_numpy({"x": x})["prob"]
        np.testing.assert_allclose(got, ref.run(None, {"x": x})[0], atol=1e-5)
    with pytest.raises(Exception, match="multiple of 4"):
        sess.run_numpy({"x": np.zeros((1, 3, 18, 16), np.float32)})
