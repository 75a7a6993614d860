"""Device harness of the own sm_90a GEMM (kernels/cuda/gemm_wgmma.cu): correctness against a
float64 reference and throughput against torch.matmul (cuBLAS) on sm_90a.

Run on the GPU machine from the repository root (or a copy of kernels/, include/, bench/cuda/):
    python3 bench/cuda/wgmma_bench.py --out DIR
It builds DIR/libwgmma_bench.so with nvcc (sm_90a), checks the SASS for HGMMA, then
  * checks every shape (square, tails, 7B-model shapes, every fused epilogue) on fresh random
    inputs with the output poisoned (NaN) before each call: rel. L2 error vs float64 next to the
    error torch.matmul itself makes, and no element left unwritten;
  * times each shape with CUDA events over CUDA-graph replays (many calls per graph; input sets
    rotated so small problems do not run from L2), median of the replays, ours (tile 128x128,
    128x256 and the automatic choice, and the persistent kernels of gemm_wgmma_pp.cu as tile codes
    1 = ping-pong, 2 = 128x256 shared tiles) vs torch.matmul.
--lib PATH uses a prebuilt library holding wgmma_bench_entry.cu (`bench/cuda/device_run.sh gemm`);
--no-pp leaves the persistent kernels out.
Writes DIR/wgmma_bench.json and prints a table last.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "dinoml", "tools"))
import cuda_timing  # noqa: E402  (python/dinoml/tools: the timing every GPU tool shares)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPI = {"none": 0, "relu": 1, "gelu": 2, "fast_gelu": 3, "swish": 4, "sigmoid": 5, "tanh": 6, "add": 7, "add_relu": 8}
DT = {"bfloat16": (torch.bfloat16, 2), "float16": (torch.float16, 1)}


def sh(cmd, log):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    log.write(f"$ {cmd}\n{r.stdout}{r.stderr}\n")
    log.flush()
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        raise SystemExit(f"failed: {cmd}")
    return r.stdout + r.stderr


def build(out, log):
    so = os.path.join(out, "libwgmma_bench.so")
    k = os.path.join(ROOT, "kernels", "cuda")
    t0 = time.time()
    ptx = sh(f"nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden "
             f"-gencode=arch=compute_90a,code=sm_90a -Xptxas -v -DDML_CUDA_LIBRARY_ARCHS=\\\"sm_90a\\\" -I{k} -I{ROOT}/include "
             f"{k}/gemm_wgmma.cu {k}/gemm_wgmma_pp.cu {k}/status.cu {ROOT}/bench/cuda/wgmma_bench_entry.cu -o {so}", log)
    regs = [l.strip() for l in ptx.splitlines() if "registers" in l or "spill" in l or "arning" in l]
    sass = sh(f"cuobjdump --dump-sass {so}", log)
    n_hgmma = sum(1 for l in sass.splitlines() if "HGMMA" in l)
    n_local = sum(1 for l in sass.splitlines() if " STL" in l or " LDL" in l)
    info = {"build_s": round(time.time() - t0, 1), "ptxas": regs, "hgmma_sass_lines": n_hgmma, "local_mem_sass_lines": n_local}
    print("[build]", json.dumps(info), flush=True)
    return so, info


def ref_gemm(a, b, bias, d, epi):
    r = a.double() @ b.double().t()
    if bias is not None:
        r = r + bias.double()
    if d is not None:
        r = r + d.double()
    F = torch.nn.functional
    if epi in ("relu", "add_relu"):
        r = torch.relu(r)
    elif epi == "gelu":
        r = F.gelu(r)
    elif epi == "fast_gelu":
        r = F.gelu(r, approximate="tanh")
    elif epi == "swish":
        r = F.silu(r)
    elif epi == "sigmoid":
        r = torch.sigmoid(r)
    elif epi == "tanh":
        r = torch.tanh(r)
    return r


def torch_gemm(a, b, bias, d, epi):
    r = torch.nn.functional.linear(a, b, bias)
    if d is not None:
        r = r + d
    F = torch.nn.functional
    return {"none": lambda x: x, "add": lambda x: x, "relu": torch.relu, "add_relu": torch.relu, "gelu": F.gelu,
            "fast_gelu": lambda x: F.gelu(x, approximate="tanh"), "swish": F.silu, "sigmoid": torch.sigmoid,
            "tanh": torch.tanh}[epi](r)


def rel_l2(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


class Lib:
    def __init__(self, so):
        self.lib = ctypes.CDLL(so)
        L = self.lib
        L.wgmma_bench_gemm.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64] + [ctypes.c_void_p] * 5 + [
            ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        L.wgmma_bench_supported.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
        L.wgmma_bench_error.restype = ctypes.c_char_p

    def gemm(self, code, a, b, bias, d, y, epi, tile_n):
        M, K = a.shape
        N = b.shape[0]
        p = lambda t: None if t is None else t.data_ptr()
        rc = self.lib.wgmma_bench_gemm(code, M, N, K, p(a), p(b), p(bias), p(d), p(y), EPI[epi], tile_n,
                                       torch.cuda.current_stream().cuda_stream)
        if rc != 0:
            raise RuntimeError(self.lib.wgmma_bench_error().decode())

    def supported(self, code, a, b):
        return self.lib.wgmma_bench_supported(code, a.shape[0], b.shape[0], a.shape[1], a.data_ptr(), b.data_ptr()) == 1


def check(lib, dtype, M, N, K, epi="none", bias=False, resid=False, tile_n=0):
    tdt, code = DT[dtype]
    g = torch.Generator(device="cuda")
    g.manual_seed(hash((dtype, M, N, K, epi, bias, resid, tile_n)) & 0xFFFFFFFF)
    a = torch.randn(M, K, device="cuda", generator=g).to(tdt)
    b = (torch.randn(N, K, device="cuda", generator=g) / math.sqrt(K)).to(tdt)
    bb = torch.randn(N, device="cuda", generator=g).to(tdt) if bias else None
    d = torch.randn(M, N, device="cuda", generator=g).to(tdt) if resid else None
    y = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    assert lib.supported(code, a, b)
    lib.gemm(code, a, b, bb, d, y, epi, tile_n)
    torch.cuda.synchronize()
    ref = ref_gemm(a, b, bb, d, epi)
    unwritten = int((~torch.isfinite(y)).sum().item())
    err = rel_l2(y, ref)
    err_torch = rel_l2(torch_gemm(a, b, bb, d, epi), ref)
    maxerr = ((y.double() - ref).abs().max() / ref.abs().max().clamp_min(1.0)).item() if unwritten == 0 else float("nan")
    tol = 1e-2 if dtype == "bfloat16" else 2e-3
    ok = unwritten == 0 and err <= tol and err <= 3 * err_torch + 1e-4
    return {"dtype": dtype, "M": M, "N": N, "K": K, "epi": epi, "bias": bias, "resid": resid, "tile_n": tile_n,
            "rel_l2": err, "rel_l2_torch": err_torch, "max_err": maxerr, "unwritten": unwritten, "pass": ok}


def time_graph(fn_list, calls, reps=10):
    """Median ms per call over `reps` replays of a graph that makes `calls` calls (cycling fn_list)."""
    ts = sorted(cuda_timing.graph_samples(torch, fn_list, calls, reps))
    return ts[len(ts) // 2], ts


def bench(lib, dtype, M, N, K, variants):
    tdt, code = DT[dtype]
    flop = 2.0 * M * N * K
    per_set = (M * K + N * K + M * N) * 2
    nsets = max(1, min(16, math.ceil(400e6 / per_set)))
    sets = []
    for _ in range(nsets):
        a = torch.randn(M, K, device="cuda").to(tdt)
        b = (torch.randn(N, K, device="cuda") / math.sqrt(K)).to(tdt)
        sets.append((a, b, torch.empty(M, N, device="cuda", dtype=tdt), torch.empty(M, N, device="cuda", dtype=tdt)))
    est_ms = flop / 500e12 * 1e3
    calls = int(max(nsets, min(200, math.ceil(20.0 / max(est_ms, 1e-3)))))  # ~20 ms per replay
    row = {"dtype": dtype, "M": M, "N": N, "K": K, "sets": nsets, "calls_per_graph": calls}
    t_ms, _ = time_graph([lambda s=s: torch.matmul(s[0], s[1].t(), out=s[3]) for s in sets], calls)
    row["torch_ms"] = t_ms
    row["torch_tflops"] = flop / t_ms / 1e9
    for v in variants:
        ms, _ = time_graph([lambda s=s: lib.gemm(code, s[0], s[1], None, None, s[2], "none", v) for s in sets], calls)
        row[f"wgmma{v or 'auto'}_ms"] = ms
        row[f"wgmma{v or 'auto'}_tflops"] = flop / ms / 1e9
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/wgmma_out"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--lib", help="a prebuilt library holding wgmma_bench_entry.cu (skips the build)")
    ap.add_argument("--no-pp", action="store_true", help="leave the persistent ping-pong kernel (tile 1) out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "wgmma_build.log"), "w")
    print("[env]", torch.__version__, torch.cuda.get_device_name(), flush=True)
    if args.lib:
        sass = subprocess.run(["cuobjdump", "--dump-sass", args.lib], capture_output=True, text=True).stdout
        so, binfo = args.lib, {"prebuilt": args.lib, "hgmma_sass_lines": sum(1 for l in sass.splitlines() if "HGMMA" in l),
                               "local_mem_sass_lines": sum(1 for l in sass.splitlines() if " STL" in l or " LDL" in l)}
        print("[build]", json.dumps(binfo), flush=True)
    else:
        so, binfo = build(args.out, log)
    tiles = (128, 256) if args.no_pp else (128, 256, 1, 2)  # 1 / 2: the persistent ping-pong / 128x256 kernels
    lib = Lib(so)
    result = {"build": binfo, "device": torch.cuda.get_device_name(), "torch": torch.__version__, "checks": [], "timings": []}

    checks = []
    for dt in DT:
        for (M, N, K) in [(128, 128, 64), (256, 512, 1024), (1, 4096, 4096), (16, 11008, 4096), (512, 4096, 11008),
                          (3, 5, 8), (127, 255, 72), (129, 257, 136), (1000, 1000, 1000), (300, 130, 4104),
                          (4095, 4097, 4096), (4096, 4096, 4096), (4096, 14336, 4096)]:
            for tn in tiles:
                checks.append((dt, M, N, K, "none", False, False, tn))
        checks.append((dt, 8192, 8192, 8192, "none", False, False, 0))
        for pt in () if args.no_pp else (1, 2):
            checks.append((dt, 8192, 8192, 8192, "none", False, False, pt))
            checks.append((dt, 2048, 2048, 64, "gelu", True, False, pt))  # one K step per tile
        for epi in EPI:
            resid = epi in ("add", "add_relu")
            checks.append((dt, 200, 300, 264, epi, True, resid, 128))
            checks.append((dt, 512, 1024, 512, epi, True, resid, 256))
            for pt in () if args.no_pp else (1, 2):
                checks.append((dt, 1024, 1024, 512, epi, True, resid, pt))
        checks.append((dt, 64, 72, 64, "none", True, False, 256))       # N % 8 == 0, tails in N
        checks.append((dt, 65, 71, 80, "add", False, True, 128))        # N odd: scalar stores, no bias
        for pt in () if args.no_pp else (1, 2):
            checks.append((dt, 65, 71, 80, "add", False, True, pt))
    for c in checks:
        r = check(lib, *c)
        result["checks"].append(r)
        print(f"[check] {r['dtype']:8s} M={r['M']:5d} N={r['N']:5d} K={r['K']:5d} tile={r['tile_n']:3d} {r['epi']:9s} "
              f"bias={int(r['bias'])} d={int(r['resid'])} rel_l2={r['rel_l2']:.2e} (torch {r['rel_l2_torch']:.2e}) "
              f"max={r['max_err']:.2e} unwritten={r['unwritten']} {'PASS' if r['pass'] else 'FAIL'}", flush=True)
    json.dump(result, open(os.path.join(args.out, "wgmma_bench.json"), "w"), indent=1)

    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 1024), (8192, 1024, 4096), (4096, 16384, 4096),
              (4096, 4096, 1024)]
    if not args.quick:
        for M in (1, 16, 512, 4096):
            for (N, K) in [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096)]:
                shapes.append((M, N, K))
    for dt in ("bfloat16",) if args.quick else DT:
        for (M, N, K) in shapes:
            r = bench(lib, dt, M, N, K, [128, 256, 0] + ([] if args.no_pp else [1, 2]))
            result["timings"].append(r)
            print("[time]", json.dumps(r), flush=True)
            json.dump(result, open(os.path.join(args.out, "wgmma_bench.json"), "w"), indent=1)

    n_fail = sum(1 for r in result["checks"] if not r["pass"])
    print(f"\n== build: HGMMA lines {binfo['hgmma_sass_lines']}, local-memory lines {binfo['local_mem_sass_lines']}; "
          f"checks: {len(result['checks']) - n_fail}/{len(result['checks'])} pass")
    print(f"{'dtype':8s} {'M':>5s} {'N':>6s} {'K':>6s} {'torch':>7s} {'w128':>7s} {'w256':>7s} {'auto':>7s} {'auto/torch':>10s}"
          f" {'pp':>7s} {'pp/torch':>8s} {'pers':>7s} {'pers/torch':>10s}  (TFLOP/s)")
    for r in result["timings"]:
        pp, pe = r.get("wgmma1_tflops", float("nan")), r.get("wgmma2_tflops", float("nan"))
        print(f"{r['dtype']:8s} {r['M']:5d} {r['N']:6d} {r['K']:6d} {r['torch_tflops']:7.1f} {r['wgmma128_tflops']:7.1f} "
              f"{r['wgmma256_tflops']:7.1f} {r['wgmmaauto_tflops']:7.1f} {r['wgmmaauto_tflops'] / r['torch_tflops']:10.2f}"
              f" {pp:7.1f} {pp / r['torch_tflops']:8.2f} {pe:7.1f} {pe / r['torch_tflops']:10.2f}")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
