"""Builds the quantized-weight GPU bundle (issue 6) where the compiler runs (nvcc, no GPU):

  * qgemm_<path> (auto, gemv, int8, dequant_gemm): one CUDA artifact holding gemm_rcr / gemm_rcr_bias_relu / gemm_rcr_bias_add with a
    weight kept as GGUF blocks, for each of q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K (int8:
    q4_0 q8_0 q4_K q6_K), the path forced by DINOML_CUDA_QGEMM except for auto. The oracle's dequantized weights
    (dml.gguf.tensor = the reference dequantizer, bit-identical to ggml) are stored beside.
  * llama_<quant>: the tiny random llama (examples/llama/make_random_gguf.py, f32 / q4_k_m / q4_0)
    compiled with `dinoml compile examples/llama/model.py --gguf FILE --target cuda`, and the CPU
    artifact's greedy run (prompt + 32 tokens, logits of every step) from this machine: CPU
    default (int8 dot products on activations quantized to 8 bits) and CPU exact
    (DINOML_QGEMM_DOT_MAX_M=0: dequantized weights, fp32).
  * arch_<name>: the other GGUF architectures of dinoml.models (qwen2, qwen3, gemma2, gemma3, phi3,
    mixtral; f32 random weights) compiled straight from the file, with the same CPU references.

    PYTHONPATH=python DINOML_BUILD_DIR=build python3 tests/gpu/quant_prepare.py OUT_DIR [--arch sm_90a] [--only WORD]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QTYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]
N_, K_ = 72, 512          # N not a multiple of the GEMV's 16 rows per block
GRID_M = [1, 3, 8, 9, 40]
PROMPT = [1, 300, 451, 27, 999, 512, 260, 870, 42, 613, 777, 301]
NGEN = 32


I8_TYPES = ["q4_0", "q8_0", "q4_K", "q6_K"]


def qgemm_case(dml, out, path, arch):
    QTYPES = I8_TYPES if path == "int8" else globals()["QTYPES"]
    d = os.path.join(out, f"qgemm_{path}")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(11)
    gguf = os.path.join(d, "w.gguf")
    ws = {t: (rng.standard_normal((N_, K_), dtype=np.float32) / np.sqrt(K_)).astype(np.float32) for t in QTYPES}
    dml.gguf.write(gguf, [("general.architecture", "str", "test")], [(f"w_{t}", ws[t], t) for t in QTYPES])
    bias = rng.standard_normal(N_).astype(np.float32)
    deq = {t: dml.gguf.tensor(gguf, f"w_{t}") for t in QTYPES}
    np.savez(os.path.join(d, "ref.npz"), bias=bias, **{f"w_{t}": deq[t] for t in QTYPES})
    m = dml.Dim("m", min=1, max=64, typical=1, buckets=(1, 8, 64))

    class M(dml.Module):
        def __init__(self):
            for t in QTYPES:
                setattr(self, f"w_{t}", dml.Parameter([N_, K_]))
            self.b = dml.Parameter([N_])

        def forward(self, x, r):
            o = {}
            for t in QTYPES:
                w = getattr(self, f"w_{t}")
                o[f"{t}_rcr"] = dml.ops.gemm_rcr(x, w)
                o[f"{t}_bias_relu"] = dml.ops.gemm_rcr_bias_relu(x, w, self.b)
                o[f"{t}_bias_add"] = dml.ops.gemm_rcr_bias_add(x, w, self.b, r)
            return o

    consts = {f"w_{t}": dml.gguf_constant(gguf, f"w_{t}", "keep") for t in QTYPES}
    consts["b"] = bias
    spec = dml.trace(M(), inputs={"x": dml.TensorSpec([m, K_], "float32"), "r": dml.TensorSpec([m, N_], "float32")},
                     constants=consts, name=f"qgemm_{path}")
    if path != "auto":
        os.environ["DINOML_CUDA_QGEMM"] = path
    art = dml.compile(spec, target="cuda", arch=arch, tf32=False, out=os.path.join(d, "artifact"))
    os.environ.pop("DINOML_CUDA_QGEMM", None)
    os.remove(gguf)
    graph = json.load(open(os.path.join(art.path, "graph.dinoir.json")))
    kept = sorted(t["quant"]["type"] for t in graph["tensors"] if "quant" in t)
    assert kept == sorted(QTYPES), kept
    meta = {"kind": "qgemm", "path": path, "qtypes": QTYPES, "N": N_, "K": K_, "grid_m": GRID_M,
            "kernels": sorted({k["selected"] for k in art.kernel_manifest})}
    json.dump(meta, open(os.path.join(d, "case.json"), "w"), indent=1)


def index_case(dml, out, arch):
    """gather (axis 1, negative indices), embedding, argmax (two axes, float32 and float16) and a
    kv_cache_write whose cache is an input (the copy path; a repeated position), checked on the GPU
    against torch."""
    d = os.path.join(out, "index_ops")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(5)
    table = rng.standard_normal((20, 8)).astype(np.float32)
    np.save(os.path.join(d, "table.npy"), table)
    t = dml.Dim("t", min=1, max=8, typical=3, buckets=(8,))

    class M(dml.Module):
        def __init__(self):
            self.table = dml.Parameter([20, 8])

        def forward(self, x, xh, idx, tok, cache, vals, pos):
            return {"gather": dml.ops.gather(x, idx, axis=1), "embedding": dml.ops.embedding(tok, self.table),
                    "argmax_last": dml.ops.argmax(x, axis=-1), "argmax_mid": dml.ops.argmax(x, axis=1),
                    "argmax_f16": dml.ops.argmax(xh, axis=-1), "kv": dml.ops.kv_cache_write(cache, vals, pos)}

    spec = dml.trace(M(), inputs={"x": dml.TensorSpec([4, 10, 6], "float32"), "xh": dml.TensorSpec([3, 50], "float16"),
                                  "idx": dml.TensorSpec([5], "int64"), "tok": dml.TensorSpec([t], "int32"),
                                  "cache": dml.TensorSpec([2, 16, 8], "float32"),
                                  "vals": dml.TensorSpec([2, t, 8], "float32"), "pos": dml.TensorSpec([t], "int64")},
                     constants={"table": table}, name="index_ops")
    art = dml.compile(spec, target="cuda", arch=arch, out=os.path.join(d, "artifact"))
    json.dump({"kind": "index", "kernels": sorted({k["selected"] for k in art.kernel_manifest})},
              open(os.path.join(d, "case.json"), "w"), indent=1)


CPU_RUN = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[4])
from dinoml.tools.generate import generate
r = generate(sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]))
np.save(sys.argv[5], r["logits"].astype(np.float32))
print(json.dumps({"tokens": r["tokens"], "decode_tok_s": r["decode_tok_s"]}))
"""


def cpu_generate(art, out_npy, exact):
    env = dict(os.environ)
    if exact:
        env["DINOML_QGEMM_DOT_MAX_M"] = "0"  # the CPU qgemm's dequantize path for every M (exact weights)
    r = subprocess.run([sys.executable, "-c", CPU_RUN, art, json.dumps(PROMPT), str(NGEN), os.path.join(ROOT, "python"),
                        out_npy], capture_output=True, text=True, env=env, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def llama_case(dml, out, key, arch, tmp):
    quant = key.split("_notf32")[0]
    notf32 = key.endswith("_notf32")
    sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
    import make_random_gguf
    import model as llama_model
    d = os.path.join(out, f"llama_{key}")
    os.makedirs(d, exist_ok=True)
    gguf = os.path.join(tmp, f"tiny-{quant}.gguf")
    if not os.path.exists(gguf):
        make_random_gguf.make(gguf, "tiny", quant, seed=7)
    cpu = dml.compile(llama_model.build_spec(gguf, ctx=64, max_seq=16), target="cpu", out=os.path.join(tmp, f"cpu_{quant}"))
    ref = {"prompt": PROMPT, "n": NGEN, "quant": key}
    ref["cpu_default"] = cpu_generate(cpu.path, os.path.join(d, "cpu_default_logits.npy"), False)
    ref["cpu_exact"] = cpu_generate(cpu.path, os.path.join(d, "cpu_exact_logits.npy"), True)
    # The command line, through the Python CLI.
    cmd = [sys.executable, "-m", "dinoml.cli", "compile", os.path.join(ROOT, "examples", "llama", "model.py"), "--gguf",
           gguf, "--model-arg", "ctx=64", "--model-arg", "max_seq=16", "--target", "cuda", "--arch", arch, "--out",
           os.path.join(d, "artifact")] + (["--no-tf32"] if notf32 else [])
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"CUDA compile of llama {quant} failed:\n{r.stdout}\n{r.stderr}")
    ref["command"] = "dinoml compile examples/llama/model.py --gguf tiny-%s.gguf --model-arg ctx=64 --model-arg max_seq=16 " \
                     "--target cuda --arch %s%s" % (quant, arch, " --no-tf32" if notf32 else "")
    man = json.load(open(os.path.join(d, "artifact", "kernel_manifest.json")))
    ref["kernels"] = sorted({k["selected"] for k in (man if isinstance(man, list) else man.get("nodes", []))})
    json.dump({"kind": "llama", **ref}, open(os.path.join(d, "case.json"), "w"), indent=1)


def arch_case(dml, out, name, arch, tmp):
    """A GGUF architecture of the decoder (examples/llama/make_random_gguf.py ARCH_PRESETS, f32
    weights) compiled straight from the file for CUDA (`dinoml compile FILE.gguf`), with the CPU
    artifact's greedy run as the reference (same `llama` kind: quant_run.py compares them)."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
    import make_random_gguf
    from dinoml.models.decoder import build_spec
    d = os.path.join(out, f"arch_{name}")
    os.makedirs(d, exist_ok=True)
    gguf = os.path.join(tmp, f"arch-{name}.gguf")
    make_random_gguf.make_arch(gguf, name, "f32", seed=7)
    cpu = dml.compile(build_spec(gguf, ctx=64, max_seq=16), target="cpu", out=os.path.join(tmp, f"cpu_arch_{name}"))
    ref = {"prompt": PROMPT, "n": NGEN, "quant": f"{name} f32"}
    ref["cpu_default"] = cpu_generate(cpu.path, os.path.join(d, "cpu_default_logits.npy"), False)
    ref["cpu_exact"] = cpu_generate(cpu.path, os.path.join(d, "cpu_exact_logits.npy"), True)
    cmd = [sys.executable, "-m", "dinoml.cli", "compile", gguf, "--model-arg", "ctx=64", "--model-arg", "max_seq=16",
           "--target", "cuda", "--arch", arch, "--out", os.path.join(d, "artifact")]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"CUDA compile of {name} failed:\n{r.stdout}\n{r.stderr}")
    ref["command"] = f"dinoml compile arch-{name}.gguf --model-arg ctx=64 --model-arg max_seq=16 --target cuda --arch {arch}"
    man = json.load(open(os.path.join(d, "artifact", "kernel_manifest.json")))
    ref["kernels"] = sorted({k["selected"] for k in (man if isinstance(man, list) else man.get("nodes", []))})
    json.dump({"kind": "llama", **ref}, open(os.path.join(d, "case.json"), "w"), indent=1)


ARCH_CASES = ("qwen2", "qwen3", "gemma2", "gemma3", "phi3", "mixtral")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args()
    import tempfile

    import dinoml as dml
    os.makedirs(a.out, exist_ok=True)
    keys = ["index_ops"] + [f"qgemm_{p}" for p in ("auto", "gemv", "int8", "dequant_gemm")] + \
        [f"llama_{q}" for q in ("f32", "f32_notf32", "q4_k_m", "q4_0")] + [f"arch_{n}" for n in ARCH_CASES]
    done = []
    with tempfile.TemporaryDirectory() as tmp:
        for key in keys:
            if a.only and not any(o in key for o in a.only):
                continue
            t0 = time.time()
            if key == "index_ops":
                index_case(dml, a.out, a.arch)
            elif key.startswith("qgemm_"):
                qgemm_case(dml, a.out, key[len("qgemm_"):], a.arch)
            elif key.startswith("arch_"):
                arch_case(dml, a.out, key[len("arch_"):], a.arch, tmp)
            else:
                llama_case(dml, a.out, key[len("llama_"):], a.arch, tmp)
            done.append(key)
            print(f"[quant-prepare] {key}: {time.time() - t0:.1f} s", flush=True)
    json.dump({"arch": a.arch, "cases": done}, open(os.path.join(a.out, "index.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
