"""Device harness of the sm_90a flash-attention kernel (kernels/cuda/attention_wgmma.cu):
correctness against a float64 reference and throughput against torch SDPA on sm_90a.

Run on the GPU machine from the repository root (or a copy of kernels/, include/, bench/cuda/):
    python3 bench/cuda/fa3_bench.py --out DIR
It builds DIR/libfa3_bench.so with nvcc (sm_90a, -Xptxas -v), counts HGMMA / local-memory SASS
lines, then
  * checks shapes (tiles, tails: L not a multiple of 128, Lq != Lk, 1 row / 1 key) for fp16/bf16,
    D 64/128, causal or not, P·V as one n128 or two n64 wgmma, on fresh random inputs with the
    output poisoned (NaN): rel. L2 error vs float64 next to torch SDPA's own error, no element
    left unwritten;
  * times the issue-4 shapes (b 8, 32 heads, D 128, seq 1024/4096, causal or not) and the
    GPT-2-medium shape (b 8, 16 heads, D 64, seq 1024) by CUDA-graph replay, median of 10 replays:
    torch SDPA, every kernel variant (VARIANTS; attention_wgmma.h) and the library's mma.sync flash
    kernel (dml_cuda_sdpa impl 2); the default variant also as plain back-to-back launches (no
    graph, as an artifact run without replay). FLOPs: 4·B·H·L²·D, halved for causal.
--prebuilt SO uses a library built elsewhere with the same command (falls back to building here
when it does not load).
Writes DIR/fa3_bench.json and prints a table last.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "dinoml", "tools"))
import cuda_timing  # noqa: E402  (python/dinoml/tools: the timing every GPU tool shares)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DT = {"bfloat16": (torch.bfloat16, 2), "float16": (torch.float16, 1)}
# kernel variants of wgmma_sdpa (kernels/cuda/attention_wgmma.h); default_variant mirrors wgmma_sdpa_default_variant
VARIANTS = {0: "grid", 1: "grid_split", 2: "persist", 3: "persist_pp", 4: "persist_pp2", 5: "persist_fs", 6: "persist_pp_fs",
            7: "persist_pp2_fs", 8: "persist_pp_fs_defer", 9: "persist_fs_defer"}


def default_variant(D):  # wgmma_sdpa_default_variant (attention_wgmma.h)
    return 5 if D == 64 else 9


def sh(cmd, log):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    log.write(f"$ {cmd}\n{r.stdout}{r.stderr}\n")
    log.flush()
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        raise SystemExit(f"failed: {cmd}")
    return r.stdout + r.stderr


def build(out, log, prebuilt=None):
    so = os.path.join(out, "libfa3_bench.so")
    if prebuilt:
        try:
            ctypes.CDLL(prebuilt)
            sass = sh(f"cuobjdump --dump-sass {prebuilt}", log)
            info = {"build_s": 0.0, "prebuilt": prebuilt, "hgmma_sass_lines": sum(1 for l in sass.splitlines() if "HGMMA" in l),
                    "local_mem_sass_lines": sum(1 for l in sass.splitlines() if " STL" in l or " LDL" in l)}
            print("[build]", json.dumps(info), flush=True)
            return prebuilt, info
        except OSError as e:
            print("[build] prebuilt library does not load here, building:", e, flush=True)
    k = os.path.join(ROOT, "kernels", "cuda")
    t0 = time.time()
    ptx = sh(f"nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden "
             f"-gencode=arch=compute_90a,code=sm_90a -Xptxas -v -DDML_CUDA_LIBRARY_ARCHS=\\\"sm_90a\\\" -I{k} -I{ROOT}/include "
             f"{k}/attention_wgmma.cu {k}/attention.cu {k}/status.cu {ROOT}/bench/cuda/fa3_bench_entry.cu -o {so}", log)
    regs = [l.strip() for l in ptx.splitlines() if ("registers" in l or "spill" in l or "arning" in l)]
    sass = sh(f"cuobjdump --dump-sass {so}", log)
    n_hgmma = sum(1 for l in sass.splitlines() if "HGMMA" in l)
    n_local = sum(1 for l in sass.splitlines() if " STL" in l or " LDL" in l)
    info = {"build_s": round(time.time() - t0, 1), "ptxas": regs[:40], "hgmma_sass_lines": n_hgmma,
            "local_mem_sass_lines": n_local}
    print("[build]", json.dumps({k2: v for k2, v in info.items() if k2 != "ptxas"}), flush=True)
    for l in regs:
        if "spill" in l and not l.startswith("0 bytes stack frame, 0 bytes spill"):
            print("[ptxas]", l)
    return so, info


class Lib:
    def __init__(self, so):
        L = self.lib = ctypes.CDLL(so)
        i64, vp, ci = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        L.fa3_bench_wgmma.argtypes = [ci, i64, i64, i64, i64, vp, vp, vp, vp, ci, ctypes.c_float, ci, vp]
        L.fa3_bench_sdpa.argtypes = [ci, i64, i64, i64, i64, vp, vp, vp, vp, ci, ctypes.c_float, ci, vp]
        L.fa3_bench_supported.argtypes = [ci, i64, vp, vp, vp, vp]
        L.fa3_bench_error.restype = ctypes.c_char_p

    def run(self, which, code, q, k, v, y, causal, scale, variant):
        B, Lq, D = q.shape
        Lk = k.shape[1]
        fn = self.lib.fa3_bench_wgmma if which == "wgmma" else self.lib.fa3_bench_sdpa
        rc = fn(code, B, Lq, Lk, D, q.data_ptr(), k.data_ptr(), v.data_ptr(), y.data_ptr(), int(causal), scale, variant,
                torch.cuda.current_stream().cuda_stream)
        if rc != 0:
            raise RuntimeError(self.lib.fa3_bench_error().decode())


def ref_sdpa(q, k, v, causal, scale):
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        Lq, Lk = s.shape[-2:]
        keep = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v.double()


def rel_l2(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check(lib, dtype, B, Lq, Lk, D, causal, split, via_lib=False):
    """split: the kernel variant (VARIANTS)."""
    tdt, code = DT[dtype]
    g = torch.Generator(device="cuda")
    g.manual_seed((hash((dtype, B, Lq, Lk, D, causal)) + 7919 * split + int(time.time() * 1000)) & 0xFFFFFFFF)
    q = torch.randn(B, Lq, D, device="cuda", generator=g).to(tdt)
    k = torch.randn(B, Lk, D, device="cuda", generator=g).to(tdt)
    v = torch.randn(B, Lk, D, device="cuda", generator=g).to(tdt)
    scale = 1.0 / math.sqrt(D)
    y = torch.full((B, Lq, D), float("nan"), device="cuda", dtype=tdt)
    assert lib.lib.fa3_bench_supported(code, D, q.data_ptr(), k.data_ptr(), v.data_ptr(), y.data_ptr()) == 1
    if via_lib:
        lib.run("sdpa", code, q, k, v, y, causal, 0.0, 3)
    else:
        lib.run("wgmma", code, q, k, v, y, causal, scale, split)
    torch.cuda.synchronize()
    ref = ref_sdpa(q, k, v, causal, scale)
    unwritten = int((~torch.isfinite(y)).sum().item())
    err = rel_l2(y, ref)
    err_t = rel_l2(F.scaled_dot_product_attention(q, k, v, is_causal=causal), ref)
    maxerr = (y.double() - ref).abs().max().item() if unwritten == 0 else float("nan")
    tol = 1.5e-2 if dtype == "bfloat16" else 3e-3
    ok = unwritten == 0 and err <= tol and err <= 3 * err_t + 2e-4
    return {"dtype": dtype, "B": B, "Lq": Lq, "Lk": Lk, "D": D, "causal": causal, "variant": split, "via_lib": via_lib,
            "rel_l2": err, "rel_l2_torch": err_t, "max_abs_err": maxerr, "unwritten": unwritten, "pass": ok}


def time_graph(fn_list, calls, reps=10):
    return statistics.median(cuda_timing.graph_samples(torch, fn_list, calls, reps))


def time_plain(fn_list, calls, reps=5):
    """Back-to-back launches on the current stream, no graph (as an artifact run without replay)."""
    return statistics.median(cuda_timing.event_samples(torch, cuda_timing.cycling(fn_list), reps, calls, warm=2))


def bench(lib, dtype, b, h, L, D, causal, with_mma, variants):
    tdt, code = DT[dtype]
    flop = 4.0 * b * h * L * L * D * (0.5 if causal else 1.0)
    sets = []
    for _ in range(2):
        q, k, v = (torch.randn(b, h, L, D, device="cuda").to(tdt) for _ in range(3))
        sets.append((q, k, v, torch.empty_like(q), torch.empty_like(q)))
    est_ms = flop / 400e12 * 1e3
    calls = int(max(2, min(100, math.ceil(15.0 / est_ms))))
    row = {"dtype": dtype, "b": b, "h": h, "L": L, "D": D, "causal": causal, "calls_per_graph": calls}
    t = time_graph([lambda s=s: torch.nn.functional.scaled_dot_product_attention(s[0], s[1], s[2], is_causal=causal)
                    for s in sets], calls)
    row["sdpa_ms"], row["sdpa_tflops"] = t, flop / t / 1e9
    sc = 1.0 / math.sqrt(D)
    flat = lambda x: x.view(b * h, L, D)
    runs = [(VARIANTS[v], "wgmma", v) for v in variants] + ([("flash_mma", "sdpa", 2)] if with_mma else [])
    for name, which, var in runs:
        t = time_graph([lambda s=s: lib.run(which, code, flat(s[0]), flat(s[1]), flat(s[2]), flat(s[4]), causal, sc, var)
                        for s in sets], calls)
        row[name + "_ms"], row[name + "_tflops"] = t, flop / t / 1e9
    t = time_plain([lambda s=s: lib.run("wgmma", code, flat(s[0]), flat(s[1]), flat(s[2]), flat(s[4]), causal, sc, default_variant(D))
                    for s in sets], min(calls, 40))
    row["default_nograph_ms"], row["default_nograph_tflops"] = t, flop / t / 1e9
    t = time_plain([lambda s=s: torch.nn.functional.scaled_dot_product_attention(s[0], s[1], s[2], is_causal=causal)
                    for s in sets], min(calls, 40))
    row["sdpa_nograph_ms"], row["sdpa_nograph_tflops"] = t, flop / t / 1e9
    # cross-check every timed variant's output against SDPA once
    s = sets[0]
    ref = torch.nn.functional.scaled_dot_product_attention(s[0], s[1], s[2], is_causal=causal).float()
    for v in variants:
        s[4].fill_(float("nan"))
        lib.run("wgmma", code, flat(s[0]), flat(s[1]), flat(s[2]), flat(s[4]), causal, sc, v)
        torch.cuda.synchronize()
        row[VARIANTS[v] + "_rel_l2_vs_sdpa"] = ((s[4].float() - ref).norm() / ref.norm()).item()
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/fa3_out"))
    ap.add_argument("--no-mma", action="store_true")
    ap.add_argument("--prebuilt", default=None)
    ap.add_argument("--variants", default="0,2,3,4,5,6,7,8,9", help="variants to check and time (must include the defaults)")
    ap.add_argument("--quick", action="store_true", help="default variant checks only, issue shapes only")
    args = ap.parse_args()
    variants = [int(v) for v in args.variants.split(",")]
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "fa3_build.log"), "w")
    print("[env]", torch.__version__, torch.cuda.get_device_name(), flush=True)
    so, binfo = build(args.out, log, args.prebuilt)
    lib = Lib(so)
    result = {"build": binfo, "device": torch.cuda.get_device_name(), "torch": torch.__version__, "variants": VARIANTS,
              "default_variant": {"64": default_variant(64), "128": default_variant(128)}, "checks": [], "timings": []}
    out_json = os.path.join(args.out, "fa3_bench.json")

    checks = []
    for dt in DT:
        for causal in (False, True):
            for (B, Lq, Lk) in [(2, 128, 128), (3, 1000, 1000), (2, 300, 517), (2, 517, 300), (1, 77, 1), (2, 1, 300),
                                (5, 129, 129), (4, 1024, 1024), (2, 4096, 4096)]:
                for var in (variants if not args.quick else sorted({default_variant(64), default_variant(128)})):
                    if var in (0, 1) and (B, Lq) not in [(3, 1000), (4, 1024)]:
                        continue
                    checks.append((dt, B, Lq, Lk, 128, causal, var))
                    if Lq <= 1024:
                        checks.append((dt, B, Lq, Lk, 64, causal, var))
    fails = 0
    for c in checks:
        try:
            r = check(lib, *c)
        except Exception as e:  # a launch error is a failed check, not the end of the run
            r = {"args": list(map(str, c)), "error": str(e), "pass": False}
            print("[check] ERROR", c, e, flush=True)
            result["checks"].append(r)
            fails += 1
            if "illegal" in str(e) or "launch" in str(e):
                break
            continue
        result["checks"].append(r)
        fails += 0 if r["pass"] else 1
        print(f"[check] {r['dtype']:8s} B={r['B']} Lq={r['Lq']:5d} Lk={r['Lk']:5d} D={r['D']:3d} causal={int(r['causal'])} "
              f"var={r['variant']} rel_l2={r['rel_l2']:.2e} (sdpa {r['rel_l2_torch']:.2e}) max={r['max_abs_err']:.2e} "
              f"unwritten={r['unwritten']} {'PASS' if r['pass'] else 'FAIL'}", flush=True)
    for c in [("bfloat16", 3, 1000, 1000, 128, True, 0), ("float16", 2, 300, 517, 64, False, 0),
              ("bfloat16", 8, 1024, 1024, 64, True, 0)]:
        r = check(lib, *c, via_lib=True)
        result["checks"].append(r)
        fails += 0 if r["pass"] else 1
        print(f"[check-lib] {json.dumps(r)}", flush=True)
    json.dump(result, open(out_json, "w"), indent=1)

    shapes = [(8, 32, L, 128, causal, dt) for L in (1024, 4096) for causal in (False, True) for dt in ("bfloat16", "float16")
              if not (dt == "float16" and (L == 4096 or args.quick))]
    shapes += [(8, 16, 1024, 64, True, "bfloat16"), (8, 16, 1024, 64, False, "bfloat16")]
    for (b, h, L, D, causal, dt) in shapes:
        try:
            r = bench(lib, dt, b, h, L, D, causal, with_mma=not args.no_mma and dt == "bfloat16", variants=variants)
        except Exception as e:
            print("[time] ERROR", dt, L, D, causal, e, flush=True)
            continue
        result["timings"].append(r)
        print("[time]", json.dumps(r), flush=True)
        json.dump(result, open(out_json, "w"), indent=1)

    n = len(result["checks"])
    print(f"\n== build: HGMMA lines {binfo['hgmma_sass_lines']}, local-memory lines {binfo['local_mem_sass_lines']}; "
          f"checks: {n - fails}/{n} pass; default variant D64 {VARIANTS[default_variant(64)]}, D128 {VARIANTS[default_variant(128)]}")
    names = [VARIANTS[v] for v in variants]
    print(f"{'dtype':8s} {'h':>3s} {'D':>3s} {'L':>5s} {'c':>1s} {'sdpa':>6s} " + " ".join(f"{n[:11]:>11s}" for n in names) +
          f" {'mma':>6s} {'dflt/sdpa':>9s} {'nograph':>7s}  (TFLOP/s; nograph: default/sdpa both without graphs)")
    for r in result["timings"]:
        print(f"{r['dtype']:8s} {r['h']:3d} {r['D']:3d} {r['L']:5d} {int(r['causal']):1d} {r['sdpa_tflops']:6.1f} " +
              " ".join(f"{r[n + '_tflops']:11.1f}" for n in names) +
              f" {r.get('flash_mma_tflops', float('nan')):6.1f} {r[VARIANTS[default_variant(r['D'])] + '_tflops'] / r['sdpa_tflops']:9.2f}"
              f" {r['sdpa_nograph_ms'] / r['default_nograph_ms']:7.2f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
