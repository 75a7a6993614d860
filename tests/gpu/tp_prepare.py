"""Tensor-parallel bundle for the GPU machine (issue 42): a tiny llama (4 layers, 8 kv heads, F32)
compiled for CUDA unsharded and with tensor_parallel=2, plus the CPU artifact's logits for a
prompt and two decode steps as the reference.

    python3 tests/gpu/tp_prepare.py OUT [--arch sm_90a]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
STEPS = [([1, 5, 9, 300, 777], [0, 1, 2, 3, 4]), ([42], [5]), ([7], [6])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", default="sm_90a")
    a = ap.parse_args()
    import make_random_gguf

    import dinoml as dml
    from dinoml.models import build_spec
    os.makedirs(a.out, exist_ok=True)
    gguf = os.path.join(a.out, "tiny.gguf")
    make_random_gguf.make(gguf, "tiny", "f32", vocab=1024, ctx=64, n_kv_heads=8)
    spec = build_spec(gguf, ctx=32, max_seq=8)
    cpu = dml.runtime.load(dml.compile(spec, out=os.path.join(a.out, "cpu")).path).create_session()
    refs = [cpu.run({"tokens": np.array(t, np.int64), "positions": np.array(p, np.int64)})["logits"] for t, p in STEPS]
    np.save(os.path.join(a.out, "ref_logits.npy"), np.stack(refs))
    dml.compile(spec, target="cuda", arch=a.arch, tf32=False, out=os.path.join(a.out, "cuda_tp1"))
    dml.compile(spec, target="cuda", arch=a.arch, tf32=False, out=os.path.join(a.out, "cuda_tp2"), tensor_parallel=2)
    import shutil
    shutil.rmtree(os.path.join(a.out, "cpu"))
    os.remove(gguf)
    json.dump({"steps": STEPS}, open(os.path.join(a.out, "index.json"), "w"))


if __name__ == "__main__":
    main()
