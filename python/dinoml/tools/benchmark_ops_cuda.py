"""`dinoml benchmark-ops cuda [--only OP ...] [--jobs N]` and `dinoml benchmark-torch-ops --device cuda`.

Each op runs over a shape sweep as a one-op DinoML CUDA artifact (static shapes): the graphs are
written as IR JSON (ir_json.py), compiled by the `dinoml` binary that started this tool, `--jobs`
at a time (nvcc dominates: one compile per artifact), then loaded through the C ABI's ctypes
binding (dml_ctypes.py) and timed on the GPU next to PyTorch's own op on the same tensors, in this
one process, with CUDA events on PyTorch's current stream (the session runs on it too). Inputs and
outputs are torch CUDA tensors passed as device pointers: nothing is copied through the host.

Timing: after warm-up (the module captures its CUDA graph on the second run of a shape, then
replays it), `--repeats` samples of `--inner` back-to-back calls each, between two events; the
median sample / inner is the time per call, and its 95 % interval over the samples is printed too.
A ratio is PyTorch time / DinoML time: > 1 means DinoML is faster. Every case is first checked
against PyTorch's output (max |diff| / max |ref|); a case that does not match is reported as such and
its ratio is not counted.

This file runs without DinoML's compiled Python extension (the GPU machine's Python may not be the
one the extension was built for): the C++ `dinoml` binary runs it as a script, with DINOML_EXE set
to itself. `--plot FILE.png` draws the ratios (needs matplotlib), `--json FILE` keeps the numbers.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dml_ctypes  # noqa: E402
from cuda_timing import event_samples, median_ci95  # noqa: E402
from ir_json import Graph  # noqa: E402

DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16", "float32": "float32",
          "fp32": "float32"}
TOL = {"bfloat16": 3e-2, "float16": 1e-2, "float32": 5e-3}  # float32: TF32 GEMMs unless --no-tf32


def _attr_ints(v):
    return {"ints": list(v)}


def _gemm_flops(s):
    M, N, K = s
    return 2.0 * M * N * K


# The sweep: op -> shapes, input shapes, the node's attrs, PyTorch's form, and a work measure
# (flops for compute-bound ops, bytes moved for the memory-bound ones) for the GFLOP/s / GB/s column.
# GEMM shapes are those of a 7B-class decoder (K/N of 4096 / 11008 / 14336, M from decode to prefill)
# plus the issue's square sizes; attention the issue's shapes and GPT-2-medium's; conv ResNet-50's.
def sweep(quick: bool):
    gemm = [(1, 4096, 4096), (16, 4096, 4096), (1, 11008, 4096), (16, 14336, 4096), (128, 4096, 4096),
            (512, 11008, 4096), (4096, 4096, 4096), (4096, 14336, 4096), (4096, 4096, 11008), (8192, 8192, 8192)]
    if quick:
        gemm = [(1, 4096, 4096), (16, 4096, 4096), (4096, 4096, 4096)]
    gelu = [(8192, 4096, 1024), (4096, 4096, 1024), (16, 16384, 4096)]
    rows = [(8192, 1024), (4096, 4096), (16384, 4096)] if not quick else [(8192, 1024)]
    attn = [(8, 32, 1024, 128, False), (8, 32, 1024, 128, True), (8, 32, 4096, 128, False), (8, 32, 4096, 128, True),
            (8, 16, 1024, 64, True)]
    if quick:
        attn = attn[:2]
    conv = [(32, 64, 56, 56, 64, 3, 1), (32, 128, 28, 28, 128, 3, 1), (32, 256, 14, 14, 256, 3, 1),
            (32, 512, 7, 7, 512, 3, 1), (32, 256, 56, 56, 64, 1, 1), (32, 1024, 14, 14, 256, 1, 1)]
    if quick:
        conv = conv[:2]

    def el_bytes(s, n_in=1, n_out=1):
        return float(math.prod(s)) * (n_in + n_out)

    return [
        dict(op="gemm_rcr", shapes=gemm, inputs=lambda s: {"a": (s[0], s[2]), "w": (s[1], s[2])},
             out=lambda s: (s[0], s[1]), torch=lambda T, x, s: T.nn.functional.linear(x["a"], x["w"]), work=_gemm_flops,
             unit="TFLOP/s"),
        dict(op="gemm_rcr_bias_gelu", shapes=gelu, inputs=lambda s: {"a": (s[0], s[2]), "w": (s[1], s[2]), "bias": (s[1],)},
             out=lambda s: (s[0], s[1]),
             torch=lambda T, x, s: T.nn.functional.gelu(T.nn.functional.linear(x["a"], x["w"], x["bias"])),
             work=_gemm_flops, unit="TFLOP/s"),
        dict(op="gemm_rcr_bias_fast_gelu", shapes=gelu,
             inputs=lambda s: {"a": (s[0], s[2]), "w": (s[1], s[2]), "bias": (s[1],)}, out=lambda s: (s[0], s[1]),
             torch=lambda T, x, s: T.nn.functional.gelu(T.nn.functional.linear(x["a"], x["w"], x["bias"]),
                                                        approximate="tanh"),
             work=_gemm_flops, unit="TFLOP/s"),
        dict(op="bmm_rrr", shapes=[(256, 1024, 64, 1024), (128, 512, 128, 512)],
             inputs=lambda s: {"a": (s[0], s[1], s[2]), "b": (s[0], s[2], s[3])}, out=lambda s: (s[0], s[1], s[3]),
             torch=lambda T, x, s: T.bmm(x["a"], x["b"]), work=lambda s: 2.0 * s[0] * s[1] * s[2] * s[3],
             unit="TFLOP/s"),
        dict(op="softmax", shapes=rows, inputs=lambda s: {"x": s}, out=lambda s: s, attrs=lambda s: {"axis": {"int": -1}},
             torch=lambda T, x, s: T.softmax(x["x"], dim=-1), work=el_bytes, unit="GB/s"),
        dict(op="layer_norm", shapes=rows, inputs=lambda s: {"x": s, "gamma": (s[1],), "beta": (s[1],)}, out=lambda s: s,
             torch=lambda T, x, s: T.nn.functional.layer_norm(x["x"], (s[1],), x["gamma"], x["beta"]),
             work=el_bytes, unit="GB/s"),
        dict(op="rms_norm", shapes=rows, inputs=lambda s: {"x": s, "weight": (s[1],)}, out=lambda s: s, attrs=lambda s: {"eps": {"float": 1e-6}},
             torch=lambda T, x, s: T.nn.functional.rms_norm(x["x"], (s[1],), x["weight"], eps=1e-6),
             work=el_bytes, unit="GB/s"),
        dict(op="gelu", shapes=rows, inputs=lambda s: {"x": s}, out=lambda s: s, torch=lambda T, x, s: T.nn.functional.gelu(x["x"]),
             work=el_bytes, unit="GB/s"),
        dict(op="add", shapes=rows, inputs=lambda s: {"x": s, "z": s}, out=lambda s: s, torch=lambda T, x, s: x["x"] + x["z"],
             work=lambda s: el_bytes(s, 2, 1), unit="GB/s"),
        dict(op="reduce_sum", shapes=rows, inputs=lambda s: {"x": s}, out=lambda s: s[:-1], attrs=lambda s: {"axes": _attr_ints([-1])},
             torch=lambda T, x, s: T.sum(x["x"], dim=-1), work=lambda s: el_bytes(s, 1, 0), unit="GB/s"),
        dict(op="scaled_dot_product_attention", shapes=attn, inputs=lambda s: {n: s[:4] for n in "qkv"}, out=lambda s: s[:4],
             attrs=lambda s: {"causal": {"bool": bool(s[4])}},
             torch=lambda T, x, s: T.nn.functional.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=bool(s[4])),
             work=lambda s: 4.0 * s[0] * s[1] * s[2] * s[2] * s[3] / (2 if s[4] else 1), unit="TFLOP/s"),
        dict(op="conv2d_bias_relu", shapes=conv, inputs=lambda s: {"x": (s[0], s[1], s[2], s[3])},
             out=lambda s: (s[0], s[4], (s[2] + 2 * (s[5] // 2) - s[5]) // s[6] + 1, (s[3] + 2 * (s[5] // 2) - s[5]) // s[6] + 1),
             consts=lambda s: {"w": (s[4], s[1], s[5], s[5]), "b": (s[4],)},
             attrs=lambda s: {"stride": _attr_ints([s[6], s[6]]), "padding": _attr_ints([s[5] // 2] * 4)},
             torch=lambda T, x, s: T.relu(T.nn.functional.conv2d(x["x"], x["w"], x["b"], stride=s[6], padding=s[5] // 2)),
             work=lambda s: 2.0 * math.prod((s[0], s[4], s[2] // s[6], s[3] // s[6], s[1], s[5], s[5])), unit="TFLOP/s"),
    ]


def shape_label(s):
    return "x".join(str(int(v)) for v in s)


class Case:
    def __init__(self, spec, shape, dtype, root):
        self.spec, self.shape, self.dtype = spec, shape, dtype
        self.name = f"{spec['op']}_{shape_label(shape)}"
        self.dir = os.path.join(root, self.name)
        self.graph_dir = os.path.join(self.dir, "graph")
        self.art = os.path.join(self.dir, "artifact")
        self.compile_s = None
        self.error = None
        self.consts = {}

    def tensors(self, T, device, seed):
        """Deterministic inputs and constants (scaled so outputs stay in a useful range), drawn on
        the GPU (the large attention inputs would take seconds on the host)."""
        gen_dev = "cuda" if T.cuda.is_available() else "cpu"  # --compile-only runs without a GPU
        gen = T.Generator(device=gen_dev).manual_seed(seed)
        tdt = getattr(T, self.dtype)
        out = {}
        for n, shp in list(self.spec["inputs"](self.shape).items()) + list(self.spec.get("consts", lambda s: {})(self.shape).items()):
            x = T.randn(*shp, generator=gen, device=gen_dev)
            if n == "w":
                x = x / math.sqrt(math.prod(shp[1:]))  # fan-in scale: GEMM / conv outputs ~ N(0, 1)
            if n in ("gamma", "weight"):
                x = 1.0 + 0.1 * x
            if n == "beta" or (n in ("b", "bias") and len(shp) == 1):
                x = 0.1 * x
            out[n] = x.to(tdt).to(device).contiguous()
        return out

    def write_graph(self, T):
        g = Graph(self.name, [])
        ins = self.spec["inputs"](self.shape)
        consts = self.spec.get("consts", lambda s: {})(self.shape)
        vals = self.tensors(T, "cpu", seed=1) if consts else {}
        for n, shp in ins.items():
            g.tensor(n, self.dtype, list(shp), "input")
        for n, shp in consts.items():
            g.const(n, vals[n].view(T.int16 if self.dtype != "float32" else T.int32).numpy().tobytes(), self.dtype,
                    list(shp))
        self.out_shape = list(self.spec["out"](self.shape))
        g.tensor("t", self.dtype, self.out_shape, "intermediate")
        attrs = self.spec.get("attrs", lambda s: {})(self.shape)
        g.node(self.spec["op"], list(ins) + list(consts), ["t"], attrs)
        g.output("t", "y")
        g.save(self.graph_dir)

    def compile(self, exe, arch, extra):
        t0 = time.time()
        p = subprocess.run([exe, "compile", os.path.join(self.graph_dir, "graph.dinoir.json"), "--target", "cuda",
                            "--arch", arch, "-o", self.art, *extra], capture_output=True, text=True)
        self.compile_s = time.time() - t0
        if p.returncode != 0:
            self.error = "compile failed: " + (p.stderr or p.stdout).strip().splitlines()[-1][:300]
        return self


def measure(T, case, repeats, inner):
    mod = dml_ctypes.Module(case.art)
    sess = mod.session()
    sess.set_stream(T.cuda.current_stream().cuda_stream)
    x = case.tensors(T, "cuda", seed=1)
    ins = {n: x[n] for n in case.spec["inputs"](case.shape)}
    y = T.full(case.out_shape, float("nan"), device="cuda", dtype=getattr(T, case.dtype))
    ci, co = sess.prepare(ins, {"y": y})
    sess.run_prepared(ci, co)
    T.cuda.synchronize()
    # float32 reference (a float64 one would materialise attention's scores: 34 GB at seq 4096)
    ref = case.spec["torch"](T, {k: v.float() for k, v in x.items()}, case.shape).float()
    err = ((y.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
    ok = bool(err <= TOL[case.dtype] and T.isfinite(y).all().item())
    dml_ms, dml_ci = median_ci95(event_samples(T, lambda: sess.run_prepared(ci, co), repeats, inner))
    torch_ms, torch_ci = median_ci95(event_samples(T, lambda: case.spec["torch"](T, x, case.shape), repeats, inner))
    sess = mod = None  # free the session (its device arena) before the next case
    winners = []
    plan = os.path.join(case.art, "execution_plan.json")
    if os.path.exists(plan):  # --profile: the measured choice per tunable node
        with open(plan) as f:
            winners = [b["winner"] for n in json.load(f).get("nodes", []) for b in n.get("buckets", [])]
    return dict(winners=winners, op=case.spec["op"], shape=list(case.shape), dtype=case.dtype, ok=ok, rel_err=err, dinoml_ms=dml_ms,
                dinoml_ci_ms=dml_ci, torch_ms=torch_ms, torch_ci_ms=torch_ci, ratio=torch_ms / dml_ms,
                work=case.spec["work"](case.shape), unit=case.spec["unit"], compile_s=case.compile_s)


def rate(work, ms, unit):
    return work / (ms * 1e-3) / (1e12 if unit.startswith("T") else 1e9)


def main(argv=None, torch_only=False):
    ap = argparse.ArgumentParser(prog="dinoml benchmark-ops cuda" if not torch_only else "dinoml benchmark-torch-ops",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("target", nargs="?", default="cuda", help="cuda (this tool); cpu runs the CPU sweep")
    ap.add_argument("--device", default=None, help="benchmark-torch-ops: cuda")
    ap.add_argument("--only", nargs="+", default=None, metavar="OP", help="ops to run (default: all)")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2, help="artifacts compiled at once")
    ap.add_argument("--arch", default="sm_90a", help="CUDA arch the artifacts are built for (default sm_90a)")
    ap.add_argument("--dtype", default="bfloat16", help="bfloat16 (default), float16 or float32")
    ap.add_argument("--profile", action="store_true",
                    help="compile with --profile (each artifact keeps its measured kernel choice); compiles then run "
                         "one at a time, so no other profile disturbs the GPU timings")
    ap.add_argument("--no-tf32", action="store_true", help="float32 GEMMs without TF32 (passed to the compiler)")
    ap.add_argument("--quick", action="store_true", help="a few shapes per op")
    ap.add_argument("--repeats", type=int, default=15, help="timed samples per case (default 15)")
    ap.add_argument("--inner", type=int, default=10, help="calls per timed sample (default 10)")
    ap.add_argument("--compile-only", action="store_true",
                    help="write and compile every artifact, time nothing (no GPU needed: a CI check of the sweep)")
    ap.add_argument("--work", default=None, help="keep graphs and artifacts here (default: a temporary folder)")
    ap.add_argument("--json", default=None, help="write the results to this file")
    ap.add_argument("--plot", default=None, help="write a PNG of the ratios (needs matplotlib)")
    a = ap.parse_args(argv)
    dtype = DTYPES.get(a.dtype)
    if dtype is None:
        ap.error(f"--dtype {a.dtype}: expected one of bfloat16, float16, float32")
    exe = os.environ.get("DINOML_EXE") or shutil.which("dinoml")
    if not exe or not os.path.exists(exe):
        ap.error("cannot find the dinoml compiler: run this through `dinoml benchmark-ops cuda` (or set DINOML_EXE)")
    specs = sweep(a.quick)
    known = [s["op"] for s in specs]
    if a.only:
        bad = [o for o in a.only if o not in known]
        if bad:
            ap.error(f"unknown op(s) {', '.join(bad)}; known: {', '.join(known)}")
        specs = [s for s in specs if s["op"] in a.only]
    try:
        import torch as T
    except ImportError:
        print("dinoml benchmark-ops cuda: error: PyTorch is needed (the peer, and the GPU tensors the artifacts run on)",
              file=sys.stderr)
        return 2
    if not T.cuda.is_available() and not a.compile_only:
        print("dinoml benchmark-ops cuda: error: PyTorch sees no CUDA device: run this on a machine with an NVIDIA GPU "
              "and its driver", file=sys.stderr)
        return 2
    extra = (["--no-tf32"] if a.no_tf32 else []) + (["--profile"] if a.profile else [])
    if a.profile:
        a.jobs = 1  # a profile times kernels on the GPU: two at once would disturb each other's timings
    root = a.work or tempfile.mkdtemp(prefix="dml_bench_cuda_")
    os.makedirs(root, exist_ok=True)
    cases = [Case(s, shp, dtype, root) for s in specs for shp in s["shapes"]]
    dev = T.cuda.get_device_name(0) if T.cuda.is_available() else "no GPU (--compile-only)"
    print(f"[benchmark-ops cuda] {dev}, torch {T.__version__}, {dtype}, arch {a.arch}{', profiled' if a.profile else ''}: "
          f"{len(cases)} artifacts, "
          f"compiling {a.jobs} at a time in {root}", flush=True)
    for c in cases:
        c.write_graph(T)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for i, c in enumerate(pool.map(lambda c: c.compile(exe, a.arch, extra), cases)):
            if sys.stdout.isatty() or i + 1 == len(cases) or (i + 1) % 10 == 0:
                print(f"{chr(13) if sys.stdout.isatty() else ''}[benchmark-ops cuda] compiled {i + 1}/{len(cases)}",
                      end="" if sys.stdout.isatty() else "\n", flush=True)
    print(f"{' ' if sys.stdout.isatty() else '[benchmark-ops cuda] compiled'} in {time.time() - t0:.1f} s", flush=True)
    if a.compile_only:
        bad = [c for c in cases if c.error]
        for c in bad:
            print(f"{c.name}: {c.error}")
        print(f"[benchmark-ops cuda] {len(cases) - len(bad)}/{len(cases)} artifacts compiled for {a.arch}")
        if not a.work:
            shutil.rmtree(root, ignore_errors=True)
        return 1 if bad else 0
    results = []
    hdr = f"{'op':30s} {'shape':22s} {'dinoml ms':>10s} {'torch ms':>10s} {'dinoml':>9s} {'torch':>9s} {'ratio':>6s}  check"
    print(hdr)
    for c in cases:
        if c.error:
            results.append(dict(op=c.spec["op"], shape=list(c.shape), dtype=dtype, ok=False, error=c.error))
            print(f"{c.spec['op']:30s} {shape_label(c.shape):22s} {c.error}")
            continue
        try:
            r = measure(T, c, a.repeats, a.inner)
        except Exception as e:  # one broken case must not hide the others' numbers
            r = dict(op=c.spec["op"], shape=list(c.shape), dtype=dtype, ok=False, error=f"{type(e).__name__}: {e}")
            print(f"{c.spec['op']:30s} {shape_label(c.shape):22s} {r['error'][:200]}")
            results.append(r)
            continue
        results.append(r)
        u = r["unit"]
        print(f"{r['op']:30s} {shape_label(c.shape):22s} {r['dinoml_ms']:10.4f} {r['torch_ms']:10.4f} "
              f"{rate(r['work'], r['dinoml_ms'], u):7.1f}{u[0]} {rate(r['work'], r['torch_ms'], u):7.1f}{u[0]} "
              f"{r['ratio']:6.2f}  {'ok' if r['ok'] else 'MISMATCH'} {r['rel_err']:.1e}"
              f"{'  [' + ', '.join(r['winners']) + ']' if r['winners'] else ''}", flush=True)
    good = [r["ratio"] for r in results if r.get("ok")]
    failed = [r for r in results if not r.get("ok")]
    print("\nunits: T = TFLOP/s, G = GB/s; ratio = torch ms / dinoml ms (> 1: DinoML faster)")
    if good:
        print(f"DinoML vs PyTorch over {len(good)} cases: median {statistics.median(good):.2f}x, "
              f"min {min(good):.2f}x, max {max(good):.2f}x")
        for op in dict.fromkeys(r["op"] for r in results if r.get("ok")):
            rs = [r["ratio"] for r in results if r.get("ok") and r["op"] == op]
            print(f"  {op:30s} median {statistics.median(rs):.2f}x  min {min(rs):.2f}x")
    if failed:
        print(f"{len(failed)} case(s) failed or did not match PyTorch: " +
              ", ".join(f"{r['op']} {shape_label(r['shape'])}" for r in failed))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(device=dev, torch=T.__version__, dtype=dtype, arch=a.arch, results=results), f, indent=1)
    if a.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("--plot needs matplotlib (python3-matplotlib)", file=sys.stderr)
            return 2
        ok = [r for r in results if r.get("ok")]
        fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(ok)), 4))
        ax.bar(range(len(ok)), [r["ratio"] for r in ok])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(ok)))
        ax.set_xticklabels([f"{r['op']}\n{shape_label(r['shape'])}" for r in ok], rotation=90, fontsize=6)
        ax.set_ylabel("PyTorch time / DinoML time")
        ax.set_title(f"DinoML vs PyTorch on {dev} ({dtype})")
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)
    if not a.work:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    dml_ctypes.reexec_with_cuda_libraries()
    args = sys.argv[1:]
    torch_only = bool(args) and args[0] == "--torch-only"
    sys.exit(main(args[1:] if torch_only else args, torch_only=torch_only))
