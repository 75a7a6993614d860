"""Builds the bundle for the CUDA profiling check (issue 4, "Profiling on the GPU") where the
compiler is built (no GPU needed): the models as .dinoir.json + constants, their reference
weights, and a relocatable copy of the compiler (bin/dinoml, lib/ with the DinoML libraries and
the system libraries it needs that a bare GPU machine lacks, home/ with the kernel headers), so
tests/gpu/profile_run.py can run `dinoml compile --target cuda --profile` on the GPU machine.

Models (every one has a dynamic dim with several buckets, so winners can differ per bucket):
  * qgemm_q4k: y = x[m, 2048] · W[4096, 2048]ᵀ, W kept as q4_K blocks; m buckets 16 / 512
    (decode-like vs prefill-like: int8 GEMV vs dequantize + cuBLASLt).
  * mlp_f16: y = relu(x W1ᵀ + b1) W2ᵀ, fp16, x[m, 1024], W 1024x1024; m buckets 8 / 64 / 1024.
  * conv_f16: relu(conv2d(x[n, 64, 28, 28], W[64, 64, 3, 3]) + b), fp16; n buckets 1 / 8.
  * sdpa_f16: attention(q, k, v) of [1, 8, s, 64] fp16; s buckets 64 / 1024.

    PYTHONPATH=python DINOML_BUILD_DIR=build python3 tests/gpu/profile_prepare.py OUT_DIR
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Libraries every GPU machine's base system has (glibc, the C++ runtime); everything else that
# bin/dinoml needs is copied into lib/.
SYSTEM = ("linux-vdso", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux", "libstdc++.so",
          "libgcc_s.so")


def save(spec, d, case):
    os.makedirs(d, exist_ok=True)
    spec.save(os.path.join(d, "graph.dinoir.json"))
    json.dump(case, open(os.path.join(d, "case.json"), "w"), indent=1)


def models(dml, out):
    rng = np.random.default_rng(5)
    # qgemm q4_K
    N, K = 4096, 2048
    d = os.path.join(out, "models", "qgemm_q4k")
    os.makedirs(d, exist_ok=True)
    gguf = os.path.join(d, "w.gguf")
    w = (rng.standard_normal((N, K), dtype=np.float32) / np.sqrt(K)).astype(np.float32)
    dml.gguf.write(gguf, [("general.architecture", "str", "test")], [("w", w, "q4_K")])
    np.save(os.path.join(d, "w_deq.npy"), dml.gguf.tensor(gguf, "w"))
    m = dml.Dim("m", min=1, max=512, typical=1, buckets=(16, 512))

    class Q(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([N, K])

        def forward(self, x):
            return {"y": dml.ops.gemm_rcr(x, self.w)}

    spec = dml.trace(Q(), inputs={"x": dml.TensorSpec([m, K], "float32")},
                     constants={"w": dml.gguf_constant(gguf, "w", "keep")}, name="qgemm_q4k")
    save(spec, d, {"kind": "qgemm", "dims": [{"m": 5}, {"m": 16}, {"m": 300}, {"m": 512}]})
    os.remove(gguf)

    # fp16 MLP
    E = 1024
    d = os.path.join(out, "models", "mlp_f16")
    os.makedirs(d, exist_ok=True)
    w1 = (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float16)
    b1 = (rng.standard_normal(E) * 0.1).astype(np.float16)
    w2 = (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float16)
    np.savez(os.path.join(d, "ref.npz"), w1=w1, b1=b1, w2=w2)
    m = dml.Dim("m", min=1, max=1024, typical=8, buckets=(8, 64, 1024))

    class MLP(dml.Module):
        def __init__(self):
            self.w1 = dml.Parameter([E, E], "float16")
            self.b1 = dml.Parameter([E], "float16")
            self.w2 = dml.Parameter([E, E], "float16")

        def forward(self, x):
            return {"y": dml.ops.gemm_rcr(dml.ops.gemm_rcr_bias_relu(x, self.w1, self.b1), self.w2)}

    spec = dml.trace(MLP(), inputs={"x": dml.TensorSpec([m, E], "float16")},
                     constants={"w1": w1, "b1": b1, "w2": w2}, name="mlp_f16")
    save(spec, d, {"kind": "mlp", "dims": [{"m": 3}, {"m": 40}, {"m": 1000}]})

    # fp16 conv
    d = os.path.join(out, "models", "conv_f16")
    os.makedirs(d, exist_ok=True)
    cw = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float16)
    cb = (rng.standard_normal(64) * 0.1).astype(np.float16)
    np.savez(os.path.join(d, "ref.npz"), w=cw, b=cb)
    n = dml.Dim("n", min=1, max=8, typical=1, buckets=(1, 8))

    class C(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([64, 64, 3, 3], "float16")
            self.b = dml.Parameter([64], "float16")

        def forward(self, x):
            return {"y": dml.ops.relu(dml.ops.conv2d(x, self.w, self.b, padding=1))}

    spec = dml.trace(C(), inputs={"x": dml.TensorSpec([n, 64, 28, 28], "float16")},
                     constants={"w": cw, "b": cb}, name="conv_f16")
    save(spec, d, {"kind": "conv", "dims": [{"n": 1}, {"n": 5}]})

    # fp16 attention
    d = os.path.join(out, "models", "sdpa_f16")
    s = dml.Dim("s", min=1, max=1024, typical=64, buckets=(64, 1024))

    class A(dml.Module):
        def forward(self, q, k, v):
            return {"y": dml.ops.scaled_dot_product_attention(q, k, v)}

    spec = dml.trace(A(), inputs={n_: dml.TensorSpec([1, 8, s, 64], "float16") for n_ in ("q", "k", "v")},
                     name="sdpa_f16")
    save(spec, d, {"kind": "sdpa", "dims": [{"s": 50}, {"s": 700}]})


def compiler_bundle(out, build):
    os.makedirs(os.path.join(out, "bin"), exist_ok=True)
    lib = os.path.join(out, "lib")
    os.makedirs(lib, exist_ok=True)
    shutil.copy2(os.path.join(build, "dinoml"), os.path.join(out, "bin", "dinoml"))
    for so in ("libdinoml_runtime.so", "libdinoml_cpu_kernels.so", "libdinoml_cuda_kernels.so"):
        shutil.copy2(os.path.join(build, so), os.path.join(lib, so))
    # System libraries of bin/dinoml (and of the DinoML libraries) other than glibc / libstdc++.
    seen = set()
    for f in [os.path.join(out, "bin", "dinoml")] + [os.path.join(lib, s) for s in os.listdir(lib)]:
        for line in subprocess.run(["ldd", f], capture_output=True, text=True).stdout.splitlines():
            parts = line.split("=>")
            if len(parts) != 2 or not parts[1].strip().startswith("/"):
                continue
            name, path = parts[0].strip(), parts[1].split("(")[0].strip()
            if name.startswith(SYSTEM) or "cuda" in path or name in seen:
                continue
            seen.add(name)
            os.makedirs(os.path.join(out, "syslib"), exist_ok=True)
            shutil.copy2(path, os.path.join(out, "syslib", name))
    home = os.path.join(out, "home")
    for sub in ("include", "kernels/common", "kernels/cpu", "kernels/cuda"):
        src = os.path.join(ROOT, sub)
        dst = os.path.join(home, sub)
        shutil.copytree(src, dst, ignore=lambda d, names: [n for n in names if n.endswith((".cu", ".cpp", ".c"))],
                        dirs_exist_ok=True)
    return sorted(seen)


def main():
    out = sys.argv[1]
    build = os.environ.get("DINOML_BUILD_DIR", os.path.join(ROOT, "build"))
    import dinoml as dml
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    models(dml, out)
    libs = compiler_bundle(out, build)
    for f in ("profile_run.py", "dml_ctypes.py"):
        shutil.copy2(os.path.join(ROOT, "tests", "gpu", f), os.path.join(out, f))
    print("bundle", out, "system libraries carried:", " ".join(libs))


if __name__ == "__main__":
    main()
