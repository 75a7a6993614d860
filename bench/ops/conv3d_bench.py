"""DinoML's conv3d kernel vs torch.nn.functional.conv3d on video-network shapes (a C3D / R3D-style
stem and 3×3×3 blocks, batch 1).

Timing surface: the kernel call alone. DinoML: dml_cpu_conv3d (libdinoml_cpu_kernels.so via
ctypes, fp32, bias in the GEMM epilogue); torch: F.conv3d with bias in no_grad. Both with the
same thread count (default 2), same inputs; median of repeats after a warm-up. The outputs are
compared too (max abs difference).

    DINOML_BUILD_DIR=build .venv/bin/python bench/ops/conv3d_bench.py [--reps 10] [--threads 2]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "2"

import numpy as np  # noqa: E402
import torch  # noqa: E402

# name, C, O, (D, H, W), kernel, stride, pad
SHAPES = [
    ("stem 3x7x7/(1,2,2)", 3, 64, (8, 112, 112), (3, 7, 7), (1, 2, 2), (1, 3, 3)),
    ("block 3x3x3 64", 64, 64, (8, 56, 56), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ("down 3x3x3/2 128", 64, 128, (8, 56, 56), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ("block 3x3x3 256", 256, 256, (2, 14, 14), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
]


class Shape3(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("N C D H W O kd kh kw sd sh sw pd0 ph0 pw0 pd1 ph1 pw1 dd dh dw groups").split()]


def median_ms(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    lib = ctypes.CDLL(os.path.join(os.environ.get("DINOML_BUILD_DIR", "build"), "libdinoml_cpu_kernels.so"))
    lib.dml_cpu_conv3d.argtypes = [ctypes.c_int, ctypes.POINTER(Shape3)] + [ctypes.c_void_p] * 4
    lib.dml_cpu_last_error.restype = ctypes.c_char_p
    rng = np.random.default_rng(0)
    print("| shape | DinoML ms | torch ms | torch / DinoML | max abs diff |")
    print("|---|---|---|---|---|")
    for name, C, O, (D, H, W), k, s, p in SHAPES:
        x = rng.standard_normal((1, C, D, H, W), dtype=np.float32)
        w = (rng.standard_normal((O, C, *k), dtype=np.float32) / np.sqrt(C * np.prod(k))).astype(np.float32)
        b = rng.standard_normal(O, dtype=np.float32)
        xt, wt, bt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
        with torch.no_grad():
            ref = torch.nn.functional.conv3d(xt, wt, bt, stride=s, padding=p).numpy()
        y = np.empty_like(ref)
        sh = Shape3(1, C, D, H, W, O, *k, *s, *p, *p, 1, 1, 1, 1)
        ptr = lambda v: v.ctypes.data_as(ctypes.c_void_p)  # noqa: E731

        def run_dml():
            if lib.dml_cpu_conv3d(0, ctypes.byref(sh), ptr(x), ptr(w), ptr(b), ptr(y)) != 0:
                raise RuntimeError(lib.dml_cpu_last_error().decode())

        def run_torch():
            with torch.no_grad():
                torch.nn.functional.conv3d(xt, wt, bt, stride=s, padding=p)

        td, tt = median_ms(run_dml, a.reps), median_ms(run_torch, a.reps)
        print(f"| {name}, {C}→{O} @ {D}×{H}×{W} | {td:.2f} | {tt:.2f} | {tt / td:.2f}× | {np.abs(y - ref).max():.1e} |")


if __name__ == "__main__":
    main()
