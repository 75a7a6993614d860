"""Session-8 device harness of the own skinny GEMM (kernels/cuda/gemm_skinny.cu), issue 4's
"M <= 16 at >= 80% of the D2D copy" criterion for the N = 4096 weights of a 7B-class model.

    python3 bench/cuda/skinny8_bench.py LIB.so --out DIR [--no-base-checks] [--session9] [--variants 1,18,...]

LIB.so: the harness library of bench/cuda/gemv_bench.py (kernel library GEMM files + gemv_bench_entry.cu).
Steps (gemv_bench.py's helpers: fresh random inputs, NaN-poisoned outputs, float64 reference,
CUDA-graph replays with weights rotated over > 400 MB, median):
  1. checks of the bulk-copy ring variants (12..17, 19..24) and the weight-prefetching PDL variant (18)
     (--session9: of session 9's variants 25..34 instead):
     M = 1..40, N / K tails (K not a multiple of the stage, N not a multiple of 8), the 7B shapes,
     every epilogue, both dtypes, and chains of dependent calls captured in a CUDA graph;
  2. gemv_bench.py's own checks (C ABI with the automatic variant rule, bmm, fallbacks);
  3. D2D copy (1 GiB, the yardstick);
  4. timings: bf16 M = 1 / 16 (and fp16 M = 1 / 16 at N = 4096) x the 7B shapes: torch.matmul,
     the library's cuBLASLt path, the automatic skinny choice and each variant.
Writes DIR/skinny8_bench.json; prints a table last (% of the D2D copy).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemv_bench as gb  # noqa: E402

NEW = list(range(12, 25))
TIMED = [1, 3, 7, 11, 18, 14, 17, 19, 20, 21, 22, 23, 24]
PDL_FIRST = [16, 18, 23, 24]  # PDL variants also chained after a memcpy node
NVAR = 50  # the variants this harness knows (gemm_skinny.cu has more: 51..57 read a packed weight, skinny_packed_bench.py)
# --session9: session 9's variants (ring 25..27, register kernel with PF / a shared-memory prologue 28..34)
NEW9 = list(range(25, 35))  # run 2: 35..37, run 3: 38..41 (--new)
TIMED9 = [1, 18, 22] + NEW9
PDL_FIRST9 = [25, 27] + list(range(28, 42))


def abi_one(out, lib, impl, dt, M, N, K, epi):
    a = torch.randn(M, K, device="cuda").to(dt)
    b = (torch.randn(N, K, device="cuda") / K ** 0.5).to(dt)
    bb = torch.randn(N, device="cuda").to(dt)
    d = torch.randn(M, N, device="cuda").to(dt) if epi == "add" else None
    y = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    lib.gemm(impl, a, b, bb, d, y, epi)
    torch.cuda.synchronize()
    r = gb.ref(a, b, bb, d, epi)
    bad = int((~torch.isfinite(y)).sum().item())
    e = ((y.double() - r).norm() / r.norm()).item()
    ok = bad == 0 and e <= gb.TOL[dt]
    out.append({"name": "abi", "impl": impl, "dtype": str(dt).split(".")[1], "M": M, "N": N, "K": K, "epi": epi,
                "auto_variant": lib.L.gemv_bench_variant(M, N, K), "rel_l2": e, "unwritten": bad, "pass": ok})
    print(f"[check8] abi {impl:9s} {str(dt).split('.')[1]:8s} M={M:3d} N={N:5d} K={K:5d} {epi:5s} rel_l2={e:.2e} "
          f"unwritten={bad} {'PASS' if ok else 'FAIL'}", flush=True)


def new_checks(lib, new=NEW, pdl_first=PDL_FIRST):
    out = []

    def one(dt, M, N, K, v, epi="none", bias=False):
        out.append(gb.variant_check(lib, dt, M, N, K, v, epi, bias))

    # The C ABI with DML_CUDA_GEMM_SKINNY_PF (skinny_variant_prefetch's choice) and with the rule.
    gb.IMPL.setdefault("skinny_pf", 10)
    for dt in (torch.bfloat16, torch.float16):
        for impl in ("skinny_pf", "skinny"):
            for (M, N, K) in [(1, 4096, 4096), (16, 4096, 4096), (1, 4096, 11008), (8, 4096, 11008), (16, 4096, 14336),
                              (1, 2048, 4096), (16, 1024, 4096), (4, 4096, 1024), (3, 300, 520), (17, 4100, 1000)]:
                for epi in ("none", "gelu", "add"):
                    abi_one(out, lib, impl, dt, M, N, K, epi)
    for dt in (torch.bfloat16, torch.float16):
        for v in new:
            for M in (1, 2, 3, 5, 8, 9, 15, 16, 17, 40):
                one(dt, M, 300, 520, v, bias=True)
            for (N, K) in [(4096, 4096), (4096, 11008), (4096, 14336), (11008, 4096), (7, 8), (8, 16), (100, 4104), (33, 40),
                           (4100, 1000), (4104, 264), (1, 4096)]:
                for M in (1, 16):
                    one(dt, M, N, K, v)
            for epi in gb.EPI:
                one(dt, 7, 264, 1024, v, epi=epi, bias=True)
                one(dt, 16, 4096, 4096, v, epi=epi, bias=epi != "none")
        for v in new:
            out.append(gb.pdl_chain(lib, dt, v))
        for v in pdl_first:
            out.append(gb.pdl_chain(lib, dt, v, memcpy_first=True))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/skinny8_out"))
    ap.add_argument("--no-base-checks", action="store_true")
    ap.add_argument("--variants", default=None, help="variants to time (default: TIMED, or TIMED9 with --session9)")
    ap.add_argument("--session9", action="store_true", help="check and time session 9's variants (NEW9) instead of NEW")
    ap.add_argument("--new", default=None, help="with --session9: the variants to check (default: NEW9)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gb.NVAR = NVAR
    lib = gb.Lib(args.lib)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    print("[env]", res, flush=True)
    path = os.path.join(args.out, "skinny8_bench.json")
    if args.session9:
        new9 = [int(v) for v in args.new.split(",")] if args.new else NEW9
        res["checks"] = new_checks(lib, new9, [v for v in new9 if v in PDL_FIRST9])
    else:
        res["checks"] = new_checks(lib)
    if not args.no_base_checks:
        res["checks"] += gb.checks(lib, pp=False)
    nfail = sum(1 for c in res["checks"] if not c["pass"])
    print(f"== checks: {len(res['checks']) - nfail}/{len(res['checks'])} pass", flush=True)
    json.dump(res, open(path, "w"), indent=1)
    copy_bw, copy_graph = gb.d2d_copy()
    res["d2d_copy_GBps"] = copy_bw / 1e9
    res["d2d_copy_graph_GBps"] = copy_graph / 1e9
    print(f"[bandwidth] D2D copy 1 GiB: {copy_bw / 1e9:.0f} GB/s (graph {copy_graph / 1e9:.0f})", flush=True)
    variants = [int(v) for v in args.variants.split(",")] if args.variants else (TIMED9 if args.session9 else TIMED)
    res["skinny"] = []
    shapes = [(4096, 4096), (4096, 11008), (4096, 14336), (11008, 4096), (14336, 4096)]
    rows = [(torch.bfloat16, M, N, K) for M in (1, 16) for (N, K) in shapes]
    rows += [(torch.float16, M, N, K) for M in (1, 16) for (N, K) in shapes[:3]]
    rows += [(torch.bfloat16, M, N, K) for M in (1, 16) for (N, K) in [(2048, 4096), (1024, 4096), (4096, 1024), (2048, 8192)]]
    if args.session9:  # the N = 4096 weights first (the acceptance shapes), then M = 4 / 8, the rest
        rows = ([(torch.bfloat16, M, 4096, K) for M in (1, 16) for K in (4096, 11008, 14336)]
                + [(torch.bfloat16, M, 4096, K) for M in (4, 8) for K in (4096, 11008)]
                + [(torch.float16, M, 4096, K) for M in (1, 16) for K in (4096, 11008)]
                + [(torch.bfloat16, M, N, K) for M in (1, 16) for (N, K) in [(11008, 4096), (2048, 4096), (4096, 1024),
                                                                               (2048, 1024), (2048, 8192), (1024, 4096)]])
    for (dt, M, N, K) in rows:
        row = gb.bench_skinny(lib, dt, M, N, K, copy_bw, variants)
        res["skinny"].append(row)
        print("[skinny]", json.dumps(row), flush=True)
        json.dump(res, open(path, "w"), indent=1)
    json.dump(res, open(path, "w"), indent=1)
    print(f"\n== checks: {len(res['checks']) - nfail}/{len(res['checks'])} pass; D2D copy {copy_bw / 1e9:.0f} GB/s")
    fails = [c for c in res["checks"] if not c["pass"]]
    for c in fails[:20]:
        print("FAIL", json.dumps(c))
    print(f"{'dt':5s} {'M':>3s} {'N':>6s} {'K':>6s} {'torch':>6s} {'lt':>6s} {'auto':>6s} {'pf':>6s} {'av':>3s} "
          + " ".join(f"{'v' + str(v):>5s}" for v in variants) + f" {'best':>4s} {'best_us':>8s} {'torch_us':>8s}  (% of D2D)")
    for r in res["skinny"]:
        print(f"{r['dtype'][:5]:5s} {r['M']:3d} {r['N']:6d} {r['K']:6d} {r['torch_pct_copy']:6.1f} {r['cublaslt_pct_copy']:6.1f} "
              f"{r['skinny_pct_copy']:6.1f} {r.get('skinny_pf_pct_copy', float('nan')):6.1f} {r['auto_variant']:3d} "
              + " ".join(f"{r.get('skinny_v' + str(v) + '_pct_copy', float('nan')):5.1f}" for v in variants)
              + f" {r['best_variant']:4d} {r['skinny_v' + str(r['best_variant']) + '_us']:8.2f} {r['torch_us']:8.2f}")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
