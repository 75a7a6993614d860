"""Device harness of the channels-last tensor-core conv (kernels/cuda/conv_nhwc.cu, pool_nhwc.cu).

    python3 bench/cuda/conv_nhwc_bench.py LIB.so --out DIR [--batch 32]

LIB.so: the harness library (`bench/cuda/device_run.sh conv` builds it and runs this) or an artifact's
libdinoml_cuda_kernels.so. Through ctypes on torch tensors:

* checks: every ResNet-50 conv shape (batch 32, 224x224) with each tile against torch's conv in
  float32 on the upcast operands (TF32 off), with bias / ReLU / residual epilogues, plus odd
  shapes (stride 2, padding, dilation, asymmetric pads, C and O off the tile, C % 8 != 0 stem,
  NCHW input / output / residual strides, fp16); outputs poisoned with NaN before every run;
  max/avg pool and global average pooling on NHWC tensors.
* timings (median over replays of a CUDA graph of 20 calls: kernel time without launch
  overhead): per ResNet-50 conv shape every tile (mma.sync, sm_90a wgmma, the GEMM routes of
  plain 1x1 convs) and torch.nn.functional.conv2d channels-last (cuDNN) with and without the
  epilogue ops; summed over the network's layer counts.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "dinoml", "tools"))
import cuda_timing  # noqa: E402  (python/dinoml/tools: the timing every GPU tool shares)
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

DT = {torch.float16: 1, torch.bfloat16: 2}
# mma.sync tiles (conv_nhwc.cu), the sm_90a wgmma tiles (conv_nhwc_wgmma.cu), the GEMM routes of
# plain 1x1 convs (dml_cuda_gemm: cuBLASLt / own TMA + wgmma GEMM) and the mma kernel's own rule.
TILES = {"128x128": 1, "128x64": 2, "64x64": 3, "128x128x64": 4, "128x64x64": 5, "wg128x128": 6, "wg128x64": 7,
         "wg64x64": 8, "gemm_lt": 9, "gemm_wg": 10, "mma_auto": 11}
GEMM_TILES = ("gemm_lt", "gemm_wg")  # only where the conv is a plain GEMM (else they run the AUTO rule)


class Shape(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in "N C H W O kh kw sh sw pt pl pb pr dh dw groups".split()]


class PoolShape(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in "N C H W Ho Wo kh kw sh sw pt pl pb pr dh dw count_include_pad".split()]


def I64x4(t):
    return (ctypes.c_int64 * 4)(*t)


def p(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else None


class Lib:
    def __init__(self, path):
        self.l = ctypes.CDLL(path)
        self.l.dml_cuda_last_error.restype = ctypes.c_char_p

    @property
    def stream(self):  # the current stream at call time (graph capture runs on a side stream)
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def check(self, st, what):
        if st != 0:
            raise RuntimeError(f"{what}: {self.l.dml_cuda_last_error().decode()}")

    def pack(self, w):
        O, C, kh, kw = w.shape
        wp = torch.empty(O * kh * kw * C, dtype=w.dtype, device="cuda")
        self.check(self.l.dml_cuda_conv2d_pack_ohwi(DT[w.dtype], ctypes.c_int64(O), ctypes.c_int64(C), ctypes.c_int64(kh),
                                                   ctypes.c_int64(kw), p(w), p(wp), self.stream), "pack")
        return wp

    def conv_nhwc(self, x, wp, w_shape, y, stride, pad, dil, bias=None, res=None, relu=0, tile=0):
        O, C, kh, kw = w_shape
        pt, pl, pb, pr = pad
        s = Shape(x.shape[0], C, x.shape[2], x.shape[3], O, kh, kw, stride[0], stride[1], pt, pl, pb, pr, dil[0], dil[1], 1)
        st = self.l.dml_cuda_conv2d_nhwc(DT[x.dtype], ctypes.byref(s), I64x4(x.stride()), p(x), p(wp), p(bias),
                                         I64x4(res.stride()) if res is not None else None, p(res), I64x4(y.stride()), p(y),
                                         relu, tile, self.stream)
        self.check(st, "conv_nhwc")

    def conv_old(self, x, w, y, stride, pad, bias=None, res=None, relu=0):
        O, C, kh, kw = w.shape
        s = Shape(x.shape[0], C, x.shape[2], x.shape[3], O, kh, kw, stride, stride, pad, pad, pad, pad, 1, 1, 1)
        self.check(self.l.dml_cuda_conv2d(DT[x.dtype], ctypes.byref(s), p(x), p(w), p(bias), p(res), p(y), relu, 2, self.stream),
                   "conv_old")


def ref_conv(x, w, stride, pad, dil, bias=None, res=None, relu=False):
    pt, pl, pb, pr = pad
    xf = F.pad(x.float(), (pl, pr, pt, pb))
    y = F.conv2d(xf, w.float(), bias.float() if bias is not None else None, stride=stride, dilation=dil)
    if res is not None:
        y = y + res.float()
    return torch.relu(y) if relu else y


def rel(a, b):
    a, b = a.double(), b.double()
    if not torch.isfinite(a).all():
        return float("inf")
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def out_hw(H, W, k, stride, pad, dil):
    pt, pl, pb, pr = pad
    return (H + pt + pb - dil[0] * (k[0] - 1) - 1) // stride[0] + 1, (W + pl + pr - dil[1] * (k[1] - 1) - 1) // stride[1] + 1


def time_ms(fn, reps=30, warm=5):
    return statistics.median(cuda_timing.event_samples(torch, fn, reps, 1, warm))


def graph_ms(fn, calls=20, reps=7):
    """Median ms per call over replays of a CUDA graph of `calls` back-to-back calls: kernel time
    without the Python / launch overhead (the artifact replays one graph too)."""
    return statistics.median(cuda_timing.graph_samples(torch, [fn], calls, reps))


# ResNet-50 convs: (name, C, O, H_in, k, stride, pad, count, epilogue) at batch 32, 224x224.
def resnet50_convs():
    L = [("stem7x7s2", 3, 64, 224, 7, 2, 3, 1, "relu")]
    inpl = 64
    for li, (n, hw) in enumerate(zip((3, 4, 6, 3), (56, 56, 28, 14))):
        planes = 64 * 2 ** li
        s = 2 if li > 0 else 1
        ho = hw // s
        L.append((f"l{li+1}.b0.c1 1x1 {inpl}->{planes}", inpl, planes, hw, 1, 1, 0, 1, "relu"))
        L.append((f"l{li+1}.b0.c2 3x3 s{s} {planes}", planes, planes, hw, 3, s, 1, 1, "relu"))
        L.append((f"l{li+1}.b0.c3 1x1 {planes}->{planes*4}", planes, planes * 4, ho, 1, 1, 0, 1, "add_relu"))
        L.append((f"l{li+1}.ds 1x1 s{s} {inpl}->{planes*4}", inpl, planes * 4, hw, 1, s, 0, 1, "bias"))
        L.append((f"l{li+1}.c1 1x1 {planes*4}->{planes}", planes * 4, planes, ho, 1, 1, 0, n - 1, "relu"))
        L.append((f"l{li+1}.c2 3x3 {planes}", planes, planes, ho, 3, 1, 1, n - 1, "relu"))
        L.append((f"l{li+1}.c3 1x1 {planes}->{planes*4}", planes, planes * 4, ho, 1, 1, 0, n - 1, "add_relu"))
        inpl = planes * 4
    return L


def check_case(lib, res_log, name, N, C, O, H, W, k, stride, pad, dil, dtype, epi, x_cl=True, y_cl=True, tiles=("auto",)):
    g = torch.Generator(device="cuda").manual_seed(hash(name) & 0xFFFF)
    x = torch.randn(N, C, H, W, device="cuda", generator=g).to(dtype)
    w = (torch.randn(O, C, k[0], k[1], device="cuda", generator=g) / (C * k[0] * k[1]) ** 0.5).to(dtype)
    bias = torch.randn(O, device="cuda", generator=g).to(dtype) if epi != "none" else None
    Ho, Wo = out_hw(H, W, k, stride, pad, dil)
    res = torch.randn(N, O, Ho, Wo, device="cuda", generator=g).to(dtype) if epi == "add_relu" else None
    relu = epi in ("relu", "add_relu")
    ref = ref_conv(x, w, stride, pad, dil, bias, res, relu)
    xa = x.contiguous(memory_format=torch.channels_last) if x_cl else x.contiguous()
    ra = None if res is None else (res.contiguous(memory_format=torch.channels_last) if y_cl else res.contiguous())
    wp = lib.pack(w)
    worst = 0.0
    for t in tiles:
        y = torch.full((N, O, Ho, Wo), float("nan"), device="cuda", dtype=dtype)
        if y_cl:
            y = y.contiguous(memory_format=torch.channels_last)
        lib.conv_nhwc(xa, wp, w.shape, y, stride, pad, dil, bias, ra, int(relu), 0 if t == "auto" else TILES[t])
        torch.cuda.synchronize()
        e = rel(y, ref)
        worst = max(worst, e)
    ok = worst < (2e-2 if dtype == torch.bfloat16 else 4e-3)
    res_log.append({"case": name, "rel_err": worst, "ok": ok, "tiles": list(tiles)})
    print(f"  {'PASS' if ok else 'FAIL'} {name}: rel err {worst:.2e} (tiles {','.join(tiles)})", flush=True)
    return ok


def check_alias(lib, res_log):
    """y aliasing res (the memory plan may give a residual conv's output the residual's storage),
    on every tile: 1x1 (GEMM routes too) and 3x3."""
    ok = True
    for (k, pd) in ((1, 0), (3, 1)):
        g = torch.Generator(device="cuda").manual_seed(77 + k)
        N, C, O, H = 4, 64, 128, 14
        x = torch.randn(N, C, H, H, device="cuda", generator=g).to(torch.bfloat16)
        w = (torch.randn(O, C, k, k, device="cuda", generator=g) / (C * k * k) ** 0.5).to(torch.bfloat16)
        bias = torch.randn(O, device="cuda", generator=g).to(torch.bfloat16)
        res = torch.randn(N, O, H, H, device="cuda", generator=g).to(torch.bfloat16)
        ref = ref_conv(x, w, (1, 1), (pd,) * 4, (1, 1), bias, res, True)
        xa = x.contiguous(memory_format=torch.channels_last)
        wp = lib.pack(w)
        worst = 0.0
        for t in ("auto",) + tuple(TILES):
            yr = res.contiguous(memory_format=torch.channels_last).clone()
            lib.conv_nhwc(xa, wp, w.shape, yr, (1, 1), (pd,) * 4, (1, 1), bias, yr, 1, 0 if t == "auto" else TILES[t])
            torch.cuda.synchronize()
            worst = max(worst, rel(yr, ref))
        good = worst < 2e-2
        ok &= good
        res_log.append({"case": f"y aliases res {k}x{k}", "rel_err": worst, "ok": good})
        print(f"  {'PASS' if good else 'FAIL'} y aliases res, {k}x{k} C64 O128 (all tiles): rel err {worst:.2e}", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--out", default=".")
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    lib = Lib(a.lib)
    log = {"checks": [], "layers": [], "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    bf = torch.bfloat16
    ok = True
    print("== checks (odd shapes)", flush=True)
    allt = tuple(TILES)
    odd = [
        ("C24 O40 13x15 3x3 s2 p1 bias_relu", 3, 24, 40, 13, 15, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), bf, "relu", True, True),
        ("C16 O48 3x3 s1 asym pad (1,0,0,2) dil 2 add_relu", 2, 16, 48, 17, 11, (3, 3), (1, 1), (1, 0, 0, 2), (2, 2), bf, "add_relu", True, True),
        ("stem C3 O64 7x7 s2 p3 NCHW in -> NHWC out", 2, 3, 64, 40, 36, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), bf, "relu", False, True),
        ("C32 O24 3x3 p1 NCHW in/out/res (gather+scalar)", 2, 32, 24, 9, 10, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), bf, "add_relu", False, False),
        ("C64 O129 1x1 s2 (odd O, scalar epilogue)", 3, 64, 129, 14, 14, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), bf, "relu", True, True),
        ("C64 O256 1x1 NHWC in -> NCHW out", 2, 64, 256, 7, 7, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), bf, "bias", True, False),
        ("C40 O72 5x3 s(2,1) no bias fp16", 2, 40, 72, 12, 9, (5, 3), (2, 1), (2, 1, 2, 1), (1, 1), torch.float16, "none", True, True),
        ("C256 O64 3x3 p1 add_relu fp16", 4, 256, 64, 14, 14, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), torch.float16, "add_relu", True, True),
        ("C8 O16 N1 1x1 1x1 image", 1, 8, 16, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), bf, "relu", True, True),
        ("C192 O200 1x1 add_relu (plain GEMM, O off the tiles)", 3, 192, 200, 9, 11, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), bf, "add_relu", True, True),
        ("C520 O136 3x3 p1 fp16 (channel block tail)", 2, 520, 136, 7, 9, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), torch.float16, "relu", True, True),
        ("C64 O64 1x1 no bias fp16 plain GEMM", 2, 64, 64, 5, 6, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), torch.float16, "none", True, True),
    ]
    for (name, N, C, O, H, W, k, s, pd, d, dt, epi, xcl, ycl) in odd:
        ok &= check_case(lib, log["checks"], name, N, C, O, H, W, k, s, pd, d, dt, epi, xcl, ycl, tiles=allt)
    ok &= check_alias(lib, log["checks"])

    # pooling on NHWC
    x = torch.randn(a.batch, 64, 112, 112, device="cuda").to(bf).contiguous(memory_format=torch.channels_last)
    for is_max in (1, 0):
        ref = (F.max_pool2d if is_max else lambda t, k, s, pd: F.avg_pool2d(t, k, s, pd, count_include_pad=True))(x.float(), 3, 2, 1)
        y = torch.full(ref.shape, float("nan"), device="cuda", dtype=bf).contiguous(memory_format=torch.channels_last)
        ps = PoolShape(a.batch, 64, 112, 112, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1)
        lib.check(lib.l.dml_cuda_pool2d_strided(2, is_max, ctypes.byref(ps), I64x4(x.stride()), p(x), I64x4(y.stride()), p(y), lib.stream), "pool")
        torch.cuda.synchronize()
        e = rel(y, ref)
        good = e < 1e-2
        ok &= good
        tms = time_ms(lambda: lib.l.dml_cuda_pool2d_strided(2, is_max, ctypes.byref(ps), I64x4(x.stride()), p(x), I64x4(y.stride()), p(y), lib.stream))
        ttorch = time_ms(lambda: F.max_pool2d(x, 3, 2, 1)) if is_max else float("nan")
        log["checks"].append({"case": f"{'max' if is_max else 'avg'}_pool 3x3 s2 NHWC", "rel_err": e, "ok": good, "ms": tms, "torch_ms": ttorch})
        print(f"  {'PASS' if good else 'FAIL'} {'max' if is_max else 'avg'}_pool2d NHWC: rel err {e:.2e}, {tms:.3f} ms (torch {ttorch:.3f} ms)", flush=True)
    # the generic strided path: NCHW input -> NHWC output, odd channel count
    xg = torch.randn(3, 13, 17, 19, device="cuda").to(bf)
    for is_max in (1, 0):
        ref = (F.max_pool2d(xg.float(), 3, 2, 1) if is_max else F.avg_pool2d(xg.float(), 3, 2, 1, count_include_pad=False))
        y = torch.full(ref.shape, float("nan"), device="cuda", dtype=bf).contiguous(memory_format=torch.channels_last)
        ps = PoolShape(3, 13, 17, 19, ref.shape[2], ref.shape[3], 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0)
        lib.check(lib.l.dml_cuda_pool2d_strided(2, is_max, ctypes.byref(ps), I64x4(xg.stride()), p(xg), I64x4(y.stride()), p(y), lib.stream), "pool")
        torch.cuda.synchronize()
        e = rel(y, ref)
        ok &= e < 1e-2
        log["checks"].append({"case": f"{'max' if is_max else 'avg'}_pool NCHW->NHWC C13", "rel_err": e, "ok": e < 1e-2})
        print(f"  {'PASS' if e < 1e-2 else 'FAIL'} {'max' if is_max else 'avg'}_pool2d NCHW->NHWC C=13: rel err {e:.2e}", flush=True)
    x = torch.randn(a.batch, 2048, 7, 7, device="cuda").to(bf).contiguous(memory_format=torch.channels_last)
    y = torch.full((a.batch, 2048), float("nan"), device="cuda", dtype=bf)
    lib.check(lib.l.dml_cuda_global_avg_pool2d_nhwc(2, ctypes.c_int64(a.batch), ctypes.c_int64(2048), ctypes.c_int64(49), p(x), p(y), lib.stream), "gap")
    torch.cuda.synchronize()
    e = rel(y, x.float().mean((2, 3)))
    ok &= e < 1e-2
    log["checks"].append({"case": "global_avg_pool NHWC", "rel_err": e, "ok": e < 1e-2})
    print(f"  {'PASS' if e < 1e-2 else 'FAIL'} global_avg_pool2d NHWC: rel err {e:.2e}", flush=True)

    print("== ResNet-50 layers (batch %d, bf16): check every tile; CUDA-graph kernel time per tile and of torch channels-last (cuDNN)" % a.batch, flush=True)
    tot = {"auto": 0.0, "best": 0.0, "best_mma": 0.0, "torch": 0.0, "torch_conv_only": 0.0}
    tot.update({t: 0.0 for t in TILES})
    B = a.batch
    for (name, C, O, H, k, s, pd, cnt, epi) in resnet50_convs():
        ok &= check_case(lib, log["checks"], "r50 " + name, B, C, O, H, H, (k, k), (s, s), (pd,) * 4, (1, 1), bf, epi, True, True,
                         tiles=("auto",) + allt)
        x = torch.randn(B, C, H, H, device="cuda").to(bf)
        w = (torch.randn(O, C, k, k, device="cuda") / (C * k * k) ** 0.5).to(bf)
        bias = torch.randn(O, device="cuda").to(bf)
        Ho = (H + 2 * pd - k) // s + 1
        relu = int(epi != "bias")
        res = torch.randn(B, O, Ho, Ho, device="cuda").to(bf) if epi == "add_relu" else None
        xc = x.contiguous(memory_format=torch.channels_last)
        rc = res.contiguous(memory_format=torch.channels_last) if res is not None else None
        yc = torch.empty(B, O, Ho, Ho, device="cuda", dtype=bf).contiguous(memory_format=torch.channels_last)
        wp = lib.pack(w)
        wc = w.contiguous(memory_format=torch.channels_last)
        row = {"layer": name, "count": cnt, "gflop": 2.0 * B * Ho * Ho * O * C * k * k / 1e9}
        plain = k == 1 and s == 1
        for t, tv in [("auto", 0)] + list(TILES.items()):
            if t in GEMM_TILES and not plain:
                row[t] = float("nan")
                continue
            row[t] = graph_ms(lambda: lib.conv_nhwc(xc, wp, w.shape, yc, (s, s), (pd,) * 4, (1, 1), bias, rc, relu, tv))
        if epi == "add_relu":
            tfn = lambda: torch.relu_(F.conv2d(xc, wc, bias, s, pd).add_(rc))  # noqa: E731
        elif relu:
            tfn = lambda: torch.relu_(F.conv2d(xc, wc, bias, s, pd))  # noqa: E731
        else:
            tfn = lambda: F.conv2d(xc, wc, bias, s, pd)  # noqa: E731
        row["torch"] = graph_ms(tfn)
        row["torch_conv_only"] = graph_ms(lambda: F.conv2d(xc, wc, None, s, pd))
        cands = [t for t in TILES if row[t] == row[t]]
        row["best_tile"] = min(cands, key=lambda t: row[t])
        row["best"] = row[row["best_tile"]]
        row["best_mma"] = min(row[t] for t in ("128x128", "128x64", "64x64", "128x128x64", "128x64x64"))
        for key in tot:
            if row[key] == row[key]:
                tot[key] += cnt * row[key]
        log["layers"].append(row)
        tf = row["gflop"] / row["best"]
        print(f"  {name:30s} x{cnt}: auto {row['auto']:.4f} | " + " ".join(f"{t} {row[t]:.4f}" for t in TILES if row[t] == row[t]) +
              f" | torch {row['torch']:.4f} (conv {row['torch_conv_only']:.4f}) ms; best {row['best_tile']} {tf:.0f} TFLOP/s"
              f" (auto {row['gflop'] / row['auto']:.0f})", flush=True)
    log["totals_ms"] = tot
    log["all_ok"] = bool(ok)
    with open(os.path.join(a.out, "conv_nhwc_bench.json"), "w") as f:
        json.dump(log, f, indent=1)
    print("== summary (sum over ResNet-50's 53 convs, batch %d bf16, ms)" % B)
    print("   auto %.3f | best tile per layer %.3f | best mma.sync tile %.3f | mma auto rule %.3f | torch CL conv only (cuDNN) %.3f, + epilogue ops %.3f" %
          (tot["auto"], tot["best"], tot["best_mma"], tot["mma_auto"], tot["torch_conv_only"], tot["torch"]))
    print("   checks:", "ALL PASS" if ok else "FAILURES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
