"""The PyTorch front end on the issue-38 corpus at real sizes (random weights, nothing downloaded):
BERT-base, GPT-2 (with and without the LM head), a Llama-style decoder (GQA, RoPE, RMSNorm,
SwiGLU), ViT-base, the Whisper-tiny encoder, ResNet-50, MobileNetV3-large, ConvNeXt-tiny.

Per model: export + convert (`dml.from_torch`), compile for the CPU (cold: empty compile cache;
warm: again), check against eager at float32 (max |err| / max |ref| ≤ 1e-4), then time DinoML,
`torch.compile` and AOTInductor (`torch._inductor.aoti_compile_and_package` + `aoti_load_package`)
at the same thread count, with their compile times. Writes one JSON file. A benchmark, not a test.

    PYTHONPATH=python .venv/bin/python bench/models/torch_corpus.py --models bert,resnet50 \\
        --threads 2 --out bench/models/torch_corpus.json [--no-peers] [--repeats 20]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import torch_vision_models as tv  # noqa: E402

Dim = torch.export.Dim


def _ids(b, s, vocab):
    return torch.randint(0, vocab, (b, s), generator=torch.Generator().manual_seed(0))


def corpus():
    """name -> () -> (module, example args, dynamic_shapes, timed args)."""
    import transformers as tf
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=512)

    def text(m, vocab):
        return m, (_ids(2, 64, vocab),), {"input_ids": {0: batch, 1: seq}}, (_ids(1, 128, vocab),)

    def image(m, hw=224, dyn_hw=False):
        ds = {0: batch}
        return m, (torch.randn(2, 3, hw, hw),), {"x" if not hasattr(m, "config") else "pixel_values": ds}, \
            (torch.randn(1, 3, hw, hw),)

    def whisper():
        from transformers.models.whisper.modeling_whisper import WhisperEncoder
        m = WhisperEncoder(tf.WhisperConfig.from_dict(dict(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                                                           encoder_ffn_dim=1536, num_mel_bins=80,
                                                           max_source_positions=1500)))
        return m, (torch.randn(2, 80, 3000),), {"input_features": {0: batch}}, (torch.randn(1, 80, 3000),)

    return {
        "bert-base": lambda: text(tf.BertModel(tf.BertConfig()), 30522),
        "gpt2": lambda: text(tf.GPT2Model(tf.GPT2Config(use_cache=False)), 50257),
        "gpt2-lmhead": lambda: text(tf.GPT2LMHeadModel(tf.GPT2Config(use_cache=False)), 50257),
        "llama": lambda: text(tf.LlamaForCausalLM(tf.LlamaConfig(
            hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
            num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, use_cache=False)), 32000),
        "vit-base": lambda: image(tf.ViTModel(tf.ViTConfig(), add_pooling_layer=False)),
        "whisper-tiny-encoder": whisper,
        "resnet50": lambda: image(tv.resnet50()),
        "mobilenet_v3_large": lambda: image(tv.mobilenet_v3_large()),
        "convnext_tiny": lambda: image(tv.convnext_tiny()),
    }


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [v for v in out.values() if isinstance(v, torch.Tensor)]
    return [v for v in out if isinstance(v, torch.Tensor)]


def _time(fn, repeats):
    fn()
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return {"median_ms": 1e3 * statistics.median(ts), "min_ms": 1e3 * min(ts)}


def run_model(name, make, threads, repeats, peers, work):
    import dinoml as dml
    m, args, ds, timed = make()
    m.eval()
    r = {"model": name, "threads": threads, "timed_input_shape": [list(t.shape) for t in timed]}
    t0 = time.perf_counter()
    spec = dml.from_torch(m, args, dynamic_shapes=ds)
    r["convert_s"] = time.perf_counter() - t0
    cache = tempfile.mkdtemp(prefix="dml-cache-", dir=work)
    t0 = time.perf_counter()
    art = dml.compile(spec, target="cpu", out=os.path.join(work, name), cache_dir=cache, progress=False)
    r["dinoml_compile_cold_s"] = r["convert_s"] + time.perf_counter() - t0
    t0 = time.perf_counter()
    dml.compile(spec, target="cpu", out=os.path.join(work, name + "-warm"), cache_dir=cache, progress=False)
    r["dinoml_compile_warm_s"] = r["convert_s"] + time.perf_counter() - t0
    sess = art.load().create_session()
    names = spec.input_names
    feed = dict(zip(names, timed))
    with torch.no_grad():
        want = _flat(m(*timed))
    got = sess.run_torch(feed)
    errs = []
    for (k, g), w in zip(got.items(), want):
        errs.append(float((g.float() - w.float()).abs().max() / w.float().abs().max().clamp_min(1e-6)))
    r["max_rel_err"] = max(errs)
    r["matches_eager_1e-4"] = r["max_rel_err"] <= 1e-4
    r["dinoml"] = _time(lambda: sess.run_torch(feed), repeats)
    with torch.no_grad():
        r["eager"] = _time(lambda: m(*timed), repeats)
    if peers:
        torch._dynamo.reset()
        with torch.no_grad():
            t0 = time.perf_counter()
            cm = torch.compile(m, dynamic=True)
            cm(*timed)
            r["torch_compile_s"] = time.perf_counter() - t0
            r["torch_compile"] = _time(lambda: cm(*timed), repeats)
        try:
            t0 = time.perf_counter()
            with torch.no_grad():
                ep = torch.export.export(m, args, dynamic_shapes=ds)
                pkg = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(work, name + ".pt2"))
            r["aoti_compile_s"] = time.perf_counter() - t0
            runner = torch._inductor.aoti_load_package(pkg)
            with torch.no_grad():
                r["aoti"] = _time(lambda: runner(*timed), repeats)
        except Exception as e:  # report, keep going with the other models
            r["aoti_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        for peer in ("torch_compile", "aoti"):
            if peer in r:
                r[f"speedup_vs_{peer}"] = r[peer]["median_ms"] / r["dinoml"]["median_ms"]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="all", help="comma-separated names, or all")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--no-peers", action="store_true", help="skip torch.compile and AOTInductor")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "models", "torch_corpus.json"))
    ap.add_argument("--under-load", action="store_true", help="mark the numbers as measured on a busy machine")
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ.setdefault("DINOML_NUM_THREADS", str(a.threads))
    torch.set_num_threads(a.threads)
    models = corpus()
    names = list(models) if a.models == "all" else a.models.split(",")
    unknown = [n for n in names if n not in models]
    if unknown:
        sys.exit(f"unknown model(s) {unknown}; known: {', '.join(models)}")
    work = tempfile.mkdtemp(prefix="dml-torch-corpus-")
    results = []
    for n in names:
        torch.manual_seed(0)
        try:
            r = run_model(n, models[n], a.threads, a.repeats, not a.no_peers, work)
        except Exception as e:  # one failing model does not hide the others' numbers
            r = {"model": n, "error": f"{type(e).__name__}: {str(e)[:2000]}"}
        r["measured_under_load"] = a.under_load
        print(json.dumps(r), flush=True)
        results.append(r)
    with open(a.out, "w") as f:
        json.dump({"torch": torch.__version__, "threads": a.threads, "results": results}, f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
