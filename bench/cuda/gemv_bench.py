"""Device harness of the own skinny GEMM (kernels/cuda/gemm_skinny.cu) and of the library's fused
gemm + bias + GELU, on sm_90a, through the kernel library's C ABI (ctypes).

    python3 bench/cuda/gemv_bench.py LIB.so --out DIR

LIB.so is the harness library: every kernels/cuda/*.cu and bench/cuda/*_bench_entry.cu
(`bench/cuda/device_run.sh gemv` builds it and runs this). Steps:
  * D2D copy bandwidth (1 GiB, read + write bytes / time), the yardstick of the M <= 16 timings;
  * checks (fresh random inputs, NaN-poisoned outputs, float64 reference): dml_cuda_gemm with
    DML_CUDA_GEMM_SKINNY over M = 1..40, tails in N and K, every epilogue, both dtypes, dml_cuda_bmm
    (batched), and the fallbacks (B as [K, N], K % 8 != 0, a misaligned operand, float32);
  * skinny timings: M = 1, 4, 8, 16 x the 7B-class shapes, ours (automatic row groups and each
    variant), the library's cuBLASLt path and torch.matmul; bytes moved (weight + a + y) / time as %
    of the D2D copy. CUDA-graph replays (many calls per graph), weights rotated over > 400 MB;
  * fused gemm + bias + GELU (erf) vs torch F.gelu(F.linear(x, w, b)) in bf16, each library path;
    also the tanh form (fast_gelu) vs F.gelu(..., approximate="tanh").
Also checks chains of dependent skinny calls in a CUDA graph (programmatic dependent launch) and the
persistent wgmma kernels (DML_CUDA_GEMM_WGMMA_PP / _PERSIST: shapes, epilogues, fallbacks).
--quick: bf16 M = 1 / 16 skinny rows, erf GELU only; --smoke: only a few persistent-kernel checks
(run it first in its own process: a hang must not cost the rest); --no-pp: leave those kernels out.
Writes DIR/gemv_bench.json; prints tables last.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "dinoml", "tools"))
import cuda_timing  # noqa: E402  (python/dinoml/tools: the timing every GPU tool shares)

EPI = {"none": 0, "relu": 1, "gelu": 2, "fast_gelu": 3, "swish": 4, "sigmoid": 5, "tanh": 6, "add": 7, "add_relu": 8}
CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
IMPL = {"cublaslt": 0, "simt": 1, "mma": 2, "wgmma": 4, "skinny": 5, "wgmma_pp": 8, "wgmma_persist": 9, "skinny_pf": 10, "skinny_packed": 12}
NVAR = 11  # gemm_skinny.cu's kVariants (11: variant 1 with programmatic dependent launch)
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
F = torch.nn.functional
ACT = {"none": lambda x: x, "add": lambda x: x, "relu": torch.relu, "add_relu": torch.relu, "gelu": F.gelu,
       "fast_gelu": lambda x: F.gelu(x, approximate="tanh"), "swish": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}


class Lib:
    def __init__(self, so):
        L = self.L = ctypes.CDLL(so)
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        L.dml_cuda_gemm.argtypes = [ctypes.c_int, ctypes.c_int, i64, i64, i64, vp, vp, vp, vp, vp, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_int, vp]
        L.dml_cuda_bmm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(i64), ctypes.POINTER(i64),
                                   ctypes.POINTER(i64), i64, i64, i64, vp, vp, vp, ctypes.c_int, ctypes.c_int, vp]
        L.gemv_bench_skinny.argtypes = [ctypes.c_int, i64, i64, i64, vp, vp, vp, vp, vp, ctypes.c_int, ctypes.c_int, vp]
        L.gemv_bench_variant.argtypes = [i64, i64, i64]
        L.dml_cuda_last_error.restype = ctypes.c_char_p

    def err(self):
        return self.L.dml_cuda_last_error().decode()

    def gemm(self, impl, a, b, bias, d, y, epi, rcr=True, n=None):  # n: N of a packed b
        M, K = a.shape
        N = n if n is not None else b.shape[0] if rcr else b.shape[1]
        p = lambda t: None if t is None else t.data_ptr()
        rc = self.L.dml_cuda_gemm(CODE[a.dtype], 1 if rcr else 0, M, N, K, p(a), p(b), p(bias), p(d), p(y), EPI[epi], 0,
                                  IMPL[impl], torch.cuda.current_stream().cuda_stream)
        if rc:
            raise RuntimeError(self.err())

    def skinny(self, a, b, bias, d, y, epi, ng, n=None):  # ng: the kernel variant (1..NVAR); n: N of a packed b
        M, K = a.shape
        p = lambda t: None if t is None else t.data_ptr()
        rc = self.L.gemv_bench_skinny(CODE[a.dtype], M, b.shape[0] if n is None else n, K, p(a), p(b), p(bias), p(d), p(y), EPI[epi], ng,
                                      torch.cuda.current_stream().cuda_stream)
        if rc:
            raise RuntimeError(self.err())


def judge(y, a, b, bias, d, epi):
    """(unwritten outputs, rel. L2 vs float64, torch's own rel. L2, pass) of y = epi(a·bᵀ + bias (+ d))
    after a synchronize: pass = nothing unwritten, within the dtype's tolerance and within 3× torch's error."""
    torch.cuda.synchronize()
    r = ref(a, b, bias, d, epi)
    bad = int((~torch.isfinite(y)).sum().item())
    e = ((y.double() - r).norm() / r.norm().clamp_min(1e-30)).item()
    et = ((ACT[epi](F.linear(a, b, bias) + (d if d is not None else 0)).double() - r).norm() / r.norm().clamp_min(1e-30)).item()
    return bad, e, et, bad == 0 and e <= TOL[a.dtype] and e <= 3 * et + 1e-4


def variant_check(lib, dt, M, N, K, v, epi="none", bias=False, pack=None, name="new_variant", tag="check8"):
    """One skinny kernel variant `v` against float64 (and next to torch's own error) on fresh random
    inputs with a NaN-poisoned output; pack: a function that lays the weight out for the variant
    (skinny_packed_bench.py's fragment packing). Returns the check's row (printed)."""
    g = torch.Generator(device="cuda")
    g.manual_seed(M * 7919 + N * 31 + K + v * 101 + EPI[epi] * 13)
    a = torch.randn(M, K, device="cuda", generator=g).to(dt)
    b = (torch.randn(N, K, device="cuda", generator=g) / K ** 0.5).to(dt)
    bb = torch.randn(N, device="cuda", generator=g).to(dt) if bias else None
    d = torch.randn(M, N, device="cuda", generator=g).to(dt) if epi in ("add", "add_relu") else None
    y = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    lib.skinny(a, pack(b) if pack else b, bb, d, y, epi, v, n=N)
    bad, e, et, ok = judge(y, a, b, bb, d, epi)
    row = {"name": name, "dtype": str(dt).split(".")[1], "M": M, "N": N, "K": K, "epi": epi, "bias": bias, "ng": v,
           "rel_l2": e, "rel_l2_torch": et, "unwritten": bad, "pass": ok}
    print(f"[{tag}] v{v:<2d} {row['dtype']:8s} M={M:3d} N={N:5d} K={K:5d} {epi:9s} bias={int(bias)} rel_l2={e:.2e} "
          f"(torch {et:.2e}) unwritten={bad} {'PASS' if ok else 'FAIL'}", flush=True)
    return row


def ref(a, b, bias, d, epi):
    r = a.double() @ b.double().t()
    if bias is not None:
        r = r + bias.double()
    if d is not None:
        r = r + d.double()
    return ACT[epi](r)


def checks(lib, pp=True, smoke=False):
    out = []

    def one(name, dt, M, N, K, epi="none", bias=False, rcr=True, offset=0, ng=None, impl="skinny"):
        g = torch.Generator(device="cuda")
        g.manual_seed(M * 7919 + N * 31 + K + offset + EPI[epi] * 13)
        a = torch.randn(M * K + offset, device="cuda", generator=g).to(dt)[offset:].view(M, K)
        b = (torch.randn(N, K, device="cuda", generator=g) / math.sqrt(K)).to(dt)
        bb = torch.randn(N, device="cuda", generator=g).to(dt) if bias else None
        d = torch.randn(M, N, device="cuda", generator=g).to(dt) if epi in ("add", "add_relu") else None
        y = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        if ng is not None:
            lib.skinny(a, b, bb, d, y, epi, ng)
        else:
            lib.gemm(impl, a, b if rcr else b.t().contiguous(), bb, d, y, epi, rcr)
        bad, e, et, ok = judge(y, a, b, bb, d, epi)
        row = {"name": name, "impl": impl, "dtype": str(dt).split(".")[1], "M": M, "N": N, "K": K, "epi": epi, "bias": bias,
               "rcr": rcr, "offset": offset, "ng": ng, "rel_l2": e, "rel_l2_torch": et, "unwritten": bad, "pass": ok}
        out.append(row)
        print(f"[check] {name:10s} {impl:8s} {row['dtype']:8s} M={M:3d} N={N:5d} K={K:5d} {epi:9s} bias={int(bias)} rcr={int(rcr)} "
              f"off={offset} ng={ng} rel_l2={e:.2e} (torch {et:.2e}) unwritten={bad} {'PASS' if ok else 'FAIL'}", flush=True)

    if smoke:  # the persistent kernel alone, in its own process first (a hang must not cost the run)
        for impl in ("wgmma_pp", "wgmma_persist"):
            for (M, N, K) in [(129, 257, 136), (2048, 2048, 64), (4096, 4096, 4096)]:
                one("pp_smoke", torch.bfloat16, M, N, K, bias=True, epi="gelu", impl=impl)
        return out
    for dt in (torch.bfloat16, torch.float16):
        for M in (1, 2, 3, 5, 8, 9, 15, 16, 17, 33, 40):
            one("shape", dt, M, 300, 520, bias=True)
        for (N, K) in [(4096, 4096), (11008, 4096), (4096, 11008), (7, 8), (8, 16), (100, 4104), (33, 40), (4100, 1000)]:
            one("shape", dt, 4, N, K)
        for ng in range(1, NVAR + 1):
            for M in (1, 16):
                one("variant", dt, M, 1000, 1032, bias=True, ng=ng)
        for epi in EPI:
            one("epilogue", dt, 7, 264, 1024, epi=epi, bias=True)
            one("epilogue", dt, 16, 4096, 4096, epi=epi, bias=epi != "none")
        one("fallback", dt, 8, 200, 100, rcr=False)       # B as [K, N]: mma.sync tile kernel
        one("fallback", dt, 8, 200, 102)                  # K % 8 != 0
        one("fallback", dt, 8, 200, 128, offset=1)        # a only 2-byte aligned
    one("fallback", torch.float32, 4, 200, 128, bias=True, epi="gelu")  # float32: SIMT
    # The persistent ping-pong sm_90a GEMM (DML_CUDA_GEMM_WGMMA_PP) through the C ABI: tails, one
    # K step per tile (kt < stages), many tiles per block, every epilogue, odd N (scalar stores),
    # and its fallbacks (B as [K, N], K % 8 != 0, misaligned a -> mma.sync; float32 -> SIMT).
    for impl in ("wgmma_pp", "wgmma_persist") if pp else ():
        for dt in (torch.bfloat16, torch.float16):
            for (M, N, K) in [(1, 4096, 4096), (3, 5, 8), (127, 255, 72), (129, 257, 136), (300, 130, 4104), (1000, 1000, 1000),
                              (2048, 2048, 64), (1024, 1024, 136), (4095, 4097, 4096), (4096, 4096, 4096), (8192, 1024, 4096)]:
                one("pp_shape", dt, M, N, K, bias=True, impl=impl)
            for epi in EPI:
                one("pp_epi", dt, 200, 300, 264, epi=epi, bias=True, impl=impl)
                one("pp_epi", dt, 1024, 2048, 1024, epi=epi, bias=epi != "none", impl=impl)
            one("pp_epi", dt, 65, 71, 80, epi="add", impl=impl)
            one("pp_fallbk", dt, 8, 200, 100, rcr=False, impl=impl)
            one("pp_fallbk", dt, 8, 200, 102, impl=impl)
            one("pp_fallbk", dt, 8, 200, 128, offset=1, impl=impl)
        one("pp_fallbk", torch.float32, 4, 200, 128, bias=True, epi="gelu", impl=impl)
    # Programmatic dependent launch: a chain of skinny calls where each reads the previous one's
    # output (and the next overwrites the buffer the previous read), captured in a CUDA graph and
    # replayed; each PDL variant must wait for its predecessor before reading a / writing y.
    for dt in (torch.bfloat16, torch.float16):
        for v in range(11, NVAR + 1):
            out.append(pdl_chain(lib, dt, v))
        out.append(pdl_chain(lib, dt, 11, memcpy_first=True))
    # dml_cuda_bmm with the skinny kernel: [3, 5, K] x [3, N, K] (strided batch), and b broadcast.
    for dt in (torch.bfloat16, torch.float16):
        for (nb, Mb, N, K) in [(3, 5, 136, 264), (1, 16, 64, 4096)]:
            a = torch.randn(3, Mb, K, device="cuda").to(dt)
            b = (torch.randn(nb, N, K, device="cuda") / math.sqrt(K)).to(dt)
            y = torch.full((3, Mb, N), float("nan"), device="cuda", dtype=dt)
            i64 = ctypes.c_int64
            ys, as_, bs = (i64 * 1)(3), (i64 * 1)(3), (i64 * 1)(nb)
            rc = lib.L.dml_cuda_bmm(CODE[dt], 1, 1, ys, as_, bs, Mb, N, K, a.data_ptr(), b.data_ptr(), y.data_ptr(), 0,
                                    IMPL["skinny"], torch.cuda.current_stream().cuda_stream)
            assert rc == 0, lib.err()
            torch.cuda.synchronize()
            r = a.double() @ b.double().transpose(1, 2)
            bad = int((~torch.isfinite(y)).sum().item())
            e = ((y.double() - r).norm() / r.norm()).item()
            ok = bad == 0 and e <= TOL[dt]
            out.append({"name": "bmm", "dtype": str(dt).split(".")[1], "M": Mb, "N": N, "K": K, "batch_b": nb, "rel_l2": e,
                        "unwritten": bad, "pass": ok})
            print(f"[check] bmm {dt} b_batch={nb} M={Mb} N={N} K={K} rel_l2={e:.2e} unwritten={bad} {'PASS' if ok else 'FAIL'}",
                  flush=True)
    return out


def pdl_chain(lib, dt, v, M=4, N=2048, steps=6, memcpy_first=False):
    try:
        return _pdl_chain(lib, dt, v, M, N, steps, memcpy_first)
    except RuntimeError as e:  # e.g. a programmatic launch the capture refuses: a failed check, not a crash
        print(f"[check] pdl_chain {str(dt).split('.')[1]:8s} variant={v} memcpy_first={int(memcpy_first)} ERROR {e} FAIL",
              flush=True)
        torch.cuda.synchronize()
        return {"name": "pdl_chain", "dtype": str(dt).split(".")[1], "ng": v, "memcpy_first": memcpy_first, "error": str(e),
                "pass": False}


def _pdl_chain(lib, dt, v, M, N, steps, memcpy_first):
    g = torch.Generator(device="cuda")
    g.manual_seed(1234 + v)
    x0 = torch.randn(M, N, device="cuda", generator=g).to(dt)
    ws = [(torch.randn(N, N, device="cuda", generator=g) / math.sqrt(N)).to(dt) for _ in range(steps)]
    bufs = [torch.full((M, N), float("nan"), device="cuda", dtype=dt) for _ in range(2)]
    src = torch.empty_like(x0)

    def chain():
        if memcpy_first:  # the first PDL launch follows a memcpy node, not a kernel
            src.copy_(x0)
        else:
            torch.mul(x0, 1.0, out=src)
        cur = src
        for i, w in enumerate(ws):  # ping-pong between two buffers: WAR and RAW hazards on both
            dst = bufs[i % 2]
            lib.skinny(cur, w, None, None, dst, "tanh", v)
            cur = dst
        return cur
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        chain()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        res = chain()
    for b in bufs:
        b.fill_(float("nan"))
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    r = x0.double()
    for w in ws:
        r = torch.tanh(r @ w.double().t())
    bad = int((~torch.isfinite(res)).sum().item())
    e = ((res.double() - r).norm() / r.norm()).item()
    ok = bad == 0 and e <= TOL[dt] * 2
    print(f"[check] pdl_chain {str(dt).split('.')[1]:8s} variant={v} memcpy_first={int(memcpy_first)} steps={steps} "
          f"rel_l2={e:.2e} unwritten={bad} {'PASS' if ok else 'FAIL'}", flush=True)
    return {"name": "pdl_chain", "dtype": str(dt).split(".")[1], "M": M, "N": N, "K": N, "ng": v, "memcpy_first": memcpy_first,
            "rel_l2": e, "unwritten": bad, "pass": ok}


def time_graph(fns, calls, reps=7):
    ts = sorted(cuda_timing.graph_samples(torch, fns, calls, reps))
    return ts[len(ts) // 2]


def d2d_copy():
    """1 GiB device-to-device copy, (read + write) bytes / time: the yardstick as tests/gpu/quant_run.py
    times it (cuda_timing.d2d_copy_bandwidth), and also as graph replays (a memcpy node in a CUDA graph
    may run on a copy engine: recorded, not used)."""
    bw = cuda_timing.d2d_copy_bandwidth(torch)
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    bw_graph = 2 * src.numel() / (time_graph([lambda: dst.copy_(src)], 10) * 1e-3)
    del src, dst
    return bw, bw_graph


QUICK_VARIANTS = (1, 3, 7, 11)  # --quick: the rule's picks and the PDL variant


def bench_skinny(lib, dt, M, N, K, copy_bw, variants=range(1, NVAR + 1)):
    per_set = (M * K + N * K + M * N) * 2
    nsets = max(2, min(32, math.ceil(420e6 / per_set)))
    sets = []
    for _ in range(nsets):
        sets.append((torch.randn(M, K, device="cuda").to(dt), (torch.randn(N, K, device="cuda") / math.sqrt(K)).to(dt),
                     torch.empty(M, N, device="cuda", dtype=dt)))
    calls = max(nsets, 4 * nsets)
    row = {"dtype": str(dt).split(".")[1], "M": M, "N": N, "K": K, "bytes": per_set, "sets": nsets, "calls": calls,
           "auto_variant": lib.L.gemv_bench_variant(M, N, K)}
    variants_to_time = list(variants)
    variants = {"torch": lambda s: torch.matmul(s[0], s[1].t(), out=s[2]),
                "cublaslt": lambda s: lib.gemm("cublaslt", s[0], s[1], None, None, s[2], "none"),
                "skinny": lambda s: lib.gemm("skinny", s[0], s[1], None, None, s[2], "none"),
                "skinny_pf": lambda s: lib.gemm("skinny_pf", s[0], s[1], None, None, s[2], "none")}
    for v in variants_to_time:
        variants[f"skinny_v{v}"] = lambda s, v=v: lib.skinny(s[0], s[1], None, None, s[2], "none", v)
    for name, f in variants.items():
        try:
            ms = time_graph([lambda s=s, f=f: f(s) for s in sets], calls)
        except RuntimeError as e:  # a variant that cannot be captured/launched is reported, not fatal
            print(f"[skinny] {name} M={M} N={N} K={K}: {e}", flush=True)
            ms = float("inf")
        row[f"{name}_us"] = ms * 1e3
        row[f"{name}_pct_copy"] = 100.0 * per_set / (ms * 1e-3) / copy_bw
    row["best_variant"] = min(variants_to_time, key=lambda v: row[f"skinny_v{v}_us"])
    del sets
    return row


def bench_gelu(lib, M, K, N, tanh=False, pp=True):
    dt = torch.bfloat16
    per_set = (M * K + N * K + N + M * N) * 2
    nsets = max(1, min(16, math.ceil(200e6 / per_set)))
    sets = [(torch.randn(M, K, device="cuda").to(dt), (torch.randn(N, K, device="cuda") / math.sqrt(K)).to(dt),
             torch.randn(N, device="cuda").to(dt), torch.empty(M, N, device="cuda", dtype=dt)) for _ in range(nsets)]
    est_ms = max(2.0 * M * N * K / 600e12 * 1e3, per_set / 4e12 * 1e3)
    calls = int(max(nsets, min(100, math.ceil(10.0 / est_ms))))
    epi = "fast_gelu" if tanh else "gelu"
    approx = "tanh" if tanh else "none"
    row = {"M": M, "K": K, "N": N, "epi": epi, "sets": nsets, "calls": calls}
    # correctness of each library path on set 0 against torch's float64 result
    a, b, bb, y = sets[0]
    r = ACT[epi](a.double() @ b.double().t() + bb.double())
    variants = {"torch": lambda s: F.gelu(F.linear(s[0], s[1], s[2]), approximate=approx)}
    for impl in ("cublaslt", "wgmma") + (("wgmma_pp", "wgmma_persist") if pp else ()) + (("skinny",) if M <= 64 else ()):
        variants[impl] = lambda s, impl=impl: lib.gemm(impl, s[0], s[1], s[2], None, s[3], epi)
    for name, f in variants.items():
        out = f(sets[0])
        if out is None:
            out = sets[0][3]
        torch.cuda.synchronize()
        row[f"{name}_rel_l2"] = ((out.double() - r).norm() / r.norm()).item()
        row[f"{name}_pass"] = bool(row[f"{name}_rel_l2"] <= TOL[dt])
        ms = time_graph([lambda s=s, f=f: f(s) for s in sets], calls)
        row[f"{name}_us"] = ms * 1e3
    lib_best = min((k for k in variants if k != "torch"), key=lambda k: row[f"{k}_us"])
    row["best"] = lib_best
    row["speedup_vs_torch"] = row["torch_us"] / row[f"{lib_best}_us"]
    del sets
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gemv_out"))
    ap.add_argument("--quick", action="store_true", help="bf16 M = 1 and 16 only, no fp16 / M > 16 skinny rows")
    ap.add_argument("--smoke", action="store_true", help="only a few checks of the persistent wgmma kernel")
    ap.add_argument("--no-pp", action="store_true", help="leave the persistent wgmma kernel out")
    args = ap.parse_args()
    pp = not args.no_pp
    os.makedirs(args.out, exist_ok=True)
    lib = Lib(args.lib)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    print("[env]", res, flush=True)
    path = os.path.join(args.out, "gemv_bench.json")
    res["checks"] = checks(lib, pp, args.smoke)
    nfail = sum(1 for c in res["checks"] if not c["pass"])
    if args.smoke:
        print(f"== smoke: {len(res['checks']) - nfail}/{len(res['checks'])} pass")
        return 1 if nfail else 0
    copy_bw, copy_graph = d2d_copy()
    res["d2d_copy_GBps"] = copy_bw / 1e9
    res["d2d_copy_graph_GBps"] = copy_graph / 1e9
    print(f"[bandwidth] D2D copy 1 GiB: {copy_bw / 1e9:.0f} GB/s (read + write; as graph replays {copy_graph / 1e9:.0f} GB/s)",
          flush=True)
    json.dump(res, open(path, "w"), indent=1)

    res["gelu"] = []
    for (M, K, N) in [(8192, 1024, 4096), (8192, 4096, 1024), (4096, 4096, 16384), (4096, 1024, 4096), (16, 4096, 16384),
                      (1, 4096, 11008)]:
        for tanh in (False,) if args.quick else (False, True):
            row = bench_gelu(lib, M, K, N, tanh, pp)
            res["gelu"].append(row)
            print("[gelu]", json.dumps(row), flush=True)
            json.dump(res, open(path, "w"), indent=1)
    json.dump(res, open(path, "w"), indent=1)

    res["skinny"] = []
    for dt in (torch.bfloat16,) if args.quick else (torch.bfloat16, torch.float16):
        shapes = [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336)]
        for M in (1, 16) if args.quick else (1, 4, 8, 16) if dt == torch.bfloat16 else (1, 16):
            for (N, K) in shapes if dt == torch.bfloat16 else shapes[:3]:
                row = bench_skinny(lib, dt, M, N, K, copy_bw, QUICK_VARIANTS if args.quick else range(1, NVAR + 1))
                res["skinny"].append(row)
                print("[skinny]", json.dumps(row), flush=True)
        json.dump(res, open(path, "w"), indent=1)
    for M in () if args.quick else (24, 32, 64):
        row = bench_skinny(lib, torch.bfloat16, M, 4096, 4096, copy_bw)
        res["skinny"].append(row)
        print("[skinny]", json.dumps(row), flush=True)

    print(f"\n== checks: {len(res['checks']) - nfail}/{len(res['checks'])} pass; D2D copy {copy_bw / 1e9:.0f} GB/s")
    print(f"{'dtype':8s} {'M':>3s} {'N':>6s} {'K':>6s} {'torch%':>7s} {'lt%':>6s} {'auto%':>6s} {'v':>3s} "
          + " ".join(f"{'v' + str(v) + '%':>5s}" for v in range(1, NVAR + 1)) + f" {'best':>4s} {'auto_us':>8s} {'torch_us':>8s}"
          "  (% of D2D copy bandwidth)")
    for r in res["skinny"]:
        print(f"{r['dtype']:8s} {r['M']:3d} {r['N']:6d} {r['K']:6d} {r['torch_pct_copy']:7.1f} {r['cublaslt_pct_copy']:6.1f} "
              f"{r['skinny_pct_copy']:6.1f} {r['auto_variant']:3d} "
              + " ".join(f"{r.get('skinny_v' + str(v) + '_pct_copy', float('nan')):5.1f}" for v in range(1, NVAR + 1))
              + f" {r['best_variant']:4d} {r['skinny_us']:8.2f} {r['torch_us']:8.2f}")
    print(f"\n{'M':>5s} {'K':>5s} {'N':>6s} {'epi':9s} {'torch_us':>9s} {'lt_us':>8s} {'wgmma_us':>8s} {'pp_us':>8s} "
          f"{'pers_us':>8s} {'skinny':>8s} {'best':>13s} {'x torch':>7s} {'pers x torch':>12s}")
    gfail = 0
    for r in res["gelu"]:
        gfail += sum(1 for k, v in r.items() if k.endswith("_pass") and not v)
        print(f"{r['M']:5d} {r['K']:5d} {r['N']:6d} {r['epi']:9s} {r['torch_us']:9.1f} {r['cublaslt_us']:8.1f} "
              f"{r['wgmma_us']:8.1f} {r.get('wgmma_pp_us', float('nan')):8.1f} {r.get('wgmma_persist_us', float('nan')):8.1f} "
              f"{r.get('skinny_us', float('nan')):8.1f} {r['best']:>13s} "
              f"{r['speedup_vs_torch']:7.2f} {r['torch_us'] / r.get('wgmma_persist_us', float('nan')):12.2f}")
    print(f"fused-GELU output checks failed: {gfail}")
    return 1 if nfail or gfail else 0


if __name__ == "__main__":
    sys.exit(main())
