"""Runs the tensor-parallel bundle of tp_prepare.py on the GPU machine (python3 + torch CUDA +
numpy; no DinoML build):
  * the unsharded CUDA artifact against the CPU artifact's logits;
  * NCCL through the artifact's kernel library with a 1-rank communicator (all_reduce in place,
    all_gather along an inner axis, an aborted communicator refusing further collectives);
  * the 2-rank artifact: both ranks load (each its own constants), a rank run alone stops at its first
    collective with a clear error, and — on a machine with >= 2 GPUs — the two ranks run together
    on GPUs 0 and 1 (one host thread each, NCCL) and give the CPU logits.

    python3 tests/gpu/tp_run.py BUNDLE [--json OUT.json]
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import site
import sys
import threading

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "dinoml", "tools"))
import dml_ctypes as D  # noqa: E402

TOL = 1e-4


def nccl_path():
    for sp in site.getsitepackages() + [site.getusersitepackages()]:
        hits = sorted(glob.glob(os.path.join(sp, "nvidia", "**", "libnccl.so*"), recursive=True))
        if hits:
            return hits[0]
    return None


def kernels_lib(art):
    lib = ctypes.CDLL(os.path.join(art, "lib", "libdinoml_cuda_kernels.so"))
    lib.dml_cuda_last_error.restype = ctypes.c_char_p
    lib.dml_cuda_nccl_load.argtypes = [ctypes.c_char_p]
    lib.dml_cuda_comm_init.restype = ctypes.c_void_p
    lib.dml_cuda_comm_init.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p]
    for f in ("dml_cuda_comm_bind", "dml_cuda_comm_abort", "dml_cuda_comm_destroy"):
        getattr(lib, f).argtypes = [ctypes.c_void_p]
    lib.dml_cuda_all_reduce.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.dml_cuda_all_gather.argtypes = [ctypes.c_size_t, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    return lib


def err(lib):
    return lib.dml_cuda_last_error().decode(errors="replace")


def run_steps(sess, steps, device):
    out = []
    for toks, pos in steps:
        logits = torch.empty((1, 1024), dtype=torch.float32, device=device)
        sess.run({"tokens": torch.tensor(toks, dtype=torch.int64), "positions": torch.tensor(pos, dtype=torch.int64)},
                 {"logits": logits})
        out.append(logits.cpu().numpy())
    return np.concatenate(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    D.reexec_with_cuda_libraries()
    B = a.bundle
    steps = json.load(open(os.path.join(B, "index.json")))["steps"]
    ref = np.load(os.path.join(B, "ref_logits.npy")).reshape(len(steps), -1)
    scale = np.abs(ref).max()
    res = {"gpus": torch.cuda.device_count(), "device": torch.cuda.get_device_name(0)}

    # 1. unsharded CUDA artifact
    m1 = D.Module(os.path.join(B, "cuda_tp1"))
    got = run_steps(m1.session(), steps, "cuda:0").reshape(len(steps), -1)
    res["tp1_rel_err"] = float(np.abs(got - ref).max() / scale)

    # 2. NCCL, 1 rank, through the 2-rank artifact's kernel library (the instance module.so uses)
    art2 = os.path.join(B, "cuda_tp2")
    lib = kernels_lib(art2)
    path = nccl_path() or os.environ.get("DINOML_NCCL_LIBRARY")
    res["nccl"] = path
    assert lib.dml_cuda_nccl_load(path.encode() if path else None) == 0, err(lib)
    uid = ctypes.create_string_buffer(128)
    assert lib.dml_cuda_nccl_unique_id(uid) == 0, err(lib)
    comm = lib.dml_cuda_comm_init(1, 0, uid.raw)
    assert comm, err(lib)
    lib.dml_cuda_comm_bind(comm)
    stream = torch.cuda.current_stream().cuda_stream
    x = torch.randn(3, 5, device="cuda:0")
    y = x.clone()
    assert lib.dml_cuda_all_reduce(0, y.numel(), y.data_ptr(), 1, stream) == 0, err(lib)
    g = torch.empty_like(x)
    assert lib.dml_cuda_all_gather(4, 3, 5, x.data_ptr(), g.data_ptr(), 1, stream) == 0, err(lib)
    torch.cuda.synchronize()
    res["nccl_1rank_all_reduce_ok"] = bool(torch.equal(x, y))
    res["nccl_1rank_all_gather_ok"] = bool(torch.equal(x, g))
    # wrong world size, then an aborted communicator: clear errors, no wait
    assert lib.dml_cuda_all_reduce(0, y.numel(), y.data_ptr(), 2, stream) != 0
    res["world_mismatch_error"] = err(lib)
    lib.dml_cuda_comm_abort(comm)
    assert lib.dml_cuda_all_reduce(0, y.numel(), y.data_ptr(), 1, stream) != 0
    res["aborted_error"] = err(lib)
    lib.dml_cuda_comm_bind(None)
    lib.dml_cuda_comm_destroy(comm)

    # 3. the 2-rank artifact: ranks load; a rank alone fails at its first collective
    r0 = D.Module(art2, rank=0)
    r1 = D.Module(art2, rank=1)
    res["world_size"] = r0.world_size
    try:
        run_steps(r1.session(), steps[:1], "cuda:0")
        res["alone_error"] = None
    except D.DinoMLError as e:
        res["alone_error"] = str(e)[:300]
    del r0, r1

    # 4. both ranks on two GPUs
    if torch.cuda.device_count() >= 2:
        uid2 = ctypes.create_string_buffer(128)
        assert lib.dml_cuda_nccl_unique_id(uid2) == 0, err(lib)
        outs, errors = [None, None], []

        def rank(r):
            try:
                assert lib.dml_cuda_set_device(r) == 0, err(lib)
                torch.cuda.set_device(r)
                m = D.Module(art2, rank=r)
                s = m.session()
                c = lib.dml_cuda_comm_init(2, r, uid2.raw)
                assert c, err(lib)
                lib.dml_cuda_comm_bind(c)
                outs[r] = run_steps(s, steps, f"cuda:{r}").reshape(len(steps), -1)
            except Exception as e:  # noqa: BLE001
                errors.append(f"rank {r}: {e}")
        ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
        [t.start() for t in ts]
        [t.join(120) for t in ts]
        res["tp2_errors"] = errors
        if not errors:
            res["tp2_rel_err"] = [float(np.abs(o - ref).max() / scale) for o in outs]
    ok = (res["tp1_rel_err"] <= TOL and res["nccl_1rank_all_reduce_ok"] and res["nccl_1rank_all_gather_ok"]
          and res["world_size"] == 2 and res["alone_error"] and "session group" in res["alone_error"]
          and "aborted" in res["aborted_error"]
          and (res["gpus"] < 2 or (not res["tp2_errors"] and max(res["tp2_rel_err"]) <= TOL)))
    res["ok"] = bool(ok)
    print(json.dumps(res, indent=1))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
