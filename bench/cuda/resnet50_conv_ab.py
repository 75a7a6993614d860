"""A/B of the channels-last conv's run-time rule on one ResNet-50 artifact (GPU machine).

The artifact of tests/gpu/cases.py's resnet50_bench (batch 32, bf16; built by scripts/gpu-check
prepare) calls dml_cuda_conv2d_nhwc with the AUTO tile for every conv, so the rule the kernel
library applies decides which kernels run. DML_CUDA_CONV_NHWC_AUTO (read once per process) picks
it: "" = the default rule, "mma" = the mma.sync kernel's own rule, "wgmma" = the sm_90a
wgmma conv kernel for every conv it takes (plain 1x1 too), "wgmma_gemm" = plain 1x1 convs as the own
TMA + wgmma GEMM. Each mode runs in its own process, in alternating rounds;
each sample is the median per-run time of CUDA-event-timed back-to-back runs, and the first round
of each mode also prints the per-kernel table (torch.profiler / CUPTI).

    python3 bench/cuda/resnet50_conv_ab.py BUNDLE [--modes default,mma,wgmma,wgmma_gemm] [--rounds 2] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def child(bundle, profile):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    sys.path.insert(0, os.path.join(ROOT, "python", "dinoml", "tools"))
    import cuda_timing  # noqa: E402
    import dml_ctypes as D  # noqa: E402
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    d = os.path.join(bundle, "resnet50_bench_bfloat16")
    sess = D.Module(os.path.join(d, "artifact")).session()
    sess.set_stream(stream.cuda_stream)
    x = torch.randn(32, 3, 224, 224, device="cuda").to(torch.bfloat16)
    y = torch.empty(32, 1000, device="cuda", dtype=torch.bfloat16)
    ins, outs = sess.prepare({"x": x}, {"output": y})
    fn = lambda: sess.run_prepared(ins, outs)  # noqa: E731
    samples = cuda_timing.event_samples(torch, fn, 5, 20, 10)
    out = {"ms": cuda_timing.spread(samples), "samples": samples, "checksum": float(y.float().abs().sum())}
    if profile:
        t = cuda_timing.kernel_table(torch, fn, 3)
        out["kernels_ms"] = t["total_us"] / 1000
        out["kernels"] = [{"us": r["us_per_run"], "calls": r["calls_per_run"], "kernel": r["kernel"][:110]} for r in t["kernels"][:12]]
    print("RESULT " + json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--modes", default="default,mma,wgmma,wgmma_gemm")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    if a.child:
        child(a.bundle, a.profile)
        return 0
    modes = a.modes.split(",")
    res = {m: {"ms": [], "runs": []} for m in modes}
    for rnd in range(a.rounds):
        for m in modes:
            env = dict(os.environ)
            env.pop("DML_CUDA_CONV_NHWC_AUTO", None)
            if m != "default":
                env["DML_CUDA_CONV_NHWC_AUTO"] = m
            cmd = [sys.executable, os.path.abspath(__file__), a.bundle, "--child"] + (["--profile"] if rnd == 0 else [])
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if p.returncode != 0 or not line:
                print(f"[ab] {m} round {rnd}: FAILED rc={p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}", flush=True)
                continue
            r = json.loads(line[0][7:])
            res[m]["ms"].append(r["ms"][0])
            res[m]["runs"].append(r)
            print(f"[ab] round {rnd} {m:8s}: {r['ms'][0]:.3f} ms (min {r['ms'][1]:.3f}, max {r['ms'][2]:.3f}) checksum {r['checksum']:.6g}", flush=True)
            if "kernels" in r:
                print(f"[ab]   {m}: {r['kernels_ms']:.3f} ms of kernels per run", flush=True)
                for k in r["kernels"]:
                    print(f"[ab]     {k['us']:8.1f} us x{k['calls']:5.1f}  {k['kernel']}", flush=True)
    print("[ab] summary (median of the rounds' medians, ms): " +
          ", ".join(f"{m} {sorted(res[m]['ms'])[len(res[m]['ms']) // 2]:.3f}" for m in modes if res[m]["ms"]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
