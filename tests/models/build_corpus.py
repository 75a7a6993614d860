"""Builds the real-architecture ONNX corpus: random weights, no downloads.

Every model is a real architecture from PyPI packages (transformers) or a small hand-written CNN,
exported through BOTH of PyTorch's ONNX exporters (`dynamo=False`, the TorchScript tracer, and
`dynamo=True`, torch.export + onnxscript, at torch's default opset and at opset 23), in float32 and float16. Each export lands in
CACHE/<model>.<exporter>.<dtype>.onnx with a CACHE/<same>.json describing its inputs (names,
dtypes, shapes, the symbolic dims and their test sizes) for tests/models/run_corpus.py.

    python tests/models/build_corpus.py [--cache DIR] [--size tiny|full] [--only REGEX]

`tiny` (default) uses small configs (seconds per export); `full` the real sizes (BERT-base,
GPT-2 small, ViT-base, Whisper-tiny, T5-small, a 4-layer Llama-style decoder).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

import torch

DEFAULT_CACHE = os.environ.get("DINOML_CORPUS_DIR", os.path.expanduser("~/.cache/dinoml/onnx-corpus"))


class Entry:
    """One corpus model: `make()` returns (module, example args, input specs, output names).
    An input spec is (name, dtype, shape with dim names for symbolic axes)."""

    def __init__(self, name, make, dims, sizes, fp16=True):
        self.name, self.make, self.dims, self.sizes, self.fp16 = name, make, dims, sizes, fp16


# ---- transformers ---------------------------------------------------------------------------

class _HF(torch.nn.Module):
    """Wraps a transformers model so that forward takes positional tensors and returns a tuple of
    tensors (no caches, no dicts)."""

    def __init__(self, model, keys, outs):
        super().__init__()
        self.model, self.keys, self.outs = model, keys, outs

    def forward(self, *args):
        r = self.model(**dict(zip(self.keys, args)), use_cache=False, return_dict=True) \
            if self._accepts_cache() else self.model(**dict(zip(self.keys, args)), return_dict=True)
        return tuple(getattr(r, o) for o in self.outs)

    def _accepts_cache(self):
        import inspect
        return "use_cache" in inspect.signature(self.model.forward).parameters


def _ids(vocab, b, s):
    return torch.randint(0, vocab, (b, s), dtype=torch.int64)


def bert(size):
    from transformers import BertConfig, BertModel
    c = BertConfig(vocab_size=30522 if size == "full" else 128, hidden_size=768 if size == "full" else 32,
                   num_hidden_layers=12 if size == "full" else 2, num_attention_heads=12 if size == "full" else 2,
                   intermediate_size=3072 if size == "full" else 64, max_position_embeddings=512 if size == "full" else 64)
    m = BertModel(c, add_pooling_layer=True).eval()
    b, s = 2, 16
    mask = torch.ones(b, s, dtype=torch.int64)
    mask[1, s // 2:] = 0
    return (_HF(m, ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"]),
            (_ids(c.vocab_size, b, s), mask),
            [("input_ids", "int64", ["batch", "seq"]), ("attention_mask", "int64", ["batch", "seq"])],
            ["last_hidden_state", "pooler_output"])


def gpt2(size):
    from transformers import GPT2Config, GPT2Model
    c = GPT2Config(vocab_size=50257 if size == "full" else 128, n_embd=768 if size == "full" else 32,
                   n_layer=12 if size == "full" else 2, n_head=12 if size == "full" else 2,
                   n_positions=1024 if size == "full" else 64, bos_token_id=0, eos_token_id=0)
    m = GPT2Model(c).eval()
    return _decoder_lm(m, c.vocab_size)


def _decoder_lm(m, vocab):
    """A decoder-only LM fed input_ids and attention_mask (as generation exports it; without a
    mask transformers traces a packed-sequence check through aten::diff, which has no ONNX export)."""
    b, s = 2, 16
    mask = torch.ones(b, s, dtype=torch.int64)
    mask[1, : s // 4] = 0  # left padding
    return (_HF(m, ["input_ids", "attention_mask"], ["last_hidden_state"]), (_ids(vocab, b, s), mask),
            [("input_ids", "int64", ["batch", "seq"]), ("attention_mask", "int64", ["batch", "seq"])],
            ["last_hidden_state"])


def llama(size):
    from transformers import LlamaConfig, LlamaModel
    full = size == "full"
    c = LlamaConfig(vocab_size=32000 if full else 128, hidden_size=512 if full else 64,
                    intermediate_size=1376 if full else 96, num_hidden_layers=4 if full else 2,
                    num_attention_heads=8 if full else 4, num_key_value_heads=2, max_position_embeddings=256,
                    rms_norm_eps=1e-6, hidden_act="silu", rope_theta=10000.0)
    m = LlamaModel(c).eval()
    return _decoder_lm(m, c.vocab_size)


def vit(size):
    from transformers import ViTConfig, ViTModel
    full = size == "full"
    c = ViTConfig(hidden_size=768 if full else 32, num_hidden_layers=12 if full else 2,
                  num_attention_heads=12 if full else 2, intermediate_size=3072 if full else 64,
                  image_size=224 if full else 32, patch_size=16 if full else 8)
    m = ViTModel(c, add_pooling_layer=False).eval()
    x = torch.randn(2, 3, c.image_size, c.image_size)
    return (_HF(m, ["pixel_values"], ["last_hidden_state"]), (x,),
            [("pixel_values", "float32", ["batch", 3, c.image_size, c.image_size])], ["last_hidden_state"])


def _whisper_config(size):
    from transformers import WhisperConfig
    full = size == "full"
    return WhisperConfig(vocab_size=51865 if full else 128, num_mel_bins=80, d_model=384 if full else 32,
                         encoder_layers=4 if full else 2, decoder_layers=4 if full else 2,
                         encoder_attention_heads=6 if full else 2, decoder_attention_heads=6 if full else 2,
                         encoder_ffn_dim=1536 if full else 64, decoder_ffn_dim=1536 if full else 64,
                         max_source_positions=1500 if full else 16, max_target_positions=448 if full else 32,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)


def whisper_encoder(size):
    from transformers import WhisperModel
    c = _whisper_config(size)
    m = WhisperModel(c).eval().get_encoder()
    frames = 2 * c.max_source_positions
    x = torch.randn(2, 80, frames)
    return (_HF(m, ["input_features"], ["last_hidden_state"]), (x,),
            [("input_features", "float32", ["batch", 80, frames])], ["last_hidden_state"])


def whisper_decoder(size):
    from transformers import WhisperModel
    c = _whisper_config(size)
    m = WhisperModel(c).eval().get_decoder()
    b, s = 2, 8
    enc = torch.randn(b, c.max_source_positions, c.d_model)
    mask = torch.ones(b, s, dtype=torch.int64)  # see _decoder_lm: without it transformers traces aten::diff
    return (_HF(m, ["input_ids", "attention_mask", "encoder_hidden_states"], ["last_hidden_state"]),
            (_ids(c.vocab_size, b, s), mask, enc),
            [("input_ids", "int64", ["batch", "seq"]), ("attention_mask", "int64", ["batch", "seq"]),
             ("encoder_hidden_states", "float32", ["batch", c.max_source_positions, c.d_model])],
            ["last_hidden_state"])


def t5(size):
    from transformers import T5Config, T5Model
    full = size == "full"
    c = T5Config(vocab_size=32128 if full else 128, d_model=512 if full else 32, d_kv=64 if full else 16,
                 d_ff=2048 if full else 64, num_layers=6 if full else 2, num_heads=8 if full else 2,
                 relative_attention_num_buckets=32, decoder_start_token_id=0)
    m = T5Model(c).eval()
    b = 2
    return (_HF(m, ["input_ids", "decoder_input_ids"], ["last_hidden_state"]),
            (_ids(c.vocab_size, b, 12), _ids(c.vocab_size, b, 6)),
            [("input_ids", "int64", ["batch", "seq"]), ("decoder_input_ids", "int64", ["batch", "dec_seq"])],
            ["last_hidden_state"])


# ---- small CNNs (hand-written: torchvision is not a dependency) --------------------------------

class SmallResNet(torch.nn.Module):
    def __init__(self, c=16, classes=10):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.b1 = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c))
        self.down = nn.Sequential(nn.Conv2d(c, 2 * c, 1, 2, bias=False), nn.BatchNorm2d(2 * c))
        self.b2 = nn.Sequential(nn.Conv2d(c, 2 * c, 3, 2, 1, bias=False), nn.BatchNorm2d(2 * c), nn.ReLU(),
                                nn.Conv2d(2 * c, 2 * c, 3, 1, 1, bias=False), nn.BatchNorm2d(2 * c))
        self.fc = nn.Linear(2 * c, classes)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.b1(x))
        x = torch.relu(self.down(x) + self.b2(x))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


class SmallMobileNet(torch.nn.Module):
    """Inverted residuals with depthwise convs, hardswish and squeeze-excitation (MobileNetV3-like)."""

    def __init__(self, c=16):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(c, 4 * c, 1, bias=False), nn.BatchNorm2d(4 * c), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(4 * c, 4 * c, 3, 1, 1, groups=4 * c, bias=False), nn.BatchNorm2d(4 * c), nn.Hardswish())
        self.se1, self.se2 = nn.Conv2d(4 * c, c, 1), nn.Conv2d(c, 4 * c, 1)
        self.project = nn.Sequential(nn.Conv2d(4 * c, c, 1, bias=False), nn.BatchNorm2d(c))
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        x = self.stem(x)
        y = self.dw(self.expand(x))
        s = torch.nn.functional.adaptive_avg_pool2d(y, 1)
        y = y * torch.nn.functional.hardsigmoid(self.se2(torch.relu(self.se1(s))))
        x = x + self.project(y)
        return self.head(x.mean((2, 3)))


def _trained_like(m):
    """Random but non-trivial BatchNorm statistics (fresh ones make the outputs vanish)."""
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
            mod.weight.data.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
            mod.bias.data.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
    return m


def resnet_small(size):
    m = _trained_like(SmallResNet(32 if size == "full" else 16)).eval()
    hw = 64 if size == "full" else 32
    return m, (torch.randn(2, 3, hw, hw),), [("x", "float32", ["batch", 3, hw, hw])], ["logits"]


def mobilenet_small(size):
    m = _trained_like(SmallMobileNet(32 if size == "full" else 16)).eval()
    hw = 64 if size == "full" else 32
    return m, (torch.randn(2, 3, hw, hw),), [("x", "float32", ["batch", 3, hw, hw])], ["logits"]


# dims: the symbolic dims and the bounds run_corpus.py gives (min, max, buckets); sizes: the sizes
# run_corpus.py runs at (each at least one between buckets).
MODELS = {
    "bert": Entry("bert", bert, {"batch": [1, 4, [2, 4]], "seq": [1, 32, [16, 32]]}, [{"batch": 2, "seq": 16}, {"batch": 3, "seq": 11}]),
    "gpt2": Entry("gpt2", gpt2, {"batch": [1, 4, [2, 4]], "seq": [1, 32, [16, 32]]}, [{"batch": 2, "seq": 16}, {"batch": 1, "seq": 9}]),
    "llama": Entry("llama", llama, {"batch": [1, 4, [2, 4]], "seq": [1, 32, [16, 32]]}, [{"batch": 2, "seq": 16}, {"batch": 1, "seq": 7}]),
    "vit": Entry("vit", vit, {"batch": [1, 4, [2, 4]]}, [{"batch": 2}, {"batch": 3}]),
    "whisper_encoder": Entry("whisper_encoder", whisper_encoder, {"batch": [1, 4, [2, 4]]}, [{"batch": 2}, {"batch": 1}]),
    "whisper_decoder": Entry("whisper_decoder", whisper_decoder, {"batch": [1, 4, [2, 4]], "seq": [1, 16, [8, 16]]},
                             [{"batch": 2, "seq": 8}, {"batch": 1, "seq": 5}]),
    "t5": Entry("t5", t5, {"batch": [1, 4, [2, 4]], "seq": [1, 32, [16, 32]], "dec_seq": [1, 16, [8, 16]]},
                [{"batch": 2, "seq": 12, "dec_seq": 6}, {"batch": 1, "seq": 9, "dec_seq": 3}]),
    "resnet_small": Entry("resnet_small", resnet_small, {"batch": [1, 4, [2, 4]]}, [{"batch": 2}, {"batch": 3}]),
    "mobilenet_small": Entry("mobilenet_small", mobilenet_small, {"batch": [1, 4, [2, 4]]}, [{"batch": 2}, {"batch": 3}]),
}

# torchscript: dynamo=False at opset 17; dynamo: torch.export at torch's default opset (20 in torch
# 2.13: nn.GELU becomes Gelu); dynamo23: opset 23 (scaled_dot_product_attention becomes Attention,
# RMSNorm RMSNormalization, a transformer's rope RotaryEmbedding).
EXPORTERS = ("torchscript", "dynamo", "dynamo23")
DYNAMO_OPSET = {"dynamo": None, "dynamo23": 23}
DTYPES = ("float32", "float16")


def _cast_half(args):
    return tuple(a.half() if a.is_floating_point() else a for a in args)


def export(entry: Entry, exporter: str, dtype: str, size: str, path: Path):
    torch.manual_seed(0)
    model, args, inputs, outputs = entry.make(size)
    if dtype == "float16":
        model, args = model.half(), _cast_half(args)
        inputs = [(n, "float16" if d == "float32" else d, s) for n, d, s in inputs]
    names = [n for n, _, _ in inputs]
    static_reason = None
    symbolic = {n: {a: d for a, d in enumerate(s) if isinstance(d, str)} for n, _, s in inputs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(model, args, str(path), input_names=names, output_names=outputs,
                              dynamic_axes=symbolic, opset_version=17, dynamo=False)
        else:
            shapes = {}
            dims = {}
            for n, _, s in inputs:
                shapes[n] = {a: dims.setdefault(d, torch.export.Dim(d, min=2, max=entry.dims[d][1]))
                             for a, d in enumerate(s) if isinstance(d, str)}
            # One entry per positional argument: the CNNs take x, the _HF wrappers *args.
            dyn = tuple(shapes[n] for n in names)
            dyn = dyn if not isinstance(model, _HF) else (dyn,)
            try:
                prog = torch.onnx.export(model, args, input_names=names, output_names=outputs, dynamic_shapes=dyn,
                                         opset_version=DYNAMO_OPSET[exporter], dynamo=True, optimize=True,
                                         verbose=False)
            except Exception as err:  # noqa: BLE001 - some models export only with static shapes
                static_reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:200]
                prog = torch.onnx.export(model, args, input_names=names, output_names=outputs,
                                         opset_version=DYNAMO_OPSET[exporter], dynamo=True, optimize=True,
                                         verbose=False)
            prog.save(str(path))
    meta = {"model": entry.name, "exporter": exporter, "dtype": dtype, "size": size,
            "inputs": [{"name": n, "dtype": d, "shape": s} for n, d, s in inputs], "outputs": outputs,
            "dims": entry.dims, "sizes": entry.sizes, "vocab": _vocab(model)}
    if static_reason:
        # Exported with the example's fixed shapes: run at that size only.
        meta.update(static=static_reason, dims={}, sizes=[_example_size(inputs, args)],
                    inputs=[{"name": n, "dtype": d, "shape": list(a.shape)} for (n, d, _), a in zip(inputs, args)])
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1))


def _example_size(inputs, args):
    size = {}
    for (_, _, shape), a in zip(inputs, args):
        for ax, d in enumerate(shape):
            if isinstance(d, str):
                size[d] = int(a.shape[ax])
    return size


def _vocab(model):
    m = getattr(model, "model", None)
    c = getattr(m, "config", None)
    return int(getattr(c, "vocab_size", 0) or 0) if c is not None else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--size", choices=("tiny", "full"), default="tiny")
    ap.add_argument("--only", default="", help="regex over '<model>.<exporter>.<dtype>'")
    ap.add_argument("--force", action="store_true", help="re-export files already in the cache")
    a = ap.parse_args(argv)
    cache = Path(a.cache) / a.size
    cache.mkdir(parents=True, exist_ok=True)
    status = {}
    for name, e in MODELS.items():
        for ex in EXPORTERS:
            for dt in DTYPES:
                key = f"{name}.{ex}.{dt}"
                if a.only and not re.search(a.only, key):
                    continue
                path = cache / f"{key}.onnx"
                if path.exists() and path.with_suffix(".json").exists() and not a.force:
                    status[key] = "cached"
                    continue
                t0 = time.time()
                try:
                    export(e, ex, dt, a.size, path)
                    status[key] = f"exported ({time.time() - t0:.1f} s)"
                    (cache / f"{key}.export_error.txt").unlink(missing_ok=True)
                except Exception as err:  # noqa: BLE001 - an exporter failure is a corpus result
                    msg = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:200]
                    status[key] = "export failed: " + msg
                    (cache / f"{key}.export_error.txt").write_text(msg + "\n")
                print(f"{key:45s} {status[key]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
