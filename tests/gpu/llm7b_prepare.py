"""Builds the bundle of the 7B CUDA decode benchmark (issue 39) where the compiler is built (no GPU).

The model's ~4 GB of weights cannot travel to the GPU machine, so the bundle carries none of them:

* graph.dinoir.json: the GGUF decoder of dinoml.models for the 7B-shaped Q4_K_M llama of
  tests/gpu/llm7b_plan.py (Spec.save of build_spec(file, ctx=..)), whose constants file is rebuilt
  on the GPU machine: `layout.json` names, per constant, either the GGUF tensor it is a copy of
  (every quantized weight is kept as its GGUF blocks: matched here by the bytes' SHA-256) or its
  bytes in `dense.bin` (norms, rope tables, the mask's key positions: a few MB);
* the relocatable compiler (bin/dinoml, lib/, syslib/, home/: tests/gpu/profile_prepare.py's
  compiler_bundle) and the scripts the GPU machine runs (llm7b_run.py, llm7b_plan.py,
  make_random_gguf.py, llama_cpp_ref.py, dml_ctypes.py, profile_run.py) plus the `gguf` wheel.

tests/gpu/llm7b_run.py then writes the same GGUF there (same seed: the same bytes, checked against
the hashes recorded here), rebuilds constants.bin, compiles for CUDA with the carried compiler and
times decoding against the copy-bandwidth bound, llama.cpp's CUDA build and Hugging Face.

    PYTHONPATH=python DINOML_BUILD_DIR=build python tests/gpu/llm7b_prepare.py OUT_DIR [--ctx 512]
    python3 OUT_DIR/llm7b_run.py OUT_DIR [RESULT_DIR]        # on the GPU machine
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from profile_prepare import ROOT, compiler_bundle  # noqa: E402
import llm7b_plan  # noqa: E402

SCRIPTS = [os.path.join(HERE, f) for f in ("llm7b_run.py", "llm7b_plan.py", "profile_run.py", "quant_run.py")] + \
    [os.path.join(ROOT, "examples", "llama", f) for f in ("make_random_gguf.py", "llama_cpp_ref.py")] + \
    [os.path.join(ROOT, "python", "dinoml", "tools", "dml_ctypes.py")]


def gguf_wheel(out: str) -> str:
    """The `gguf` package this machine wrote the GGUF with, as a wheel the GPU machine imports from (it
    fetches nothing): the same version, so the same bytes for the seed."""
    from importlib.metadata import version
    d = os.path.join(out, "wheels")
    os.makedirs(d, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", d, f"gguf=={version('gguf')}"],
                   check=True)
    return glob.glob(os.path.join(d, "gguf-*.whl"))[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ctx", type=int, default=512, help="KV cache positions")
    ap.add_argument("--max-seq", type=int, default=64, help="tokens per run (the prompt's bucket)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--layers", type=int, default=llm7b_plan.SHAPE["n_layers"])
    ap.add_argument("--work", default=None, help="scratch folder for the GGUF and the saved spec (~8 GB)")
    a = ap.parse_args(argv)
    import dinoml as dml
    from dinoml.models.decoder import build_spec

    build = os.environ.get("DINOML_BUILD_DIR", os.path.join(ROOT, "build"))
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    work = a.work or tempfile.mkdtemp(prefix="llm7b_")
    os.makedirs(work, exist_ok=True)
    shape = dict(llm7b_plan.SHAPE, n_layers=a.layers)
    gguf_path = os.path.join(work, "llama-7b-shape-q4_k_m.gguf")
    t = time.time()
    info = llm7b_plan.write(gguf_path, a.seed, shape)
    print(f"GGUF {info['bytes'] / 2**30:.2f} GiB in {time.time() - t:.0f} s", flush=True)

    t = time.time()
    spec = build_spec(gguf_path, ctx=a.ctx, max_seq=a.max_seq)
    gdir = os.path.join(work, "graph")
    os.makedirs(gdir, exist_ok=True)
    spec.save(os.path.join(gdir, "graph.dinoir.json"))
    del spec
    print(f"spec saved in {time.time() - t:.0f} s", flush=True)

    # Each quantized constant is one GGUF tensor's blocks: find it by content.
    import gguf
    reader = gguf.GGUFReader(gguf_path)
    by_hash = {hashlib.sha256(memoryview(t.data).cast("B")).hexdigest(): t.name for t in reader.tensors}
    g = json.load(open(os.path.join(gdir, "graph.dinoir.json")))
    consts = open(os.path.join(gdir, g["constants_file"]), "rb")
    layout, dense = {}, bytearray()
    weight_bytes = 0
    for tj in g["tensors"]:
        c = tj.get("constant")
        if c is None:
            continue
        if "quant" in tj:
            name = by_hash.get(c["sha256"])
            if name is None:
                raise SystemExit(f"constant {tj['name']} ({tj['quant']['type']}) is not the copy of a GGUF tensor")
            layout[tj["name"]] = {"gguf": name, "offset": c["offset"], "nbytes": c["nbytes"], "sha256": c["sha256"]}
            if name != "token_embd.weight":  # decode reads one embedding row, every other weight whole
                weight_bytes += c["nbytes"]
        else:
            consts.seek(c["offset"])
            b = consts.read(c["nbytes"])
            layout[tj["name"]] = {"dense": len(dense), "offset": c["offset"], "nbytes": c["nbytes"],
                                  "sha256": c["sha256"]}
            dense += b
            weight_bytes += c["nbytes"]
    shutil.copy2(os.path.join(gdir, "graph.dinoir.json"), os.path.join(a.out, "graph.dinoir.json"))
    with open(os.path.join(a.out, "dense.bin"), "wb") as f:
        f.write(dense)
    meta = {"seed": a.seed, "shape": shape, "ctx": a.ctx, "max_seq": a.max_seq, "gguf_bytes": info["bytes"],
            "weight_bytes_per_token": weight_bytes, "constants_bytes": os.path.getsize(os.path.join(gdir, g["constants_file"])),
            "layout": layout,
            "command": "tests/gpu/llm7b_prepare.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    json.dump(meta, open(os.path.join(a.out, "llm7b.json"), "w"), indent=1)
    libs = compiler_bundle(a.out, build)
    for f in SCRIPTS:
        shutil.copy2(f, os.path.join(a.out, os.path.basename(f)))
    gguf_wheel(a.out)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(a.out) for f in fs)
    print(f"bundle {a.out}: {size / 2**20:.1f} MiB; weights read per decode step {weight_bytes / 2**30:.3f} GiB; "
          f"system libraries carried: {' '.join(libs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
