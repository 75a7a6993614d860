"""Device harness of the own sm_90a GEMM with the overlapped fused epilogue (kernels/cuda/gemm_wgmma_epi.cu,
DML_CUDA_GEMM_WGMMA_EPI), through the kernel library's C ABI (ctypes). Target: fused gemm + bias + GELU
at >= 1.15x torch eager. Variants (gelu_bench_gemm): 1 = persistent 128x256 with epilogue warps (the
one the C ABI uses), 2 = two 128x128 blocks per SM, 3-6 = variant 1 with the epilogue loop unrolled
2 / 8 times, streaming output stores, tile raster groups of 8.

    python3 bench/cuda/gelu_bench.py LIB.so --out DIR [--smoke] [--no-time]

LIB.so: the harness library (every kernels/cuda/*.cu and bench/cuda/*_bench_entry.cu linked with
cuBLASLt; `bench/cuda/device_run.sh gelu` builds it and runs this). Steps:
  * checks (fresh random inputs, NaN-poisoned outputs, float64 reference, rel. L2 next to torch's
    own error on the same inputs, as gemv_bench.py): dml_cuda_gemm with DML_CUDA_GEMM_WGMMA_EPI over
    tails (odd M, N not a multiple of the tile, N % 8 != 0, K = 8 / 64 / 72 ...), every epilogue
    with and without bias, the residual epilogues, both dtypes, dml_cuda_bmm, the fallbacks (B as
    [K, N], K % 8 != 0, a misaligned operand: cuBLASLt; float32: SIMT); each variant (gelu_bench_gemm) on a few
    shapes and epilogues; GELU near the tails (large |x|) against float64;
  * timings (CUDA-graph replays, input sets rotated over > 200 MB): fused gemm + bias + erf GELU vs
    torch F.gelu(F.linear(x, w, b)) for each library path and variant, every method's graph
    replayed in alternating rounds (--rounds; cuda_timing.alternating_graph_samples), medians and
    the median of the per-round ratios torch / method, the two reported shapes --repeats times; the
    tanh form; the plain GEMM (no epilogue) vs torch.matmul (median of --reps); an epilogue probe at
    K = 64 (one K step per tile: the time is the epilogue pipeline's).
Writes DIR/gelu_bench.json and prints a table last.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemv_bench as gb  # noqa: E402  (Lib, ref, time_graph, tolerances)
from gemv_bench import cuda_timing  # noqa: E402  (python/dinoml/tools/cuda_timing.py)

gb.IMPL["wgmma_epi"] = 11
F = torch.nn.functional
VARIANTS = {1: "p_128x256", 2: "2b_128x128", 3: "p_unroll2", 4: "p_unroll8", 5: "p_stcs", 6: "p_group8"}
ALL_V = tuple(VARIANTS)


class Lib(gb.Lib):
    def __init__(self, so):
        super().__init__(so)
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        self.L.gelu_bench_gemm.argtypes = [ctypes.c_int, i64, i64, i64, vp, vp, vp, vp, vp, ctypes.c_int, ctypes.c_int, vp]

    def variant(self, v, a, b, bias, d, y, epi):
        M, K = a.shape
        p = lambda t: None if t is None else t.data_ptr()
        rc = self.L.gelu_bench_gemm(gb.CODE[a.dtype], M, b.shape[0], K, p(a), p(b), p(bias), p(d), p(y), gb.EPI[epi], v,
                                    torch.cuda.current_stream().cuda_stream)
        if rc:
            raise RuntimeError(self.err())


def checks(lib, smoke=False):
    out = []

    def one(name, dt, M, N, K, epi="none", bias=False, rcr=True, offset=0, variant=None, scale=1.0):
        g = torch.Generator(device="cuda")
        g.manual_seed(M * 7919 + N * 31 + K + offset + gb.EPI[epi] * 13 + (variant or 0) * 101)
        a = (torch.randn(M * K + offset, device="cuda", generator=g) * scale).to(dt)[offset:].view(M, K)
        b = (torch.randn(N, K, device="cuda", generator=g) / math.sqrt(K)).to(dt)
        bb = torch.randn(N, device="cuda", generator=g).to(dt) if bias else None
        d = torch.randn(M, N, device="cuda", generator=g).to(dt) if epi in ("add", "add_relu") else None
        y = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        if variant is not None:
            lib.variant(variant, a, b, bb, d, y, epi)
        else:
            lib.gemm("wgmma_epi", a, b if rcr else b.t().contiguous(), bb, d, y, epi, rcr)
        torch.cuda.synchronize()
        r = gb.ref(a, b, bb, d, epi)
        bad = int((~torch.isfinite(y)).sum().item())
        e = ((y.double() - r).norm() / r.norm().clamp_min(1e-30)).item()
        et = ((gb.ACT[epi](F.linear(a, b, bb) + (d if d is not None else 0)).double() - r).norm()
              / r.norm().clamp_min(1e-30)).item()
        ok = bad == 0 and e <= gb.TOL[dt] and e <= 3 * et + 1e-4
        row = {"name": name, "dtype": str(dt).split(".")[1], "M": M, "N": N, "K": K, "epi": epi, "bias": bias, "rcr": rcr,
               "offset": offset, "variant": variant, "scale": scale, "rel_l2": e, "rel_l2_torch": et, "unwritten": bad,
               "pass": ok}
        out.append(row)
        print(f"[check] {name:9s} {row['dtype']:8s} v={variant} M={M:4d} N={N:5d} K={K:5d} {epi:9s} bias={int(bias)} "
              f"rcr={int(rcr)} off={offset} x{scale:g} rel_l2={e:.2e} (torch {et:.2e}) unwritten={bad} "
              f"{'PASS' if ok else 'FAIL'}", flush=True)

    if smoke:
        for v in ALL_V:
            for (M, N, K) in [(129, 257, 136), (2048, 2048, 64), (4096, 4096, 1024), (8192, 4096, 1024), (3, 5, 8)]:
                one("smoke", torch.bfloat16, M, N, K, epi="gelu", bias=True, variant=v)
        return out
    for dt in (torch.bfloat16, torch.float16):
        for (M, N, K) in [(3, 5, 8), (1, 8, 8), (127, 255, 72), (129, 257, 136), (1000, 1000, 1000), (300, 130, 4104),
                          (4095, 4097, 4096), (4097, 4096, 1024), (4096, 4100, 1024), (4096, 4104, 1024), (8192, 4096, 1024),
                          (2048, 2048, 64), (257, 384, 8)]:
            for v in (None,) + ALL_V:  # None: the C ABI (DML_CUDA_GEMM_WGMMA_EPI)
                one("shape", dt, M, N, K, epi="gelu", bias=True, variant=v)
                one("shape", dt, M, N, K, variant=v)
        for v in (None,) + ALL_V:
            for epi in gb.EPI:
                for bias in (True, False):
                    one("epilogue", dt, 200, 300, 264, epi=epi, bias=bias, variant=v)
                    one("epilogue", dt, 1024, 2048, 1024, epi=epi, bias=bias, variant=v)
                one("epi_tail", dt, 131, 261, 200, epi=epi, bias=True, variant=v)  # N % 8 != 0: scalar stores
        for v in ALL_V:
            for epi in ("gelu", "none", "fast_gelu", "add", "relu"):
                one("variant", dt, 1000, 1030, 1032, epi=epi, bias=True, variant=v)
                one("variant", dt, 4096, 4096, 1024, epi=epi, bias=True, variant=v)
        for v in (None,) + ALL_V:
            one("gelu_tail", dt, 512, 512, 512, epi="gelu", bias=True, scale=8.0, variant=v)   # pre-activations up to ~±40
            one("gelu_tail", dt, 512, 512, 512, epi="gelu", bias=True, scale=0.05, variant=v)  # near 0
        one("fallback", dt, 8, 200, 100, rcr=False, epi="gelu", bias=True)  # B as [K, N]: cuBLASLt (runs 1-3: mma.sync)
        one("fallback", dt, 8, 200, 102, epi="gelu", bias=True)             # K % 8 != 0
        one("fallback", dt, 64, 200, 128, offset=1, epi="gelu", bias=True)  # a only 2-byte aligned
    one("fallback", torch.float32, 4, 200, 128, bias=True, epi="gelu")      # float32: SIMT
    # dml_cuda_bmm with the implementation code (one launch per batch item, full and broadcast B)
    for nb in (3, 1):
        dt = torch.bfloat16
        a = torch.randn(3, 300, 264, device="cuda").to(dt)
        b = (torch.randn(nb, 520, 264, device="cuda") / math.sqrt(264)).to(dt)
        y = torch.full((3, 300, 520), float("nan"), device="cuda", dtype=dt)
        i64 = ctypes.c_int64
        ys, as_, bs = (i64 * 1)(3), (i64 * 1)(3), (i64 * 1)(nb)
        rc = lib.L.dml_cuda_bmm(2, 1, 1, ys, as_, bs, 300, 520, 264, a.data_ptr(), b.data_ptr(), y.data_ptr(), 0,
                                gb.IMPL["wgmma_epi"], torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        r = a.double() @ b.double().transpose(1, 2)
        e = ((y.double() - r).norm() / r.norm()).item() if rc == 0 else float("nan")
        ok = rc == 0 and e <= gb.TOL[dt] and bool(torch.isfinite(y).all())
        out.append({"name": "bmm", "dtype": "bfloat16", "batch_b": nb, "rel_l2": e, "rc": rc, "pass": ok})
        print(f"[check] bmm batch_b={nb} rc={rc} rel_l2={e:.2e} {'PASS' if ok else 'FAIL ' + (lib.err() if rc else '')}",
              flush=True)
    return out


def make_sets(M, K, N, dt=torch.bfloat16, budget=200e6):
    per_set = (M * K + N * K + N + M * N) * 2
    nsets = max(1, min(16, math.ceil(budget / per_set)))
    sets = [(torch.randn(M, K, device="cuda").to(dt), (torch.randn(N, K, device="cuda") / math.sqrt(K)).to(dt),
             torch.randn(N, device="cuda").to(dt), torch.empty(M, N, device="cuda", dtype=dt)) for _ in range(nsets)]
    est_ms = max(2.0 * M * N * K / 600e12 * 1e3, per_set / 4e12 * 1e3)
    calls = int(max(nsets, min(100, math.ceil(10.0 / est_ms))))
    return sets, calls


def bench_fused(lib, M, K, N, epi, rounds):
    sets, calls = make_sets(M, K, N)
    approx = "tanh" if epi == "fast_gelu" else "none"
    row = {"M": M, "K": K, "N": N, "epi": epi, "sets": len(sets), "calls": calls}
    a, b, bb, y = sets[0]
    r = gb.ACT[epi](a.double() @ b.double().t() + bb.double())
    variants = {"torch": lambda s: F.gelu(F.linear(s[0], s[1], s[2]), approximate=approx),
                "cublaslt": lambda s: lib.gemm("cublaslt", s[0], s[1], s[2], None, s[3], epi),
                "wgmma": lambda s: lib.gemm("wgmma", s[0], s[1], s[2], None, s[3], epi)}
    for v, name in VARIANTS.items():
        variants[name] = lambda s, v=v: lib.variant(v, s[0], s[1], s[2], None, s[3], epi)
    for name, f in variants.items():
        out = f(sets[0])
        if out is None:
            out = sets[0][3]
        torch.cuda.synchronize()
        row[f"{name}_rel_l2"] = ((out.double() - r).norm() / r.norm()).item()
        row[f"{name}_pass"] = bool(row[f"{name}_rel_l2"] <= gb.TOL[torch.bfloat16])
    # every method's graph replayed in alternating rounds (drift shared); per-round ratios to torch
    samples = cuda_timing.alternating_graph_samples(
        torch, {name: [lambda s=s, f=f: f(s) for s in sets] for name, f in variants.items()}, calls, rounds)
    for name in variants:
        row[f"{name}_us"] = statistics.median(samples[name]) * 1e3
        row[f"{name}_x_torch"] = statistics.median(t / o for t, o in zip(samples["torch"], samples[name]))
    lib_best = min((k for k in variants if k != "torch"), key=lambda k: row[f"{k}_us"])
    row["best"] = lib_best
    row["speedup_vs_torch"] = row["torch_us"] / row[f"{lib_best}_us"]
    del sets
    return row


def bench_plain(lib, M, K, N, reps):
    sets, calls = make_sets(M, K, N)
    row = {"M": M, "K": K, "N": N, "calls": calls}
    variants = {"torch": lambda s: torch.matmul(s[0], s[1].t(), out=s[3]),
                "wgmma": lambda s: lib.gemm("wgmma", s[0], s[1], None, None, s[3], "none")}
    for v in ALL_V:
        variants[VARIANTS[v]] = lambda s, v=v: lib.variant(v, s[0], s[1], None, None, s[3], "none")
    for name, f in variants.items():
        ms = gb.time_graph([lambda s=s, f=f: f(s) for s in sets], calls, reps)
        row[f"{name}_us"] = ms * 1e3
        row[f"{name}_tflops"] = 2.0 * M * N * K / (ms * 1e-3) / 1e12
    del sets
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gelu_out"))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=21, help="alternating replay rounds per fused shape")
    ap.add_argument("--repeats", type=int, default=3, help="times the two reported erf-GELU shapes are timed")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    lib = Lib(args.lib)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    print("[env]", res, flush=True)
    path = os.path.join(args.out, "gelu_bench.json")
    res["checks"] = checks(lib, args.smoke)
    nfail = sum(1 for c in res["checks"] if not c["pass"])
    print(f"== checks: {len(res['checks']) - nfail}/{len(res['checks'])} pass", flush=True)
    json.dump(res, open(path, "w"), indent=1)
    if args.smoke or args.no_time:
        return 1 if nfail else 0
    shapes = [(8192, 1024, 4096), (4096, 1024, 4096), (8192, 4096, 1024), (4096, 4096, 16384)]
    res["fused"], res["plain"], res["probe"] = [], [], []
    # the reported shapes (erf GELU, K = 1024) --repeats times, then the rest once
    todo = [(M, K, N, "gelu") for _ in range(args.repeats) for (M, K, N) in shapes[:2]]
    todo += [(M, K, N, "fast_gelu") for (M, K, N) in shapes[:2]] + [(M, K, N, "gelu") for (M, K, N) in shapes[2:]]
    for (M, K, N, epi) in todo:
        row = bench_fused(lib, M, K, N, epi, args.rounds)
        res["fused"].append(row)
        print("[fused]", json.dumps(row), flush=True)
        json.dump(res, open(path, "w"), indent=1)
    for (M, K, N) in shapes:
        row = bench_plain(lib, M, K, N, args.reps)
        res["plain"].append(row)
        print("[plain]", json.dumps(row), flush=True)
        json.dump(res, open(path, "w"), indent=1)
    # epilogue probe: K = 64 (one K step per tile), so the time is the epilogue pipeline's
    for (M, N) in [(4096, 4096), (8192, 4096)]:
        for epi in ("gelu", "none"):
            sets, calls = make_sets(M, 64, N)
            row = {"M": M, "K": 64, "N": N, "epi": epi}
            for v, name in VARIANTS.items():
                if v == 2:
                    continue
                f = lambda s, v=v: lib.variant(v, s[0], s[1], s[2], None, s[3], epi)
                row[f"{name}_us"] = gb.time_graph([lambda s=s, f=f: f(s) for s in sets], calls, args.reps) * 1e3
            del sets
            res["probe"].append(row)
            print("[probe]", json.dumps(row), flush=True)
    json.dump(res, open(path, "w"), indent=1)

    names = ["torch", "cublaslt", "wgmma"] + list(VARIANTS.values())
    print(f"\n== checks: {len(res['checks']) - nfail}/{len(res['checks'])} pass")
    print("fused gemm+bias+GELU, us per call (bf16; torch = F.gelu(F.linear(x, w, b)); medians of alternating graph "
          "replays; x = median of the per-round ratios torch / own)")
    print(f"{'M':>5s} {'K':>5s} {'N':>6s} {'epi':9s} " + " ".join(f"{n:>13s}" for n in names) + f" {'best':>13s} {'x torch':>7s}")
    gfail = 0
    for r in res["fused"]:
        gfail += sum(1 for k, v in r.items() if k.endswith("_pass") and not v)
        print(f"{r['M']:5d} {r['K']:5d} {r['N']:6d} {r['epi']:9s} "
              + " ".join(f"{r[n + '_us']:7.1f} {r[n + '_x_torch']:5.3f}" for n in names)
              + f" {r['best']:>13s} {r[r['best'] + '_x_torch']:7.3f}")
    print("plain GEMM TFLOP/s (" + " / ".join(n for n in res["plain"][0] if n.endswith("_tflops")) + ")")
    for r in res["plain"]:
        print(f"{r['M']:5d} {r['K']:5d} {r['N']:6d} " + " ".join(f"{r[n]:7.1f}" for n in r if n.endswith("_tflops")))
    print("epilogue probe (K = 64), us: " + " ".join(n for v, n in VARIANTS.items() if v != 2))
    for r in res["probe"]:
        print(f"{r['M']:5d} {r['N']:6d} {r['epi']:9s} " + " ".join(f"{r[n + '_us']:7.1f}" for v, n in VARIANTS.items() if v != 2))
    print(f"fused-output checks failed: {gfail}")
    return 1 if nfail or gfail else 0


if __name__ == "__main__":
    sys.exit(main())
