"""DinoML conv kernels vs torch.nn.functional.conv2d on ResNet-18's conv shapes.

Timing surface: the kernel call alone. DinoML: dml_cpu_conv2d (libdinoml_cpu_kernels.so via
ctypes) with weights packed once beforehand (as a compiled module does at init) and the fused
bias+relu epilogue; torch: F.conv2d + bias + relu_ in eval/no_grad (torch fuses nothing here
either way, its mkldnn path applies the bias inside). Both with 2 threads, same inputs;
median of repeats after a warm-up.

    DINOML_BUILD_DIR=build /usr/bin/python3 bench/ops/conv_bench.py [--batches 1 8] [--reps 20]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

# libgomp (shared by torch and the DinoML kernels) reads these when it loads: set them before
# importing torch.
if "--cpu-time" in sys.argv:
    os.environ["OMP_WAIT_POLICY"] = "passive"
os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "2"

import numpy as np  # noqa: E402
import torch  # noqa: E402

# name, C, O, H(=W), k, stride, pad, count in ResNet-18
RESNET18 = [
    ("conv1 7x7/2", 3, 64, 224, 7, 2, 3, 1),
    ("l1 3x3", 64, 64, 56, 3, 1, 1, 4),
    ("l2 3x3/2", 64, 128, 56, 3, 2, 1, 1),
    ("l2 3x3", 128, 128, 28, 3, 1, 1, 3),
    ("l2 ds 1x1/2", 64, 128, 56, 1, 2, 0, 1),
    ("l3 3x3/2", 128, 256, 28, 3, 2, 1, 1),
    ("l3 3x3", 256, 256, 14, 3, 1, 1, 3),
    ("l3 ds 1x1/2", 128, 256, 28, 1, 2, 0, 1),
    ("l4 3x3/2", 256, 512, 14, 3, 2, 1, 1),
    ("l4 3x3", 512, 512, 7, 3, 1, 1, 3),
    ("l4 ds 1x1/2", 256, 512, 14, 1, 2, 0, 1),
]


class Shape(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in
                ("N", "C", "H", "W", "O", "kh", "kw", "sh", "sw", "pt", "pl", "pb", "pr", "dh", "dw", "groups")]


def load_lib():
    build = os.environ.get("DINOML_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    lib = ctypes.CDLL(os.path.join(build, "libdinoml_cpu_kernels.so"))
    lib.dml_cpu_conv2d_packed_w_size.restype = ctypes.c_int64
    lib.dml_cpu_conv2d_packed_w_size.argtypes = [ctypes.POINTER(Shape)]
    lib.dml_cpu_conv2d_pack_w.argtypes = [ctypes.c_int, ctypes.POINTER(Shape), ctypes.c_void_p, ctypes.c_void_p]
    lib.dml_cpu_conv2d.argtypes = [ctypes.c_int, ctypes.POINTER(Shape)] + [ctypes.c_void_p] * 6 + [ctypes.c_int]
    lib.dml_cpu_last_error.restype = ctypes.c_char_p
    return lib


CPU_TIME = False
THREADS = 1


def median_ms(fn, reps):
    """Median over `reps` runs after one warm-up. With --cpu-time: process CPU time / threads,
    averaged over back-to-back runs of at least 0.4 s (the kernel accounts CPU time in scheduler
    ticks, so single short runs cannot be timed that way; OMP_WAIT_POLICY=passive keeps idle
    threads from burning CPU in barriers). A loaded shared machine inflates wall time with time
    spent descheduled, which CPU time excludes."""
    fn()
    if CPU_TIME:
        t0 = time.perf_counter()
        fn()
        n = max(3, int(0.4 / max(time.perf_counter() - t0, 1e-6)))
        c0 = time.process_time()
        for _ in range(n):
            fn()
        return (time.process_time() - c0) / THREADS / n * 1e3
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def bench_shape(lib, n, C, O, H, k, s, p, reps):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, C, H, H), dtype=np.float32)
    w = (rng.standard_normal((O, C, k, k), dtype=np.float32) * 0.1).astype(np.float32)
    b = rng.standard_normal(O, dtype=np.float32)
    Ho = (H + 2 * p - k) // s + 1
    y = np.empty((n, O, Ho, Ho), np.float32)
    shp = Shape(n, C, H, H, O, k, k, s, s, p, p, p, p, 1, 1, 1)
    size = lib.dml_cpu_conv2d_packed_w_size(ctypes.byref(shp))
    packed = np.empty(size // 4 + 16, np.float32)
    pk = ctypes.c_void_p((packed.ctypes.data + 63) // 64 * 64)
    assert lib.dml_cpu_conv2d_pack_w(0, ctypes.byref(shp), ptr(w), pk) == 0

    def run():
        st = lib.dml_cpu_conv2d(0, ctypes.byref(shp), ptr(x), ptr(w), pk, ptr(b), None, ptr(y), 1)
        if st:
            raise RuntimeError(lib.dml_cpu_last_error().decode())

    d_ms = median_ms(run, reps)
    xt, wt, bt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
    with torch.no_grad():
        want = torch.relu(torch.nn.functional.conv2d(xt, wt, bt, stride=s, padding=p))
        t_ms = median_ms(lambda: torch.relu_(torch.nn.functional.conv2d(xt, wt, bt, stride=s, padding=p)), reps)
    err = float(np.max(np.abs(y - want.numpy())))
    gflop = 2.0 * n * O * Ho * Ho * C * k * k / 1e9
    return d_ms, t_ms, gflop, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cpu-time", action="store_true", help="time with process CPU time / threads (loaded machine)")
    args = ap.parse_args()
    global CPU_TIME, THREADS
    CPU_TIME, THREADS = args.cpu_time, args.threads
    torch.set_num_threads(args.threads)
    lib = load_lib()
    print(f"torch {torch.__version__}, {args.threads} threads, {'mean CPU time / threads' if args.cpu_time else 'median wall time'}; DinoML dml_cpu_conv2d (prepacked weights, bias+relu fused)")
    for n in args.batches:
        tot_d = tot_t = 0.0
        print(f"\nbatch {n}\n{'shape':<14}{'C->O':>10}{'HxW':>6}{'DinoML ms':>11}{'GF/s':>7}{'torch ms':>10}{'GF/s':>7}"
              f"{'torch/dml':>10}{'max err':>9}")
        for name, C, O, H, k, s, p, cnt in RESNET18:
            reps = max(3, args.reps if n == 1 else args.reps // 3)
            d, t, gf, err = bench_shape(lib, n, C, O, H, k, s, p, reps)
            tot_d += d * cnt
            tot_t += t * cnt
            print(f"{name:<14}{f'{C}->{O}':>10}{H:>6}{d:>11.3f}{gf / d * 1e3:>7.0f}{t:>10.3f}{gf / t * 1e3:>7.0f}"
                  f"{t / d:>9.2f}x{err:>9.1e}")
        print(f"{'all convs of ResNet-18 (weighted by count)':<48}{tot_d:>8.2f} ms vs torch {tot_t:.2f} ms "
              f"-> {tot_t / tot_d:.2f}x")


if __name__ == "__main__":
    main()
