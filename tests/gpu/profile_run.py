"""The CUDA profiling check on the GPU machine (bundle from tests/gpu/profile_prepare.py):

For each model: (1) `dinoml compile --target cuda --arch sm_90a --profile` (the compiler runs
here: bootstrap module built by nvcc, every candidate timed with CUDA events per node and bucket,
execution_plan.json written, the artifact rebuilt with the winners); (2) the same again into
another directory: every timing must come from the profile cache (0 measured); (3)
`--execution-plan <plan of 1> --strict`: must give the same module.cu; (4) parity of the
profiled artifact against PyTorch at dims in every bucket (device pointers in and out). Prints a
table per node and bucket (candidates' medians, winner) and a summary last; writes
$OUT/profile_run.json (plans, fingerprint, parity, timings of the steps).

    python3 profile_run.py BUNDLE_DIR [OUT_DIR]
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

B = os.path.abspath(sys.argv[1])
OUT = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("OUT", "/tmp")
WORK = "/tmp/dml_profile_work"


sys.path.insert(0, B)
import dml_ctypes  # noqa: E402

dml_ctypes.reexec_with_cuda_libraries("DML_PROFILE_RUN_ENV")  # cuBLASLt on the loader's path

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def env():
    """The compiler's environment: the carried build (DINOML_HOME / DINOML_LIB_DIR) and the system
    libraries it needs (syslib/), a private profile + compile cache."""
    e = dict(os.environ)
    # last: the system's own copies win where it has them (nvcc and g++, started by the compiler, see this too)
    e["LD_LIBRARY_PATH"] = os.path.join(B, "lib") + ":" + e.get("LD_LIBRARY_PATH", "") + ":" + os.path.join(B, "syslib")
    e["DINOML_HOME"] = os.path.join(B, "home")
    e["DINOML_LIB_DIR"] = os.path.join(B, "lib")
    e["DINOML_CACHE_DIR"] = os.path.join(WORK, "cache")
    return e


ENV = env()


def dinoml(*args, log):
    t0 = time.time()
    p = subprocess.run([os.path.join(B, "bin", "dinoml"), *args], env=ENV, capture_output=True, text=True)
    dt = time.time() - t0
    log.write(f"$ dinoml {' '.join(args)}\n{p.stdout}{p.stderr}[rc {p.returncode}, {dt:.1f} s]\n")
    log.flush()
    if p.returncode != 0:
        raise RuntimeError(f"dinoml {' '.join(args)} failed:\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr, dt


def constant(mdir, name):
    """A constant of the model's graph, read from its constants.bin (float tensors; q8_0 blocks
    dequantized exactly as the reference dequantizer: fp16 scale widened, times the int8 value)."""
    g = json.load(open(os.path.join(mdir, "graph.dinoir.json")))
    t = next(t for t in g["tensors"] if t["name"] == name)
    raw = open(os.path.join(mdir, "constants.bin"), "rb").read()
    c = t["constant"]
    data = raw[c["offset"]:c["offset"] + c["nbytes"]]
    if t.get("quant", {}).get("type") == "q8_0":
        n, k = t["shape"]
        blocks = np.frombuffer(data, dtype=[("d", "<f2"), ("qs", "i1", (32,))]).reshape(n, k // 32)
        return (blocks["d"].astype(np.float32)[..., None] * blocks["qs"].astype(np.float32)).reshape(n, k)
    return np.frombuffer(data, dtype={"float16": np.float16, "float32": np.float32}[t["dtype"]]).reshape(t["shape"])


def reference(kind, mdir, inputs):
    def c(name):
        return torch.from_numpy(np.array(constant(mdir, name))).to("cuda", torch.float64)
    if kind == "qgemm":
        return inputs["x"].double() @ c("w").T
    if kind == "mlp":
        return torch.relu(inputs["x"].double() @ c("w1").T + c("b1")) @ c("w2").T
    if kind == "conv":
        return torch.relu(F.conv2d(inputs["x"].double(), c("w"), c("b"), padding=1))
    if kind == "sdpa":
        return F.scaled_dot_product_attention(inputs["q"].double(), inputs["k"].double(), inputs["v"].double())
    raise ValueError(kind)


def make_inputs(kind, dims, gen):
    dev = "cuda"
    if kind == "qgemm":
        return {"x": torch.randn(dims["m"], 2048, generator=gen, device=dev)}
    if kind == "mlp":
        return {"x": torch.randn(dims["m"], 1024, generator=gen, device=dev).half()}
    if kind == "conv":
        return {"x": torch.randn(dims["n"], 64, 28, 28, generator=gen, device=dev).half()}
    s = dims["s"]
    return {k: torch.randn(1, 8, s, 64, generator=gen, device=dev).half() for k in ("q", "k", "v")}


def bucket_of(plan, dims):
    for b in plan["buckets"]:
        if all(dims[k] <= v for k, v in b["dims"].items() if k in dims):
            return b["bucket"]
    return None


def parity(art, kind, mdir, case, plan):
    mod = dml_ctypes.Module(art)
    sess = mod.session()
    gen = torch.Generator(device="cuda").manual_seed(3)
    rows = []
    tol = {"qgemm": 2e-2, "mlp": 1e-2, "conv": 1e-2, "sdpa": 1e-2}[kind]
    for dims in case["dims"]:
        ins = make_inputs(kind, dims, gen)
        ref = reference(kind, mdir, ins)
        y = torch.full(ref.shape, float("nan"), device="cuda", dtype=next(iter(ins.values())).dtype)
        sess.run(ins, {"y": y})
        sess.synchronize()
        err = ((y.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
        rows.append({"dims": dims, "bucket": bucket_of(plan, dims), "max_err_over_max_ref": err, "tol": tol,
                     "ok": bool(err <= tol and torch.isfinite(y).all().item())})
    return rows


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    os.makedirs(OUT, exist_ok=True)
    log = open(os.path.join(OUT, "profile_run.log"), "w")
    print("[profile] torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)
    result = {"models": {}}
    table, summary = [], []
    for mdir in sorted(glob.glob(os.path.join(B, "models", "*"))):
        name = os.path.basename(mdir)
        case = json.load(open(os.path.join(mdir, "case.json")))
        graph = os.path.join(mdir, "graph.dinoir.json")
        art = os.path.join(WORK, name)
        r = {}
        try:
            out1, t1 = dinoml("compile", graph, "--target", "cuda", "--arch", "sm_90a", "--profile", "-o", art, log=log)
            plan = json.load(open(os.path.join(art, "execution_plan.json")))
            out2, t2 = dinoml("compile", graph, "--target", "cuda", "--arch", "sm_90a", "--profile", "-o", art + "_again",
                              log=log)
            m = re.search(r"(\d+) timings measured, (\d+) from the cache", out2)
            cache_ok = bool(m and m.group(1) == "0" and int(m.group(2)) > 0)
            plan2 = json.load(open(os.path.join(art + "_again", "execution_plan.json")))
            out3, t3 = dinoml("compile", graph, "--target", "cuda", "--arch", "sm_90a", "--execution-plan",
                              os.path.join(art, "execution_plan.json"), "--strict", "-o", art + "_plan", log=log)
            same_src = open(os.path.join(art, "debug", "module.cu")).read() == open(
                os.path.join(art + "_plan", "debug", "module.cu")).read()
            par = parity(art, case["kind"], mdir, case, plan)
            km = json.load(open(os.path.join(art, "kernel_manifest.json")))
            switch = open(os.path.join(art, "debug", "module.cu")).read().count("switch (b) {  // kernel chosen per shape bucket")
            r = {"plan": plan, "profile_s": t1, "again_s": t2, "again_cache": m.group(0) if m else None,
                 "cache_hit_only": cache_ok, "same_winners_again": [b["winner"] for n in plan["nodes"] for b in n["buckets"]]
                 == [b["winner"] for n in plan2["nodes"] for b in n["buckets"]],
                 "plan_compile_s": t3, "plan_strict_same_module_cu": same_src, "parity": par,
                 "bucket_switches_in_module": switch,
                 "selected": {e["node"]: e.get("selected") for e in km if e.get("tunable")}}
            for n in plan["nodes"]:
                for b in n["buckets"]:
                    times = "  ".join(f"{t['candidate']}={t['median_s'] * 1e6:.1f}us" for t in b["timings"])
                    table.append(f"{name:10s} {n['node'][:22]:22s} b{b['bucket']} {json.dumps(b['dims'])[:18]:18s} "
                                 f"winner {b['winner']:34s} | {times}")
            winners = {}
            for n in plan["nodes"]:
                winners[n["node"]] = sorted({b["winner"] for b in n["buckets"]})
            per_bucket = [k for k, v in winners.items() if len(v) > 1]
            summary.append(f"{name:10s} profile {t1:5.1f}s  again {t2:4.1f}s ({r['again_cache']})  plan+strict same "
                           f"module.cu: {same_src}  per-bucket winners: {per_bucket or 'none'}  switches: {switch}  "
                           f"parity: " + ", ".join(f"{json.dumps(p['dims'])}->b{p['bucket']} "
                                                   f"{p['max_err_over_max_ref']:.1e} {'ok' if p['ok'] else 'FAIL'}"
                                                   for p in par))
        except Exception as e:  # noqa: BLE001 — report and go on with the next model
            r["error"] = str(e)[-3000:]
            summary.append(f"{name:10s} ERROR {str(e)[-400:]}")
        result["models"][name] = r
    hw = next((m["plan"]["hardware"] for m in result["models"].values() if "plan" in m), None)
    result["hardware"] = hw
    json.dump(result, open(os.path.join(OUT, "profile_run.json"), "w"), indent=1)
    log.close()
    print("\n".join(table))
    print("hardware:", json.dumps(hw))
    print("\n".join(summary))


if __name__ == "__main__":
    main()
