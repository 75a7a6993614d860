"""Builds the CUDA parity/benchmark bundle where the compiler runs (this needs the DinoML Python
extension and nvcc, not a GPU): one artifact per case of cases.py, its weights and a case.json.

    PYTHONPATH=python DINOML_BUILD_DIR=build python3 tests/gpu/prepare.py OUT_DIR [--arch sm_90a] [--only NAME]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as C  # noqa: E402


def build_spec(dml, case, W):
    dims = {n: dml.Dim(n, min=lo, max=hi, typical=hi, buckets=tuple(b)) for n, (lo, hi, b) in case.dims.items()}
    specs = {n: dml.TensorSpec([dims[s] if isinstance(s, str) else s for s in shape], case.dtype)
             for n, shape in case.inputs.items()}
    if case.build == "transformer":
        return dml.trace(C.transformer_module(dml, case.dtype), inputs=specs, constants=W, name=case.key)
    if case.build == "mlp":
        return dml.trace(C.mlp_module(dml, case.dtype), inputs=specs, constants=W, name=case.key)
    if case.build in C.RESNET:
        consts = dict(W)
        for k in W:  # BatchNorm2d's unused step counter
            if k.endswith(".running_mean"):
                consts[k[: -len("running_mean")] + "num_batches_tracked"] = np.zeros((), np.int64)
        return dml.trace(C.resnet_module(dml, case.build, case.dtype), inputs=specs, constants=consts, name=case.key)

    class M(dml.Module):
        def __init__(self):
            for n, (shape, _) in case.weights.items():
                setattr(self, n, dml.Parameter(shape, case.dtype))

        def forward(self, **X):
            return case.build(dml.ops, {n: getattr(self, n) for n in case.weights}, X)

    return dml.trace(M(), inputs=specs, constants=W, name=case.key)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args()
    import dinoml as dml
    os.makedirs(a.out, exist_ok=True)
    index = []
    # (case, gemm implementation, arch): every case with the default (cuBLASLt); the own GEMM
    # kernels on the GEMM-heavy cases (SIMT for float32, mma.sync for fp16/bf16); and one sm_80
    # artifact that an sm_90 GPU must refuse before running anything.
    todo = []
    # cases that exist to run one unprofiled sm_90a default through an artifact: prepare fails if it is not chosen
    EXPECT_DEFAULT = {"gemm_gelu_epi": "wgmma_sm90a_persistent_128x256_epilogue_warps",
                      "gemm_skinny_pf": "skinny_pdl_weight_prefetch", "gemm_skinny_packed": "skinny_packed_pdl",
                      "gemm_skinny_wide": "skinny_packed_pdl"}
    for c in C.cases() + C.bench_cases():
        todo.append((c, "cublaslt", a.arch))
        if c.name in ("conv_pool", "sdpa", "sdpa_strided") and c.dtype != "float32":
            todo.append((c, "simt", a.arch))  # the SIMT conv / attention kernels (float32 uses them by default)
        if c.name == "sdpa_strided":
            todo.append((c, "mma", a.arch))  # the mma.sync flash kernel through strides
        if c.name in ("gemm", "bmm_softmax"):
            todo.append((c, "simt" if c.dtype == "float32" else "mma", a.arch))
        if c.name in ("gemm", "gemm_wgmma", "bmm_softmax") and c.dtype != "float32" and a.arch == "sm_90a":
            todo.append((c, "wgmma", a.arch))  # the own sm_90a kernel (RRR nodes fall back to mma.sync)
        if c.name in ("gemm", "gemm_wgmma") and c.dtype != "float32":
            todo.append((c, "skinny", a.arch))  # the own small-M kernel (any M runs; RRR nodes: mma.sync)
        if c.name == "conv_nhwc" and c.dtype == "bfloat16":
            todo.append((c, "nchwconv", a.arch))  # DINOML_CUDA_CONV_LAYOUT=nchw: the NCHW conv kernels
        if c.name == "transformer" and c.dtype == "float16":
            todo.append((c, "mma", a.arch))
        if c.name == "gemm" and c.dtype == "float32":
            todo.append((c, "cublaslt", "sm_80"))
    for case, impl, arch in todo:
        key = case.key + ("" if impl == "cublaslt" else "_" + impl) + ("" if arch == a.arch else "_" + arch)
        if a.only and not any(o in key for o in a.only):
            continue
        t0 = time.time()
        W = C.make_weights(case, seed=C.seed_of(key))
        spec = build_spec(dml, case, W)
        d = os.path.join(a.out, key)
        os.makedirs(d, exist_ok=True)
        # "cublaslt" (and "nchwconv") = the lowering's own unprofiled defaults: DINOML_CUDA_GEMM unset, so
        # its shape rules apply (e.g. the epilogue-warp GELU kernel, the PDL skinny kernel); others force a kernel
        os.environ.pop("DINOML_CUDA_GEMM", None)
        if impl not in ("cublaslt", "nchwconv"):
            os.environ["DINOML_CUDA_GEMM"] = impl
        if impl == "nchwconv":
            os.environ["DINOML_CUDA_CONV_LAYOUT"] = "nchw"
        art = dml.compile(spec, target="cuda", arch=arch, tf32=case.tf32, out=os.path.join(d, "artifact"))
        os.environ.pop("DINOML_CUDA_GEMM", None)
        os.environ.pop("DINOML_CUDA_CONV_LAYOUT", None)
        want = EXPECT_DEFAULT.get(case.name) if impl == "cublaslt" and arch == "sm_90a" else None
        if want and not any(k["selected"] == want for k in art.kernel_manifest):
            sys.exit(f"[prepare] {key}: the default should select {want}, got "
                     f"{sorted({k['selected'] for k in art.kernel_manifest})}")
        meta = {"key": key, "name": case.name, "dtype": case.dtype, "inputs": case.inputs, "dims": case.dims,
                "grid": case.grid, "tol": case.tol, "tf32": case.tf32, "gemm_impl": impl, "arch": arch,
                "expect_refusal": arch != a.arch, "outputs": [o["name"] for o in art.metadata["outputs"]],
                "kernels": sorted({k["selected"] for k in art.kernel_manifest}), "weights_sha256": C.weights_digest(W)}
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump(meta, f, indent=1)
        index.append(key)
        print(f"[prepare] {key}: compiled in {time.time() - t0:.1f} s ({arch}, gemm {impl})", flush=True)
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump({"arch": a.arch, "cases": index}, f, indent=1)


if __name__ == "__main__":
    main()
