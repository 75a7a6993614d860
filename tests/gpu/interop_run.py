"""Zero-copy PyTorch interop on the GPU machine (bundle from tests/gpu/interop_prepare.py):
builds the runtime extension `_dinoml_rt` for this machine's Python, then runs the artifact
through the Python package as a runtime-only install (`dinoml.runtime`, no compiler extension):

* `run_torch` with CUDA tensors at every bucket (and between buckets): outputs are CUDA tensors
  of the model's dtypes, checked against PyTorch (float64 on the GPU); bfloat16 in, bfloat16 and
  float32 out;
* zero-copy: the session's device memory after run_torch is its arena only (no input staging, no
  session-owned outputs), compared with a session that ran the same input through run_numpy;
  the output tensors are the ones run_torch allocated, written in place;
* stream semantics: a run on a side torch stream, read on that stream with no synchronize;
  a CUDA-graph-free back-to-back loop of 200 runs checked at the end;
* run_dlpack with a DLPack capsule producer; the error messages (wrong dtype, tensors on two
  devices, a CPU tensor for a CUDA artifact still runs via staging);
* per-call overhead of run_torch vs the ctypes C-ABI path on the same artifact (median µs).

    python3 DIR/interop_run.py DIR [RESULT_DIR]
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    d = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else HERE)
    res_dir = sys.argv[2] if len(sys.argv) > 2 else None
    from dml_ctypes import reexec_with_cuda_libraries
    reexec_with_cuda_libraries()
    from interop_prepare import build_runtime_extension, weights
    t0 = time.time()
    so = build_runtime_extension(os.path.join(d, "src"), os.path.join(d, "artifact", "lib"), os.path.join(d, "pkg"))
    print(f"[interop] built {os.path.basename(so)} in {time.time() - t0:.1f} s", flush=True)
    sys.path.insert(0, os.path.join(d, "pkg"))
    import numpy as np
    import torch
    import dinoml as dml
    import dml_ctypes
    F = torch.nn.functional
    assert dml._ext.ext is None, "expected a runtime-only install (no compiler extension)"
    checks, results = [], {}

    def check(name, ok, detail=""):
        checks.append((name, bool(ok), detail))
        print(f"[interop] {'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)

    W = {k: torch.from_numpy(v).cuda() for k, v in weights().items()}
    wb, bb = W["w"].to(torch.bfloat16), W["b"].to(torch.bfloat16)
    art = os.path.join(d, "artifact")
    m = dml.runtime.load(art)
    check("target", m.target == "cuda", m.target)

    def ref(x):
        y = F.gelu(F.linear(x.double(), wb.double(), bb.double()))
        return y, F.layer_norm(y.to(torch.bfloat16).double(), (y.shape[-1],), W["g"].double(), W["beta"].double(), 1e-5)

    def close(a, b, tol):
        err = ((a.double() - b).norm() / b.norm()).item()
        return err <= tol, f"rel-L2 {err:.2e}"

    s = m.create_session()
    g = torch.Generator(device="cuda").manual_seed(1)
    for batch in (1, 8, 13, 64, 200, 512):
        x = torch.randn(batch, 256, device="cuda", generator=g).to(torch.bfloat16)
        out = s.run_torch(x=x)
        y, z = out["y"], out["z"]
        ry, rz = ref(x)
        ok_y, dy = close(y, ry, 2e-2)
        ok_z, dz = close(z, rz, 2e-2)
        check(f"run_torch batch {batch}", y.is_cuda and z.is_cuda and y.dtype == torch.bfloat16 and
              z.dtype == torch.float32 and tuple(y.shape) == (batch, 384) and ok_y and ok_z, f"y {dy}, z {dz}")

    # zero-copy: device memory of a run_torch session vs a run_numpy session at the same input
    x = torch.randn(512, 256, device="cuda", generator=g).to(torch.bfloat16)
    s1 = m.create_session()
    o1 = s1.run_torch(x=x)
    torch.cuda.synchronize()
    s2 = m.create_session()
    xf = x.float().cpu().numpy()
    o2 = s2.run_numpy(x=xf)
    mem1, mem2 = s1.memory()["device_bytes"], s2.memory()["device_bytes"]
    io = x.numel() * 2 + 512 * 384 * (2 + 4)
    check("zero-copy: no staging / session outputs", mem1 + io <= mem2,
          f"device bytes run_torch {mem1}, run_numpy {mem2} (inputs + outputs {io})")
    check("run_torch == run_numpy", torch.equal(o1["y"].float().cpu(), torch.from_numpy(o2["y"])) and
          torch.allclose(o1["z"].cpu(), torch.from_numpy(o2["z"])), "")
    results["device_bytes"] = {"run_torch": mem1, "run_numpy": mem2, "io_bytes": io}

    # stream semantics: enqueue on a side stream and read there, no synchronize
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        xs = torch.randn(64, 256, device="cuda", generator=g).to(torch.bfloat16)
        last = None
        for _ in range(200):
            last = s.run_torch(x=xs)
        ysum = last["y"].float().sum()
    side.synchronize()
    ok, dy = close(last["y"], ref(xs)[0], 2e-2)
    check("side stream, 200 back-to-back runs", ok and torch.isfinite(ysum).item(), dy)

    # DLPack producer (a capsule) and errors
    cap = torch.randn(8, 256, device="cuda", generator=g).to(torch.bfloat16)
    out = s.run_dlpack(x=_Producer(cap))
    check("run_dlpack", close(out["y"], ref(cap)[0], 2e-2)[0] and out["y"].is_cuda, "")
    try:
        s.run_torch(x=cap.float())
        check("dtype error", False, "no error")
    except dml.InvalidArgumentError as e:
        check("dtype error", "expects bfloat16" in str(e), str(e)[:120])
    host = s.run_torch(x=cap.cpu())
    check("host tensors on a CUDA artifact (staged)", not host["y"].is_cuda and
          close(host["y"], ref(cap)[0].cpu(), 2e-2)[0], "")

    # per-call overhead: run_torch vs the ctypes C ABI with preallocated outputs (same artifact)
    xb = torch.randn(8, 256, device="cuda", generator=g).to(torch.bfloat16)
    cm = dml_ctypes.Module(art)
    cs = cm.session()
    cs.set_stream(torch.cuda.current_stream().cuda_stream)
    outs = {"y": torch.empty(8, 384, dtype=torch.bfloat16, device="cuda"), "z": torch.empty(8, 384, device="cuda")}
    ins, outs_c = cs.prepare({"x": xb}, outs)

    def per_call(fn, n=300):
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t) / n * 1e6)
        return sorted(ts)[2]
    results["us_per_call"] = {"run_torch": per_call(lambda: s.run_torch(x=xb)),
                              "ctypes_prepared": per_call(lambda: cs.run_prepared(ins, outs_c))}
    print(f"[interop] µs per call (batch 8): run_torch {results['us_per_call']['run_torch']:.1f}, "
          f"ctypes C ABI {results['us_per_call']['ctypes_prepared']:.1f}", flush=True)

    n_ok = sum(ok for _, ok, _ in checks)
    results["checks"] = [{"name": n, "ok": ok, "detail": det} for n, ok, det in checks]
    results["summary"] = f"{n_ok}/{len(checks)} interop checks pass"
    print(f"[interop] {results['summary']}; torch {torch.__version__}, {torch.cuda.get_device_name()}")
    if res_dir:
        os.makedirs(res_dir, exist_ok=True)
        with open(os.path.join(res_dir, "interop.json"), "w") as f:
            json.dump(results, f, indent=1)
    sys.exit(0 if n_ok == len(checks) else 1)


class _Producer:
    """A minimal DLPack producer (not a torch tensor), as CuPy or JAX arrays are."""
    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


if __name__ == "__main__":
    main()
