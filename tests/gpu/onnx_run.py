"""Runs the ONNX real-model bundle of onnx_prepare.py on a GPU: every model at every stored batch
size (device tensors in and out), compared with PyTorch's fp32 output (max |err| <= 1e-4, relative
to max |y| when the outputs are smaller than 1, as bench/onnx/real_models.py does on the CPU).

    python3 tests/gpu/onnx_run.py BUNDLE [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "dinoml", "tools"))
import dml_ctypes as D  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--json")
    a = ap.parse_args()
    index = json.load(open(os.path.join(a.bundle, "index.json")))
    results, ok_all = [], True
    for name in index["models"]:
        d = os.path.join(a.bundle, name)
        meta = json.load(open(os.path.join(d, "case.json")))
        io = np.load(os.path.join(d, "io.npz"))
        try:
            sess = D.Module(os.path.join(d, "artifact")).session()
            sess.set_stream(torch.cuda.current_stream().cuda_stream)  # ordered after PyTorch's fills
            worst = 0.0
            for b in meta["batches"]:
                x = torch.from_numpy(io[f"x{b}"]).cuda().contiguous()
                want = io[f"y{b}"]
                y = torch.full(want.shape, float("nan"), device="cuda", dtype=torch.float32)
                sess.run({"x": x}, {"y": y})
                torch.cuda.synchronize()
                got = y.cpu().numpy()
                err = float(np.max(np.abs(got - want)))
                scale = float(np.max(np.abs(want)))
                err = err / scale if scale < 1.0 else err
                worst = max(worst, err if np.isfinite(err) else float("inf"))
            ok = worst <= meta["tol"]
            results.append({"model": name, "worst": worst, "ok": ok, "batches": meta["batches"]})
            print(f"[onnx-cuda] {'OK  ' if ok else 'FAIL'} {name}: worst {worst:.2e} (tol {meta['tol']}), "
                  f"batches {meta['batches']}", flush=True)
        except Exception as e:  # noqa: BLE001 - report every model
            ok = False
            results.append({"model": name, "ok": False, "error": f"{type(e).__name__}: {e}"})
            print(f"[onnx-cuda] FAIL {name}: {type(e).__name__}: {e}", flush=True)
        ok_all = ok_all and ok
    print(f"[onnx-cuda] {sum(r['ok'] for r in results)}/{len(results)} models match PyTorch on "
          f"{torch.cuda.get_device_name(0)}")
    if a.json:
        json.dump({"results": results, "device": torch.cuda.get_device_name(0)}, open(a.json, "w"), indent=1)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
