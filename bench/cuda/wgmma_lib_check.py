"""Checks the own sm_90a GEMM through the kernel library's C ABI (dml_cuda_gemm / dml_cuda_bmm with
DML_CUDA_GEMM_WGMMA = 4), including the paths where the library falls back (B as [K, N], K % 8 != 0,
float32, a misaligned operand), against a float64 reference; NaN-poisoned outputs, fresh inputs.

    python3 bench/cuda/wgmma_lib_check.py LIB.so
"""
from __future__ import annotations

import ctypes
import math
import sys

import torch

WGMMA, CUBLASLT = 4, 0
EPI = {"none": 0, "relu": 1, "gelu": 2, "fast_gelu": 3, "swish": 4, "sigmoid": 5, "tanh": 6, "add": 7, "add_relu": 8}
CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def main():
    L = ctypes.CDLL(sys.argv[1])
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    L.dml_cuda_gemm.argtypes = [ctypes.c_int, ctypes.c_int, i64, i64, i64, vp, vp, vp, vp, vp, ctypes.c_int, ctypes.c_int,
                                ctypes.c_int, vp]
    L.dml_cuda_bmm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(i64), ctypes.POINTER(i64),
                               ctypes.POINTER(i64), i64, i64, i64, vp, vp, vp, ctypes.c_int, ctypes.c_int, vp]
    L.dml_cuda_last_error.restype = ctypes.c_char_p
    stream = lambda: torch.cuda.current_stream().cuda_stream
    F = torch.nn.functional
    act = {"none": lambda x: x, "add": lambda x: x, "relu": torch.relu, "add_relu": torch.relu, "gelu": F.gelu,
           "fast_gelu": lambda x: F.gelu(x, approximate="tanh"), "swish": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}
    fails = 0

    def report(name, y, ref, dt):
        nonlocal fails
        bad = int((~torch.isfinite(y)).sum().item())
        err = ((y.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        ok = bad == 0 and err <= TOL[dt]
        fails += 0 if ok else 1
        print(f"[lib] {name:60s} rel_l2={err:.2e} unwritten={bad} {'PASS' if ok else 'FAIL'}", flush=True)

    def gemm(dt, M, N, K, rcr=True, epi="none", bias=False, offset=0):
        g = torch.Generator(device="cuda")
        g.manual_seed(M * 7919 + N * 31 + K + offset)
        a_full = torch.randn(M * K + offset, device="cuda", generator=g).to(dt)
        a = a_full[offset:].view(M, K)  # offset 1: a is only 2-byte aligned
        b = (torch.randn(N, K, device="cuda", generator=g) / math.sqrt(K)).to(dt)
        bb = torch.randn(N, device="cuda", generator=g).to(dt) if bias else None
        d = torch.randn(M, N, device="cuda", generator=g).to(dt) if epi in ("add", "add_relu") else None
        bmat = b if rcr else b.t().contiguous()
        y = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        p = lambda t: None if t is None else t.data_ptr()
        rc = L.dml_cuda_gemm(CODE[dt], 1 if rcr else 0, M, N, K, p(a), p(bmat), p(bb), p(d), p(y), EPI[epi], 0, WGMMA, stream())
        assert rc == 0, L.dml_cuda_last_error().decode()
        torch.cuda.synchronize()
        r = a.double() @ b.double().t()
        if bb is not None:
            r = r + bb.double()
        if d is not None:
            r = r + d.double()
        report(f"gemm {str(dt)[6:]} M={M} N={N} K={K} {'rcr' if rcr else 'rrr'} {epi} bias={int(bias)} a+{offset}",
               y, act[epi](r), dt)

    for dt in (torch.bfloat16, torch.float16):
        gemm(dt, 4096, 4096, 4096)
        gemm(dt, 700, 300, 520, epi="swish", bias=True)
        gemm(dt, 130, 256, 520, epi="add_relu", bias=True)
        gemm(dt, 1, 11008, 4096, epi="gelu", bias=True)
        gemm(dt, 100, 96, 64, rcr=False, bias=True)        # RRR: mma.sync fallback
        gemm(dt, 77, 50, 12, epi="tanh", bias=True)        # K % 8 != 0: mma.sync fallback
        gemm(dt, 64, 64, 64, offset=1)                     # misaligned a: mma.sync fallback
    gemm(torch.float32, 65, 33, 40, epi="relu", bias=True)  # float32: SIMT

    # bmm: [3, M, K] · [3 or 1, N, K]ᵀ (full batch, then b broadcast), RCR through wgmma.
    for dt in (torch.bfloat16, torch.float16):
        for nb in (3, 1):
            M, N, K = 200, 136, 96
            a = torch.randn(3, M, K, device="cuda").to(dt)
            b = (torch.randn(nb, N, K, device="cuda") / math.sqrt(K)).to(dt)
            y = torch.full((3, M, N), float("nan"), device="cuda", dtype=dt)
            arr = lambda *v: (i64 * len(v))(*v)
            rc = L.dml_cuda_bmm(CODE[dt], 1, 1, arr(3), arr(3), arr(nb), M, N, K, a.data_ptr(), b.data_ptr(), y.data_ptr(), 0,
                                WGMMA, stream())
            assert rc == 0, L.dml_cuda_last_error().decode()
            torch.cuda.synchronize()
            report(f"bmm {str(dt)[6:]} batch=3 b_batch={nb} M={M} N={N} K={K} rcr", y,
                   torch.matmul(a.double(), b.double().transpose(1, 2)), dt)
    print(f"[lib] {'ALL PASS' if fails == 0 else f'{fails} FAILED'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
