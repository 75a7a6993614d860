"""ONNX real models on CUDA (issue 5): exports the models of bench/onnx/real_models.py (same
architectures, weights and BatchNorm statistics), imports them with dml.from_onnx, compiles them
for CUDA (fp32, --no-tf32, dynamic batch 1..8 with buckets 2, 8) and stores, per batch size, the
input and PyTorch's CPU fp32 output next to the artifact. onnx_run.py runs them on the GPU.

    PYTHONPATH=python DINOML_BUILD_DIR=build python3 tests/gpu/onnx_prepare.py OUT_DIR [--arch sm_90a] [names...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "onnx"))
import real_models as R  # noqa: E402

import dinoml as dml  # noqa: E402

BATCHES = (1, 3, 8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("names", nargs="*", default=["resnet18", "mobilenet_v2", "bert", "lstm"])
    a = ap.parse_intermixed_args()
    os.makedirs(a.out, exist_ok=True)
    index = []
    for name in a.names:
        t0 = time.time()
        model, feat = R.build(name)
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        torch.onnx.export(model, (torch.randn(2, *feat),), path, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17)
        spec = dml.from_onnx(path, dims={"batch": R.BATCH})
        art = dml.compile(spec, target="cuda", arch=a.arch, tf32=False, out=os.path.join(d, "artifact"))
        os.remove(path)  # the weights are in the artifact already; keep the bundle small
        g = torch.Generator().manual_seed(5)
        data = {}
        for b in BATCHES:
            x = torch.randn(b, *feat, generator=g)
            with torch.no_grad():
                data[f"x{b}"] = x.numpy()
                data[f"y{b}"] = model(x).numpy()
        np.savez_compressed(os.path.join(d, "io.npz"), **data)
        kernels = sorted({k["selected"] for k in art.kernel_manifest})
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump({"name": name, "batches": list(BATCHES), "tol": R.TOL, "kernels": kernels}, f, indent=1)
        index.append(name)
        print(f"[onnx-prepare] {name}: compiled for {a.arch} in {time.time() - t0:.1f} s", flush=True)
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump({"arch": a.arch, "models": index}, f, indent=1)


if __name__ == "__main__":
    main()
