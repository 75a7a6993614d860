"""Device harness of the own skinny GEMM reading a fragment-packed weight (target: M <= 16 at >= 80%
of the D2D copy's bandwidth). `bench/cuda/device_run.sh skinny` builds the harness library and runs the
acceptance rows, the M sweep and the chains with this.

    python3 bench/cuda/skinny_packed_bench.py LIB.so --out DIR [--packed 42,43,...] [--base 1,18,25] [--check-base 58]
        [--rows acceptance|wide|msweep | --chain]

--chain times dependent chains instead of the rows: each call's a is the previous call's y (L2-hot, as
in a decoder), its weight a fresh one; checks() adds a 6-step CUDA-graph chain of the packed launch.

Why packed: the register kernel's row-major load pattern (a warp load = 8 weight rows x 64 bytes)
streams a 4096 x 4096 bf16 weight at ~71% of the copy where the same geometry reading 512 contiguous
bytes per warp load reaches 83-85%. The packed layout ([ceil(N/8)][ceil(K/32)][8][32], zero padded)
makes every warp load of the register kernel 512 contiguous bytes; the lowering packs a constant
weight once.

Checks (fresh random inputs, NaN-poisoned outputs, rel. L2 against float64 next to torch's own error):
M = 1..40, the N / K tails, the 7B shapes, every epilogue, both dtypes. Timings as gemv_bench.py's
bench_skinny (CUDA-graph replays, weights rotated over > 400 MB, median of 7), packed variants on packed
copies of the same weights.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemv_bench as gb  # noqa: E402

NVAR = 106


def pack(b):
    N, K = b.shape
    Np, Kp = (N + 7) // 8 * 8, (K + 31) // 32 * 32
    bp = torch.zeros(Np, Kp, device=b.device, dtype=b.dtype)
    bp[:N, :K] = b
    return bp.view(Np // 8, 8, Kp // 32, 32).permute(0, 2, 1, 3).contiguous()


def checks(lib, variants, rowmajor=()):
    """The packed variants `variants` (on packed copies of the weights) and the row-major `rowmajor` ones."""
    out = []

    def one(dt, M, N, K, v, epi="none", bias=False):
        rm = v in rowmajor
        out.append(gb.variant_check(lib, dt, M, N, K, v, epi, bias, pack=None if rm else pack, name="rowmajor" if rm else "packed",
                                    tag="check"))

    # The C ABI: dml_cuda_gemm with DML_CUDA_GEMM_SKINNY_PACKED (skinny_variant_packed's choice) on a weight
    # packed by dml_cuda_pack_skinny_weight; a misaligned a (a view one element in) runs the plain kernel.

    def abi(dt, M, N, K, epi, misalign=False):
        g = torch.Generator(device="cuda")
        g.manual_seed(M * 13 + N * 7 + K + gb.EPI[epi] + misalign)
        a = torch.randn(M * K + 8, device="cuda", generator=g).to(dt)
        a = (a[1:M * K + 1] if misalign else a[:M * K]).view(M, K)
        b = (torch.randn(N, K, device="cuda", generator=g) / K ** 0.5).to(dt)
        bb = torch.randn(N, device="cuda", generator=g).to(dt)
        d = torch.randn(M, N, device="cuda", generator=g).to(dt) if epi == "add" else None
        y = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        bp = torch.empty(lib.L.dml_cuda_skinny_packed_bytes(gb.CODE[dt], N, K) // 2, device="cuda", dtype=dt)
        if lib.L.dml_cuda_pack_skinny_weight(gb.CODE[dt], N, K, b.data_ptr(), bp.data_ptr(), None):
            raise RuntimeError(lib.err())
        lib.gemm("skinny_packed", a, bp, bb, d, y, epi, n=N)
        bad, e, _, ok = gb.judge(y, a, b, bb, d, epi)
        ok = ok and bp.numel() * 2 == ((N + 7) // 8 * 8) * ((K + 31) // 32 * 32) * 2
        out.append({"name": "abi_packed", "dtype": str(dt).split(".")[1], "M": M, "N": N, "K": K, "epi": epi,
                    "misaligned_a": misalign, "rel_l2": e, "unwritten": bad, "pass": ok})
        print(f"[check] abi packed {str(dt).split('.')[1]:8s} M={M:3d} N={N:5d} K={K:5d} {epi:5s} misaligned_a={int(misalign)} "
              f"rel_l2={e:.2e} unwritten={bad} {'PASS' if ok else 'FAIL'}", flush=True)

    lib.L.dml_cuda_skinny_packed_bytes.restype = gb.ctypes.c_int64
    lib.L.dml_cuda_skinny_packed_bytes.argtypes = [gb.ctypes.c_int, gb.ctypes.c_int64, gb.ctypes.c_int64]
    lib.L.dml_cuda_pack_skinny_weight.argtypes = [gb.ctypes.c_int, gb.ctypes.c_int64, gb.ctypes.c_int64, gb.ctypes.c_void_p,
                                                  gb.ctypes.c_void_p, gb.ctypes.c_void_p]
    for dt in (torch.bfloat16, torch.float16):
        for (M, N, K) in [(1, 4096, 4096), (16, 4096, 4096), (9, 3076, 2056), (3, 300, 520), (17, 4100, 1000), (40, 33, 40),
                          (1, 11008, 4096), (8, 8200, 1000), (12, 8200, 1000)]:
            for epi in ("none", "gelu", "add"):
                abi(dt, M, N, K, epi)
        abi(dt, 5, 3076, 2056, "gelu", misalign=True)
        abi(dt, 16, 300, 520, "add", misalign=True)
    # A dependent chain of 6 packed launches captured in one CUDA graph (PDL between them: each waits for
    # the previous one's y before reading it as a), against the same chain in float32 rounded per step.
    def chain(dt, M, N, steps=6):
        g = torch.Generator(device="cuda")
        g.manual_seed(M * 31 + N)
        ws = [(torch.randn(N, N, device="cuda", generator=g) / math.sqrt(N)).to(dt) for _ in range(steps)]
        wps = [pack(w) for w in ws]
        x0 = torch.randn(M, N, device="cuda", generator=g).to(dt)
        bufs = [x0.clone(), torch.empty(M, N, device="cuda", dtype=dt)]

        def run():
            for i in range(steps):
                lib.gemm("skinny_packed", bufs[i % 2], wps[i], None, None, bufs[(i + 1) % 2], "none", n=N)
        run()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        bufs[0].copy_(x0)
        bufs[1].fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = x0.float()
        for w in ws:
            ref = (ref @ w.float().t()).to(dt).float()
        y = bufs[steps % 2].float()
        e = ((y - ref).norm() / ref.norm()).item()
        ok = bool(torch.isfinite(y).all().item()) and e <= (3e-2 if dt == torch.bfloat16 else 5e-3)
        out.append({"name": "chain_packed", "dtype": str(dt).split(".")[1], "M": M, "N": N, "K": N, "steps": steps, "rel_l2": e,
                    "pass": ok})
        print(f"[check] chain packed {str(dt).split('.')[1]:8s} M={M:3d} N=K={N:5d} steps={steps} rel_l2={e:.2e} "
              f"{'PASS' if ok else 'FAIL'}", flush=True)

    for dt in (torch.bfloat16, torch.float16):
        for M in (1, 8, 16):
            chain(dt, M, 4096)
        chain(dt, 5, 1000)
    for dt in (torch.bfloat16, torch.float16):
        for v in list(variants) + list(rowmajor):
            for M in (1, 2, 3, 5, 8, 9, 15, 16, 17, 40):
                one(dt, M, 300, 520, v, bias=True)
            for (N, K) in [(4096, 4096), (4096, 11008), (11008, 4096), (7, 8), (8, 16), (100, 4104), (33, 40),
                           (4100, 1000), (4104, 264), (1, 4096)]:
                for M in (1, 16):
                    one(dt, M, N, K, v)
            for epi in gb.EPI:
                one(dt, 7, 264, 1024, v, epi=epi, bias=True)
    return out


def bench(lib, dt, M, N, K, copy_bw, packed, base):
    per_set = (M * K + N * K + M * N) * 2
    nsets = max(2, min(32, math.ceil(420e6 / per_set)))
    sets = []
    for _ in range(nsets):
        b = (torch.randn(N, K, device="cuda") / math.sqrt(K)).to(dt)
        sets.append((torch.randn(M, K, device="cuda").to(dt), b, torch.empty(M, N, device="cuda", dtype=dt), pack(b)))
    calls = 4 * nsets
    row = {"dtype": str(dt).split(".")[1], "M": M, "N": N, "K": K, "bytes": per_set, "sets": nsets, "calls": calls}
    fns = {"torch": lambda s: torch.matmul(s[0], s[1].t(), out=s[2]),
           "skinny_pf": lambda s: lib.gemm("skinny_pf", s[0], s[1], None, None, s[2], "none"),
           "packed": lambda s: lib.gemm("skinny_packed", s[0], s[3], None, None, s[2], "none", n=N)}
    for v in base:
        fns[f"v{v}"] = lambda s, v=v: lib.skinny(s[0], s[1], None, None, s[2], "none", v)
    for v in packed:
        fns[f"p{v}"] = lambda s, v=v: lib.skinny(s[0], s[3], None, None, s[2], "none", v, n=N)
    for name, f in fns.items():
        try:
            ms = gb.time_graph([lambda s=s, f=f: f(s) for s in sets], calls)
        except RuntimeError as e:
            print(f"[time] {name} M={M} N={N} K={K}: {e}", flush=True)
            ms = float("inf")
        row[f"{name}_us"] = ms * 1e3
        row[f"{name}_pct"] = 100.0 * per_set / (ms * 1e-3) / copy_bw
    del sets
    return row


def bench_chain(lib, dt, M, shapes, copy_bw, packed):
    """A dependent chain, as a decoder runs its linear layers: call i reads the output of call i - 1 as
    its a (L2-hot, written by the previous kernel; the packed launch waits for it in
    griddepcontrol.wait), its weight is a fresh one (rotated over > 400 MB, L2-cold). `shapes` cycle:
    [(4096, 4096)] chains one square layer, [(11008, 4096), (4096, 11008)] a 7B MLP's up and down
    projections. % of the copy counts a, b and y bytes of every call."""
    ws, per_cycle = [], 0
    for (N, K) in shapes:
        per_cycle += (M * K + N * K + M * N) * 2
    nsets = max(2, min(32, math.ceil(420e6 / per_cycle)))
    for _ in range(nsets):
        for (N, K) in shapes:
            b = (torch.randn(N, K, device="cuda") / math.sqrt(K)).to(dt)
            ws.append((N, K, b, pack(b)))
    widest = max(max(N, K) for (N, K) in shapes)
    bufs = [torch.randn(M * widest, device="cuda").to(dt), torch.empty(M * widest, device="cuda", dtype=dt)]
    calls = len(ws) * 4
    row = {"dtype": str(dt).split(".")[1], "M": M, "chain": "x".join(f"{N}:{K}" for (N, K) in shapes), "sets": nsets, "calls": calls,
           "bytes_per_call": per_cycle / len(shapes)}

    def step(i, how):
        N, K, b, bp = ws[i % len(ws)]
        a, y = bufs[i % 2][:M * K].view(M, K), bufs[(i + 1) % 2][:M * N].view(M, N)
        if how == "torch":
            torch.matmul(a, b.t(), out=y)
        elif how == "packed":
            lib.gemm("skinny_packed", a, bp, None, None, y, "none", n=N)
        else:
            lib.skinny(a, bp, None, None, y, "none", how, n=N)

    for how in ["torch", "packed"] + list(packed):
        name = how if isinstance(how, str) else f"p{how}"
        try:
            ms = gb.time_graph([lambda i=i, how=how: step(i, how) for i in range(calls)], calls)
        except RuntimeError as e:
            print(f"[chain] {name} M={M}: {e}", flush=True)
            ms = float("inf")
        row[f"{name}_us"] = ms * 1e3
        row[f"{name}_pct"] = 100.0 * row["bytes_per_call"] / (ms * 1e-3) / copy_bw
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/skinny_packed_out"))
    ap.add_argument("--packed", default="42,43,44,45,46,47")
    ap.add_argument("--base", default="1,18,25")
    ap.add_argument("--no-checks", action="store_true")
    ap.add_argument("--check-base", default="", help="row-major variants (of --base) to check too, e.g. 58")
    ap.add_argument("--chain", action="store_true", help="time dependent chains (a = the previous call's y) instead of the rows")
    ap.add_argument("--rows", default="acceptance", choices=["acceptance", "wide", "msweep"],
                    help="acceptance: the N = 4096 weights and others; wide: N = 11008 / 14336, K = 4096 at M = 1..16; "
                         "msweep: the 7B-class weights (N:K 4096:4096 / 11008 / 14336, 11008:4096, 14336:4096) at M = 1..16")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gb.NVAR = NVAR
    lib = gb.Lib(args.lib)
    packed = [int(v) for v in args.packed.split(",")]
    base = [int(v) for v in args.base.split(",")]
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    rowmajor = [int(v) for v in args.check_base.split(",") if v]
    res["checks"] = [] if args.no_checks else checks(lib, packed, rowmajor)
    nfail = sum(1 for c in res["checks"] if not c["pass"])
    print(f"== checks: {len(res['checks']) - nfail}/{len(res['checks'])} pass", flush=True)
    copy_bw, _ = gb.d2d_copy()
    res["d2d_copy_GBps"] = copy_bw / 1e9
    print(f"[bandwidth] D2D copy 1 GiB: {copy_bw / 1e9:.0f} GB/s", flush=True)
    if args.chain:
        res["chain"] = []
        for dt in (torch.bfloat16, torch.float16):
            for shapes in ([(4096, 4096)], [(11008, 4096), (4096, 11008)]):
                for M in ((1, 2, 4, 8, 12, 16) if dt == torch.bfloat16 else (1, 16)):
                    r = bench_chain(lib, dt, M, shapes, copy_bw, packed)
                    res["chain"].append(r)
                    print("[chain]", json.dumps(r), flush=True)
                    json.dump(res, open(os.path.join(args.out, "skinny_packed.json"), "w"), indent=1)
        names = ["torch", "packed"] + [f"p{v}" for v in packed]
        print(f"\n== dependent chains (a = the previous call's y); checks {len(res['checks']) - nfail}/{len(res['checks'])} pass; "
              f"D2D copy {copy_bw / 1e9:.0f} GB/s")
        print(f"{'dt':5s} {'M':>3s} {'chain (N:K ...)':>22s} " + " ".join(f"{n:>9s}" for n in names) + "  (% of D2D)")
        for r in res["chain"]:
            print(f"{r['dtype'][:5]:5s} {r['M']:3d} {r['chain']:>22s} " + " ".join(f"{r[n + '_pct']:9.1f}" for n in names))
        return 1 if nfail else 0
    rows = ([(torch.bfloat16, M, 4096, K) for M in (1, 16) for K in (4096, 11008, 14336)]
            + [(torch.bfloat16, M, 4096, K) for M in (4, 8) for K in (4096, 11008)]
            + [(torch.float16, M, 4096, 4096) for M in (1, 16)]
            + [(torch.bfloat16, M, N, K) for M in (1, 16) for (N, K) in [(11008, 4096), (14336, 4096), (2048, 4096),
                                                                           (4096, 1024), (1024, 4096)]])
    if args.rows == "wide":
        rows = [(torch.bfloat16, M, N, 4096) for N in (11008, 14336) for M in (1, 2, 4, 8, 12, 16)]
    if args.rows == "msweep":
        rows = [(torch.bfloat16, M, N, K) for (N, K) in [(4096, 4096), (4096, 11008), (4096, 14336), (11008, 4096), (14336, 4096)]
                for M in (1, 2, 3, 4, 6, 8, 9, 12, 16)]
    res["rows"] = []
    names = ["torch", "skinny_pf", "packed"] + [f"v{v}" for v in base] + [f"p{v}" for v in packed]
    for (dt, M, N, K) in rows:
        r = bench(lib, dt, M, N, K, copy_bw, packed, base)
        res["rows"].append(r)
        print("[time]", json.dumps(r), flush=True)
        json.dump(res, open(os.path.join(args.out, "skinny_packed.json"), "w"), indent=1)
    print(f"\n== checks: {len(res['checks']) - nfail}/{len(res['checks'])} pass; D2D copy {copy_bw / 1e9:.0f} GB/s")
    for c in [c for c in res["checks"] if not c["pass"]][:20]:
        print("FAIL", json.dumps(c))
    print(f"{'dt':5s} {'M':>3s} {'N':>6s} {'K':>6s} " + " ".join(f"{n:>9s}" for n in names) + "  (% of D2D)")
    for r in res["rows"]:
        print(f"{r['dtype'][:5]:5s} {r['M']:3d} {r['N']:6d} {r['K']:6d} " + " ".join(f"{r[n + '_pct']:9.1f}" for n in names))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
