"""Builds the bundle for the CUDA profiling check (issue 4, "Profiling on the GPU") where the
compiler is built (no GPU needed): the models as .dinoir.json + constants, their reference
weights, and a relocatable copy of the compiler (bin/dinoml, lib/ with the DinoML libraries and
the system libraries it needs that a bare GPU machine lacks, home/ with the kernel headers), so
tests/gpu/profile_run.py can run `dinoml compile --target cuda --profile` on the GPU machine.

Models (every one has a dynamic dim with several buckets, so winners can differ per bucket):
  * qgemm_q8: y = x[m, 2048] · W[4096, 2048]ᵀ, W kept as q8_0 blocks (quantized here as ggml
    does); m buckets 16 / 512 (decode-like vs prefill-like: int8 GEMV vs dequantize + cuBLASLt).
  * mlp_f16: y = relu(x W1ᵀ + b1) W2ᵀ, fp16, x[m, 1024], W 1024x1024; m buckets 8 / 64 / 1024.
  * conv_f16: relu(conv2d(x[n, 64, 28, 28], W[64, 64, 3, 3]) + b), fp16; n buckets 1 / 8.
  * sdpa_f16: attention(q, k, v) of [1, 8, s, 64] fp16; s buckets 64 / 1024.

    DINOML_BUILD_DIR=build python3 tests/gpu/profile_prepare.py OUT_DIR

The graphs are written as IR JSON directly (no Python extension needed).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python", "dinoml", "tools"))
from ir_json import Graph, dim  # noqa: E402
# Libraries every GPU machine's base system has (glibc, the C++ runtime); everything else that
# bin/dinoml needs is copied into lib/.
SYSTEM = ("linux-vdso", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux", "libstdc++.so",
          "libgcc_s.so")
CUDA_LIBS = ("libcuda.", "libcudart", "libcublas", "libnvrtc", "libnccl", "libnvJitLink")


def quantize_q8_0(w):
    """ggml's q8_0: per 32 values d = amax / 127 stored as fp16, q = round(x / d) as int8. Returns the
    GGUF block bytes and the exact dequantized weights (fp16 d widened, times q)."""
    n, k = w.shape
    b = w.reshape(n, k // 32, 32).astype(np.float32)
    d = np.abs(b).max(axis=2) / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
    q = np.clip(np.rint(b * inv[..., None]), -127, 127).astype(np.int8)
    dh = d.astype(np.float16)
    blocks = np.zeros((n, k // 32), dtype=[("d", "<f2"), ("qs", "i1", (32,))])
    blocks["d"], blocks["qs"] = dh, q
    deq = (dh.astype(np.float32)[..., None] * q.astype(np.float32)).reshape(n, k)
    return blocks.tobytes(), deq


def dequantize_q8_0(data: bytes, n, k):
    blocks = np.frombuffer(data, dtype=[("d", "<f2"), ("qs", "i1", (32,))]).reshape(n, k // 32)
    return (blocks["d"].astype(np.float32)[..., None] * blocks["qs"].astype(np.float32)).reshape(n, k)


def models(out):
    rng = np.random.default_rng(5)
    conv_attrs = {"stride": {"ints": [1, 1]}, "padding": {"ints": [1, 1, 1, 1]}, "dilation": {"ints": [1, 1]},
                  "groups": {"int": 1}}

    # qgemm_q8: y = x · Wᵀ with W kept as q8_0 blocks; m buckets 16 / 512.
    N, K = 4096, 2048
    data, deq = quantize_q8_0(rng.standard_normal((N, K), dtype=np.float32) / np.sqrt(K))
    g = Graph("qgemm_q8", [dim("m", 1, 512, 1, [16, 512])])
    g.tensor("x", "float32", ["m", K], "input")
    g.const("w", data, "float32", [N, K], {"type": "q8_0", "block_size": 32, "block_bytes": 34})
    g.tensor("t", "float32", ["m", N], "intermediate")
    g.node("gemm_rcr", ["x", "w"], ["t"])
    g.output("t", "y")
    d = os.path.join(out, "models", "qgemm_q8")
    g.save(d, {"kind": "qgemm", "dims": [{"m": 5}, {"m": 16}, {"m": 300}, {"m": 512}]})
    # profile_run.py dequantizes the blocks of constants.bin the same way (no second copy carried)
    assert np.array_equal(deq, dequantize_q8_0(data, N, K))

    # mlp_f16: relu(x W1ᵀ + b1) W2ᵀ; m buckets 8 / 64 / 1024.
    E = 1024
    w1 = (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float16)
    b1 = (rng.standard_normal(E) * 0.1).astype(np.float16)
    w2 = (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float16)
    g = Graph("mlp_f16", [dim("m", 1, 1024, 8, [8, 64, 1024])])
    g.tensor("x", "float16", ["m", E], "input")
    g.const("w1", w1.tobytes(), "float16", [E, E])
    g.const("b1", b1.tobytes(), "float16", [E])
    g.const("w2", w2.tobytes(), "float16", [E, E])
    g.tensor("h", "float16", ["m", E], "intermediate")
    g.tensor("t", "float16", ["m", E], "intermediate")
    g.node("gemm_rcr_bias_relu", ["x", "w1", "b1"], ["h"])
    g.node("gemm_rcr", ["h", "w2"], ["t"])
    g.output("t", "y")
    d = os.path.join(out, "models", "mlp_f16")
    g.save(d, {"kind": "mlp", "dims": [{"m": 3}, {"m": 40}, {"m": 1000}]})

    # conv_f16: relu(conv2d(x, W, b)), 3x3 pad 1; n buckets 1 / 8.
    cw = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float16)
    cb = (rng.standard_normal(64) * 0.1).astype(np.float16)
    g = Graph("conv_f16", [dim("n", 1, 8, 1, [1, 8])])
    g.tensor("x", "float16", ["n", 64, 28, 28], "input")
    g.const("w", cw.tobytes(), "float16", [64, 64, 3, 3])
    g.const("b", cb.tobytes(), "float16", [64])
    g.tensor("c", "float16", ["n", 64, 28, 28], "intermediate")
    g.tensor("t", "float16", ["n", 64, 28, 28], "intermediate")
    g.node("conv2d_bias", ["x", "w", "b"], ["c"], conv_attrs)
    g.node("relu", ["c"], ["t"])
    g.output("t", "y")
    d = os.path.join(out, "models", "conv_f16")
    g.save(d, {"kind": "conv", "dims": [{"n": 1}, {"n": 5}]})

    # sdpa_f16: attention over [1, 8, s, 64]; s buckets 64 / 1024.
    g = Graph("sdpa_f16", [dim("s", 1, 1024, 64, [64, 1024])])
    for t in ("q", "k", "v"):
        g.tensor(t, "float16", [1, 8, "s", 64], "input")
    g.tensor("t", "float16", [1, 8, "s", 64], "intermediate")
    g.node("scaled_dot_product_attention", ["q", "k", "v"], ["t"])
    g.output("t", "y")
    g.save(os.path.join(out, "models", "sdpa_f16"), {"kind": "sdpa", "dims": [{"s": 50}, {"s": 700}]})


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
            # CUDA libraries come from the GPU machine (libicudata is ICU, not CUDA).
            if name.startswith(SYSTEM) or name.startswith(CUDA_LIBS) or "/cuda" in path or name in seen:
                continue
            seen.add(name)
            os.makedirs(os.path.join(out, "syslib"), exist_ok=True)
            shutil.copy2(path, os.path.join(out, "syslib", name))
    # `dinoml benchmark-ops cuda` runs python/dinoml/tools/benchmark_ops_cuda.py found next to bin/.
    tools = os.path.join(out, "python", "dinoml", "tools")
    os.makedirs(tools, exist_ok=True)
    for f in ("benchmark_ops_cuda.py", "ir_json.py", "dml_ctypes.py", "cuda_timing.py"):
        shutil.copy2(os.path.join(ROOT, "python", "dinoml", "tools", f), os.path.join(tools, f))
    # Debug symbols are most of the binaries' size and a carried tree is limited (64 MiB a call).
    for d in ("bin", "lib", "syslib"):
        p = os.path.join(out, d)
        for f in sorted(os.listdir(p)) if os.path.isdir(p) else []:
            subprocess.run(["strip", "--strip-debug", os.path.join(p, f)], check=False)
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
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    models(out)
    libs = compiler_bundle(out, build)
    shutil.copy2(os.path.join(ROOT, "tests", "gpu", "profile_run.py"), os.path.join(out, "profile_run.py"))
    shutil.copy2(os.path.join(ROOT, "python", "dinoml", "tools", "dml_ctypes.py"), os.path.join(out, "dml_ctypes.py"))
    print("bundle", out, "system libraries carried:", " ".join(libs))


if __name__ == "__main__":
    main()
