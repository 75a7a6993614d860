"""The 7B CUDA decode benchmark on the GPU machine (bundle of tests/gpu/llm7b_prepare.py; python3 with
torch CUDA and numpy, no DinoML build). In one process tree, on one GPU:

  1. writes the 7B-shaped Q4_K_M GGUF (tests/gpu/llm7b_plan.py, the prepare's seed) and checks every
     weight's SHA-256 against the prepare's: the same bytes the artifact was traced from;
  2. rebuilds the graph's constants file from it and dense.bin, compiles with the carried compiler
     (`bin/dinoml compile graph.dinoir.json --target cuda --arch sm_90a`);
  3. DinoML: prompt, then greedy decode steps through the C ABI (device pointers, a torch stream,
     CUDA-graph replay), tokens/s end to end (host argmax and token feed included) and the GPU time
     of one decode step (CUDA events over replays);
  4. the bound: weight bytes read per step / the device-to-device copy bandwidth (1 GiB copy,
     bytes read + written per second), measured in the same process;
  5. llama.cpp's CUDA build (`@node-llama-cpp/linux-x64-cuda`, libraries unpacked into
     LLAMA_CUDA_DIR when carried) on the same GGUF, all layers on the GPU: tokens/s and greedy
     tokens against DinoML's;
  6. Hugging Face transformers `generate` (bf16, the same shape, random weights): tokens/s.

    python3 llm7b_run.py BUNDLE [RESULT_DIR] [--decode 128] [--prompt 16] [--llama-cuda DIR] [--no-hf]
                         [--rows 1 2] [--gemv-bandwidth] [--prepare-only]
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import subprocess
import sys
import time

B = os.path.abspath(sys.argv[1])
sys.path.insert(0, B)
sys.path.insert(0, os.path.join(B, "python", "dinoml", "tools"))  # the compiler bundle's tools
import glob  # noqa: E402

for whl in glob.glob(os.path.join(B, "wheels", "*.whl")):  # gguf: pure Python, imported from the wheel
    sys.path.insert(0, whl)
import profile_run as P  # noqa: E402  (the carried compiler's environment; re-executes with cuBLASLt's folders)
import cuda_timing  # noqa: E402
import dml_ctypes as D  # noqa: E402
import llm7b_plan  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

WORK = "/tmp/llm7b"


def log(msg):
    print(f"[llm7b] {msg}", flush=True)


def rebuild(meta, gguf_path, gdir):
    """constants.bin of graph.dinoir.json from the GGUF's tensors and dense.bin; every constant's
    SHA-256 is checked against the graph's."""
    import gguf
    reader = gguf.GGUFReader(gguf_path)
    tensors = {t.name: t for t in reader.tensors}
    dense = open(os.path.join(B, "dense.bin"), "rb").read()
    os.makedirs(gdir, exist_ok=True)
    g = json.load(open(os.path.join(B, "graph.dinoir.json")))
    size = meta["constants_bytes"]
    with open(os.path.join(gdir, g["constants_file"]), "wb") as f:
        f.truncate(size)
        for name, e in meta["layout"].items():
            if "gguf" in e:
                b = memoryview(np.ascontiguousarray(tensors[e["gguf"]].data)).cast("B")
            else:
                b = memoryview(dense)[e["dense"]:e["dense"] + e["nbytes"]]
            if len(b) != e["nbytes"] or hashlib.sha256(b).hexdigest() != e["sha256"]:
                raise SystemExit(f"constant {name}: bytes differ from the prepared graph's (seed or gguf version?)")
            f.seek(e["offset"])
            f.write(b)
    with open(os.path.join(gdir, "graph.dinoir.json"), "w") as f:
        json.dump(g, f)


def set_knob(art, name, value):
    """A debugging knob of the artifact's CUDA kernel library (the copy the module loaded)."""
    lib = ctypes.CDLL(os.path.realpath(os.path.join(art, "lib", "libdinoml_cuda_kernels.so")))
    if lib.dml_cuda_set_knob(name.encode(), str(value).encode()) != 0:
        raise RuntimeError(f"knob {name}={value} refused")


def node_profile(sess, art, inputs, outputs, runs=5):
    """GPU time per (op, selected kernel) of one decode step: dinoml_session_run_timed (each node
    synchronised, so launch gaps are included)."""
    sec = np.array(sess.run_timed(inputs, outputs, runs)) / runs
    man = json.load(open(os.path.join(art, "kernel_manifest.json")))
    nodes = man if isinstance(man, list) else man.get("nodes", [])
    agg = {}
    for t, nd in zip(sec, nodes):
        k = f"{nd.get('op')} / {nd.get('selected')}"
        agg[k] = agg.get(k, 0.0) + float(t) * 1e3
    return {"total_ms": float(sec.sum() * 1e3), "ms": dict(sorted(agg.items(), key=lambda kv: -kv[1])[:16])}


def dinoml_decode(art, prompt, n, vocab, profile=False):
    mod = D.Module(art)
    sess = mod.session()
    stream = torch.cuda.Stream()
    sess.set_stream(stream.cuda_stream)
    res = {}
    with torch.cuda.stream(stream):
        logits = torch.empty(1, vocab, dtype=torch.float32, device="cuda")
        tok = torch.empty(1, dtype=torch.int64, device="cuda")
        pos = torch.empty(1, dtype=torch.int64, device="cuda")
        ptoks = torch.tensor(prompt, dtype=torch.int64, device="cuda")
        ppos = torch.arange(len(prompt), dtype=torch.int64, device="cuda")
        stream.synchronize()
        t0 = time.perf_counter()
        sess.run({"tokens": ptoks, "positions": ppos}, {"logits": logits})
        nxt = int(logits.argmax())
        t1 = time.perf_counter()
        toks, all_logits = [nxt], [logits.cpu().numpy()[0].copy()]
        step_ins, step_outs = sess.prepare({"tokens": tok, "positions": pos}, {"logits": logits})
        for i in range(n - 1):
            tok.fill_(toks[-1])
            pos.fill_(len(prompt) + i)
            sess.run_prepared(step_ins, step_outs)
            toks.append(int(logits.argmax()))
            if i < 31:
                all_logits.append(logits.cpu().numpy()[0].copy())
        t2 = time.perf_counter()
        res.update(prefill_s=t1 - t0, prefill_tok_s=len(prompt) / (t1 - t0), decode_s=t2 - t1,
                   decode_tok_s=(n - 1) / (t2 - t1), tokens=toks, graph_stats=mod.graph_stats())
        # GPU time of one decode step: replays of the same step (position kept: the cache row is
        # rewritten with the same values), CUDA events around 50 runs with no host work between.
        pos.fill_(len(prompt) + n - 2)
        tok.fill_(toks[-2])
        for _ in range(3):
            sess.run_prepared(step_ins, step_outs)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(stream)
        for _ in range(50):
            sess.run_prepared(step_ins, step_outs)
        e.record(stream)
        stream.synchronize()
        res["step_gpu_ms"] = s.elapsed_time(e) / 50
        if profile:
            res["profile"] = node_profile(sess, art, {"tokens": tok, "positions": pos}, {"logits": logits})
    res["logits"] = np.stack(all_logits)
    del sess, mod
    torch.cuda.empty_cache()
    return res


def llama_cpp(gguf_path, prompt, n, ctx, libdir):
    env = dict(os.environ, DINOML_GGML_REF_LIBDIR=libdir)
    npy = os.path.join(WORK, "llama_cpp_logits.npy")
    cmd = [sys.executable, os.path.join(B, "llama_cpp_ref.py"), gguf_path, "--tokens", ",".join(map(str, prompt)),
           "--n", str(n), "--ctx", str(ctx), "--gpu-layers", "999", "--threads", "8", "--repeat", "2", "--logits", npy]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        return {"error": (r.stdout + r.stderr)[-3000:]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["logits"] = np.load(npy)
    out["log_tail"] = r.stderr[-1500:]
    return out


def hf_generate(shape, prompt, n):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=shape["vocab"], hidden_size=shape["dim"], intermediate_size=shape["ffn"],
                      num_hidden_layers=shape["n_layers"], num_attention_heads=shape["n_heads"],
                      num_key_value_heads=shape["n_kv_heads"], max_position_embeddings=shape["ctx"],
                      rms_norm_eps=1e-5, rope_theta=10000.0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.tensor([prompt], device="cuda")
    with torch.no_grad():
        model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)
        torch.cuda.synchronize()
        t = time.perf_counter()
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
    del model
    torch.cuda.empty_cache()
    return {"tok_s": n / dt, "note": "model.generate, bf16, eager, greedy, prompt included in the time"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("result_dir", nargs="?", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--llama-cuda", default=os.environ.get("LLAMA_CUDA_DIR", ""))
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--prepare-only", action="store_true", help="write the GGUF and compile, then stop")
    ap.add_argument("--rows", type=int, nargs="*", default=[], help="DML_CUDA_QGEMV_ROWS settings to time too")
    ap.add_argument("--gemv-bandwidth", action="store_true", help="tests/gpu/quant_run.py's GEMV bandwidth table")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(B, "llm7b.json")))
    shape = meta["shape"]
    os.makedirs(WORK, exist_ok=True)
    res = {"device": torch.cuda.get_device_name(), "shape": shape, "ctx": meta["ctx"],
           "weight_bytes_per_token": meta["weight_bytes_per_token"]}
    gguf_path = os.path.join(WORK, "llama-7b-shape-q4_k_m.gguf")
    t = time.time()
    if not os.path.exists(gguf_path):
        llm7b_plan.write(gguf_path, meta["seed"], shape)
    res["gguf_write_s"] = time.time() - t
    gdir = os.path.join(WORK, "graph")
    t = time.time()
    rebuild(meta, gguf_path, gdir)
    res["rebuild_s"] = time.time() - t
    log(f"GGUF {os.path.getsize(gguf_path) / 2**30:.2f} GiB written in {res['gguf_write_s']:.0f} s, constants "
        f"rebuilt and checked in {res['rebuild_s']:.0f} s")
    art = os.path.join(WORK, "artifact")
    if not os.path.exists(os.path.join(art, "module.so")):
        clog = open(os.path.join(a.result_dir, "llm7b_compile.log"), "w")
        _, res["compile_s"] = P.dinoml("compile", os.path.join(gdir, "graph.dinoir.json"), "--target", "cuda",
                                       "--arch", "sm_90a", "-o", art, log=clog)
        log(f"compiled in {res['compile_s']:.0f} s")
    if a.prepare_only:  # the GGUF and the artifact stay in /tmp/llm7b for the next call
        print(json.dumps(res))
        return
    bw = cuda_timing.d2d_copy_bandwidth(torch)
    torch.cuda.empty_cache()
    res["d2d_copy_GBps"] = bw / 1e9
    bound = bw / meta["weight_bytes_per_token"]
    res["bound_tok_s"] = bound
    log(f"D2D copy {bw / 1e9:.0f} GB/s; weights per step {meta['weight_bytes_per_token'] / 2**30:.3f} GiB -> bound "
        f"{bound:.0f} tok/s ({1e3 / bound:.3f} ms/step)")
    rng = np.random.default_rng(1)
    prompt = [1] + [int(x) for x in rng.integers(259, shape["vocab"], a.prompt - 1)]
    # The split-key decode attention (DML_CUDA_SDPA_SPLIT) against the row-parallel kernels: speed
    # and the same greedy tokens / logits; the runs below keep it on.
    set_knob(art, "DML_CUDA_SDPA_SPLIT", 0)
    base = dinoml_decode(art, prompt, a.decode, shape["vocab"])
    set_knob(art, "DML_CUDA_SDPA_SPLIT", 1)
    res["sdpa_split_off"] = {"decode_tok_s": base["decode_tok_s"], "step_gpu_ms": base["step_gpu_ms"]}
    log(f"DML_CUDA_SDPA_SPLIT=0: decode {base['decode_tok_s']:.1f} tok/s, one step {base['step_gpu_ms']:.3f} ms GPU")
    # The int8 GEMV's rows per warp (DML_CUDA_QGEMV_ROWS) A/B: a fresh module each (new weights
    # state, so no CUDA graph of another setting is replayed); the default setting last.
    res["qgemv_rows"] = {}
    for rows in a.rows:
        set_knob(art, "DML_CUDA_QGEMV_ROWS", rows)
        r = dinoml_decode(art, prompt, a.decode, shape["vocab"])
        res["qgemv_rows"][rows] = {"decode_tok_s": r["decode_tok_s"], "step_gpu_ms": r["step_gpu_ms"],
                                   "tokens": r["tokens"]}
        log(f"DML_CUDA_QGEMV_ROWS={rows}: decode {r['decode_tok_s']:.1f} tok/s, one step {r['step_gpu_ms']:.3f} ms GPU")
    set_knob(art, "DML_CUDA_QGEMV_ROWS", 0)
    d = dinoml_decode(art, prompt, a.decode, shape["vocab"], profile=True)
    for r in res["qgemv_rows"].values():
        r["same_tokens_as_default"] = r.pop("tokens") == d["tokens"]
    log(f"profile of one step (nodes synchronised): {json.dumps(d['profile'], indent=1)}")
    k = min(len(base["logits"]), len(d["logits"]))
    res["sdpa_split_vs_off"] = {
        "same_tokens": base["tokens"] == d["tokens"],
        "max_rel_logit_err": float((np.abs(d["logits"][:k] - base["logits"][:k]).max(axis=1) /
                                    np.abs(base["logits"][:k]).max(axis=1)).max())}
    log(f"split-key attention vs row-parallel: {res['sdpa_split_vs_off']}")
    if a.gemv_bandwidth:
        import quant_run
        bw_rows = []
        for rows in a.rows + [0]:
            set_knob(art, "DML_CUDA_QGEMV_ROWS", rows)
            log(f"GEMV bandwidth with DML_CUDA_QGEMV_ROWS={rows}:")
            quant_run.bandwidth("/tmp", bw_rows)  # the kernel library of /tmp/llm7b/artifact
        res["gemv_bandwidth"] = bw_rows
        set_knob(art, "DML_CUDA_QGEMV_ROWS", 0)
    res["dinoml"] = {k: v for k, v in d.items() if k != "logits"}
    res["dinoml"]["frac_of_bound"] = d["decode_tok_s"] / bound
    res["dinoml"]["step_frac_of_bound"] = (1e3 / bound) / d["step_gpu_ms"]
    log(f"DinoML: prefill {d['prefill_tok_s']:.0f} tok/s, decode {d['decode_tok_s']:.1f} tok/s end to end = "
        f"{d['decode_tok_s'] / bound:.1%} of the bound; one step {d['step_gpu_ms']:.3f} ms GPU = "
        f"{res['dinoml']['step_frac_of_bound']:.1%} of the bound; graphs {d['graph_stats']}")
    if a.llama_cuda and os.path.isdir(a.llama_cuda):
        r = llama_cpp(gguf_path, prompt, a.decode, meta["ctx"], a.llama_cuda)
        if "error" in r:
            log(f"llama.cpp CUDA failed: {r['error']}")
            res["llama_cpp"] = {"error": r["error"]}
        else:
            lt = r.pop("logits")
            same = next((i for i in range(a.decode) if r["tokens"][i] != d["tokens"][i]), a.decode)
            k = min(len(lt), len(d["logits"]), same + 1)
            err = float((np.abs(lt[:k] - d["logits"][:k]).max(axis=1) / np.abs(lt[:k]).max(axis=1)).max())
            res["llama_cpp"] = dict(r, identical_greedy_steps=same, max_rel_logit_err=err)
            log(f"llama.cpp CUDA: prefill {r['prefill_tok_s']:.0f} tok/s, decode {r['decode_tok_s']:.1f} tok/s; "
                f"DinoML / llama.cpp decode {d['decode_tok_s'] / r['decode_tok_s']:.2f}x; greedy tokens identical for "
                f"{same}/{a.decode} steps, logits within {err:.2e} of max |logit| (compared steps {k})")
    if not a.no_hf:
        try:
            res["hf"] = hf_generate(shape, prompt, a.decode)
            log(f"HF transformers generate bf16: {res['hf']['tok_s']:.1f} tok/s; DinoML / HF "
                f"{d['decode_tok_s'] / res['hf']['tok_s']:.2f}x")
        except Exception as e:  # noqa: BLE001 - report, do not lose the other results
            res["hf"] = {"error": repr(e)}
            log(f"HF failed: {e!r}")
    json.dump(res, open(os.path.join(a.result_dir, "llm7b.json"), "w"), indent=1, default=str)
    print(json.dumps({k: v for k, v in res.items() if k != "shape"}, default=str))


if __name__ == "__main__":
    main()
