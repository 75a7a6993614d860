"""Runs the quantized-weight bundle of quant_prepare.py on the GPU (python3 + torch CUDA + numpy;
no DinoML build): qgemm parity per weight type and path against float64 torch with the reference
dequantized weights, the llama artifact's greedy decoding against the CPU artifact's, and the GEMV
bandwidth (dml_cuda_qgemm called directly through ctypes, M = 1) against a device-to-device copy.

    python3 tests/gpu/quant_run.py BUNDLE [--json OUT.json]
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "dinoml", "tools"))
import cuda_timing  # noqa: E402
import dml_ctypes as D  # noqa: E402

QT = {"q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q2_K": 10, "q3_K": 11, "q4_K": 12, "q5_K": 13, "q6_K": 14}
BLOCK = {"q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34), "q2_K": (256, 84),
         "q3_K": (256, 110), "q4_K": (256, 144), "q5_K": (256, 176), "q6_K": (256, 210)}
TOL = 1e-4  # max |out - ref| / max(1, max |ref|): exact dequantized weights, fp32, --no-tf32
I8 = {"q4_0": 32, "q8_0": 32, "q4_K": 256, "q6_K": 256}  # int8 path: activation block size


def int8_used(path, t, m):
    return t in I8 and (path == "int8" or (path == "auto" and m <= 32))


def act_quant(x, qb):
    """The int8 path's activations (as the CPU's avx2_quantize_a8/a8k): per qb-element block
    d = amax / 127, q = round-half-even(x * (127 / amax)) in float32; returned as q * d in float64."""
    m, k = x.shape
    xb = x.reshape(m, k // qb, qb)
    amax = xb.abs().amax(dim=2, keepdim=True)
    idv = torch.where(amax > 0, torch.tensor(127.0, device=x.device, dtype=torch.float32) / amax, torch.zeros_like(amax))
    q = torch.round(xb * idv)  # torch.round: half to even
    d = amax / torch.tensor(127.0, device=x.device, dtype=torch.float32)
    return (q.double() * d.double()).reshape(m, k)


def run_qgemm(d, meta, results):
    art = os.path.join(d, "artifact")
    ref = np.load(os.path.join(d, "ref.npz"))
    mod = D.Module(art)
    sess = mod.session()
    dev = torch.device("cuda")
    bias = torch.from_numpy(ref["bias"]).double().to(dev)
    worst = 0.0
    g = torch.Generator(device="cpu").manual_seed(3)
    for m in meta["grid_m"]:
        x = torch.randn(m, meta["K"], generator=g).float().to(dev)
        r = torch.randn(m, meta["N"], generator=g).float().to(dev)
        outs = {n: torch.full((m, meta["N"]), float("nan"), device=dev) for n, _ in mod.outputs}
        sess.run({"x": x, "r": r}, outs)
        torch.cuda.synchronize()
        for t in meta["qtypes"]:
            w = torch.from_numpy(ref[f"w_{t}"]).double().to(dev)
            xe = act_quant(x, I8[t]) if int8_used(meta["path"], t, m) else x.double()
            lin = xe @ w.T
            exp = {"rcr": lin, "bias_relu": torch.relu(lin + bias), "bias_add": lin + bias + r.double()}
            for k, e in exp.items():
                got = outs[f"{t}_{k}"].double()
                err = ((got - e).abs().max() / max(1.0, e.abs().max().item())).item()
                ok = err <= TOL
                worst = max(worst, err)
                results.append({"case": f"qgemm_{meta['path']}", "qtype": t, "out": k, "m": m, "err": err, "ok": ok})
                if not ok:
                    print(f"FAIL qgemm_{meta['path']} {t} {k} m={m}: err {err:.3g}")
    print(f"[qgemm_{meta['path']}] {len(meta['qtypes'])} types x 3 epilogues x M {meta['grid_m']}: worst {worst:.2e} "
          f"(kernels {meta['kernels']})", flush=True)


def run_index(d, meta, results):
    mod = D.Module(os.path.join(d, "artifact"))
    sess = mod.session()
    dev = torch.device("cuda")
    table = torch.from_numpy(np.load(os.path.join(d, "table.npy"))).to(dev)
    g = torch.Generator(device="cpu").manual_seed(9)
    ok_all = True
    for T in (1, 3, 8):
        x = torch.randn(4, 10, 6, generator=g).to(dev)
        x[1, 3, :] = x[1, 2, :]  # ties: the first maximum wins
        x[2, 5, 4] = float("nan")  # NaN counts as the maximum
        xh = torch.randn(3, 50, generator=g).half().to(dev)
        idx = torch.tensor([0, -1, 9, -10, 4], dtype=torch.int64, device=dev)
        tok = torch.randint(0, 20, (T,), generator=g, dtype=torch.int32).to(dev)
        cache = torch.randn(2, 16, 8, generator=g).to(dev)
        vals = torch.randn(2, T, 8, generator=g).to(dev)
        pos = torch.randint(0, 16, (T,), generator=g, dtype=torch.int64)
        if T >= 3:
            pos[T - 1] = pos[0]  # a repeated position: the last row wins
        pos = pos.to(dev)
        outs = {"gather": torch.empty(4, 5, 6, device=dev), "embedding": torch.empty(T, 8, device=dev),
                "argmax_last": torch.empty(4, 10, dtype=torch.int64, device=dev),
                "argmax_mid": torch.empty(4, 6, dtype=torch.int64, device=dev),
                "argmax_f16": torch.empty(3, dtype=torch.int64, device=dev), "kv": torch.empty(2, 16, 8, device=dev)}
        sess.run({"x": x, "xh": xh, "idx": idx, "tok": tok, "cache": cache, "vals": vals, "pos": pos}, outs)
        torch.cuda.synchronize()
        kv = cache.clone()
        for j in range(T):
            kv[:, pos[j]] = vals[:, j]

        def amax(t, dim):  # torch: NaN is the maximum; first index among equals
            return torch.argmax(t.float().nan_to_num(nan=float("inf")), dim=dim)
        exp = {"gather": torch.index_select(x, 1, torch.where(idx < 0, idx + 10, idx)), "embedding": table[tok.long()],
               "argmax_last": amax(x, -1), "argmax_mid": amax(x, 1), "argmax_f16": amax(xh, -1), "kv": kv}
        for k, e in exp.items():
            same = torch.equal(outs[k], e)
            ok_all &= same
            results.append({"case": "index_ops", "out": k, "T": T, "ok": same})
            if not same:
                print(f"FAIL index_ops {k} T={T}", flush=True)
    print(f"[index_ops] gather/embedding/argmax/kv_cache_write (copy path) at T = 1, 3, 8: "
          f"{'all exact' if ok_all else 'MISMATCH'} (kernels {meta['kernels']})", flush=True)


def greedy(art, prompt, n):
    mod = D.Module(art)
    sess = mod.session()  # states (KV cache) start zeroed
    vocab = None
    pos = 0
    logits_all, toks = [], []

    def feed(tokens):
        nonlocal pos, vocab
        t = torch.tensor(tokens, dtype=torch.int64)
        p = torch.arange(pos, pos + len(tokens), dtype=torch.int64)
        out = torch.empty(1, 1000 if vocab is None else vocab, dtype=torch.float32)
        sess.run({"tokens": t, "positions": p}, {"logits": out})
        pos += len(tokens)
        return out[0].numpy().copy()

    lg = feed(prompt)
    for i in range(n):
        logits_all.append(lg)
        tok = int(np.argmax(lg))
        toks.append(tok)
        if i + 1 < n:
            lg = feed([tok])
    return toks, np.stack(logits_all)


def run_llama(d, meta, results):
    toks, logits = greedy(os.path.join(d, "artifact"), meta["prompt"], meta["n"])
    row = {"case": os.path.basename(d), "quant": meta["quant"], "gpu_tokens": toks}
    lim = 1e-2  # issue 6: logits within 1e-2 of max |logit| (the F32 model lands near 1e-6)
    for ref in ("cpu_default", "cpu_exact"):
        rl = np.load(os.path.join(d, f"{ref}_logits.npy"))
        rt = meta[ref]["tokens"]
        same = next((i for i in range(meta["n"]) if toks[i] != rt[i]), meta["n"])
        k = min(same + 1, meta["n"])  # logits of steps with identical context
        per_step = np.abs(logits[:k] - rl[:k]).max(axis=1) / np.abs(rl[:k]).max(axis=1)
        err = float(per_step.max())
        # As tests/python/test_llama.py: greedy tokens identical, except that from a step where the
        # reference's top two logits are closer than the tolerance either continuation is right.
        close = None
        if same < meta["n"]:
            top2 = np.sort(rl[same])[-2:]
            close = float((top2[1] - top2[0]) / np.abs(rl[same]).max())
        tokens_ok = same == meta["n"] or close < lim
        row[ref] = {"tokens_identical": toks == rt, "identical_steps": same, "close_call_gap": close,
                    "tokens_ok": tokens_ok, "max_rel_logit_err": err, "mean_rel_logit_err": float(per_step.mean()),
                    "worst_step": int(per_step.argmax()), "steps_over_1e-2": int((per_step > 1e-2).sum())}
        print(f"[{os.path.basename(d)}] vs {ref}: greedy tokens identical {toks == rt} ({same}/{meta['n']}"
              f"{'' if close is None else f'; at the first difference the reference top-2 gap is {close:.2e} of max |logit|'}), "
              f"max |logit diff| / max |logit| = {err:.2e} (step {int(per_step.argmax())}; mean {per_step.mean():.2e}; "
              f"{int((per_step > 1e-2).sum())} steps > 1e-2)", flush=True)
    row["ok"] = row["cpu_default"]["tokens_ok"] and row["cpu_default"]["max_rel_logit_err"] <= lim
    results.append(row)


def bandwidth(bundle, results):
    lib_path = sorted(glob.glob(os.path.join(bundle, "*", "artifact", "lib", "libdinoml_cuda_kernels.so")))[0]
    lib = ctypes.CDLL(os.path.realpath(lib_path))
    lib.dml_cuda_qgemm.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64] + [ctypes.c_void_p] * 5 + \
        [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.dml_cuda_last_error.restype = ctypes.c_char_p
    dev = torch.device("cuda")
    stream = torch.cuda.current_stream().cuda_stream

    def timed(fn, iters=50):
        fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for i in range(iters):
            fn(i)
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / 1e3 / iters

    copy_bw = cuda_timing.d2d_copy_bandwidth(torch)  # 1 GiB, (read + write) bytes / time
    print(f"[bandwidth] D2D copy 1 GiB: {copy_bw / 1e9:.0f} GB/s (read + write)", flush=True)
    results.append({"case": "d2d_copy", "bytes": 1 << 30, "GBps": copy_bw / 1e9})
    shapes = [(4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096)]
    for t in ("q4_K", "q6_K", "q4_0", "q8_0"):
        bs, bb = BLOCK[t]
        for N, K in shapes:
            row_bytes = K // bs * bb
            wbytes = N * row_bytes
            copies = max(1, (512 << 20) // wbytes)  # rotate over > L2 (50 MB) of weights
            w = torch.randint(0, 256, (copies, N, K // bs, bb), dtype=torch.uint8, device=dev)
            # valid small fp16 scales (0x2000 ~ 0.0078) at each format's d / dmin offsets
            offs = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0], "q4_K": [0, 2],
                    "q5_K": [0, 2], "q6_K": [208], "q2_K": [80, 82], "q3_K": [108]}[t]
            for o in offs:
                w[..., o] = 0x00
                w[..., o + 1] = 0x20
            x = torch.randn(1, K, device=dev)
            y = torch.empty(1, N, device=dev)

            for path in ((3, 1) if t in I8 else (1,)):
                def call(i=0):
                    rc = lib.dml_cuda_qgemm(QT[t], 1, N, K, x.data_ptr(), w[i % copies].data_ptr(), None, None,
                                            y.data_ptr(), 0, 0, path, stream)
                    if rc:
                        raise RuntimeError(lib.dml_cuda_last_error().decode())
                tq = timed(call, 100)
                bw = wbytes / tq
                name = "int8 GEMV" if path == 3 else "fp32 GEMV"
                print(f"[bandwidth] {t} {name} N={N} K={K}: {tq * 1e6:.1f} us, weights {wbytes / 2**20:.1f} MiB -> "
                      f"{bw / 1e9:.0f} GB/s = {bw / copy_bw:.0%} of the D2D copy", flush=True)
                results.append({"case": "qgemv_bw", "path": name, "qtype": t, "N": N, "K": K, "us": tq * 1e6,
                                "GBps": bw / 1e9, "frac_of_copy": bw / copy_bw})
            del w
    # The large-M path (dequantize slices + cuBLASLt, TF32 off) at prefill sizes, for reference.
    for t in ("q4_K", "q6_K"):
        bs, bb = BLOCK[t]
        N, K = 14336, 4096
        w = torch.randint(0, 256, (N, K // bs, bb), dtype=torch.uint8, device=dev)
        o = 0 if t == "q4_K" else 208
        w[..., o] = 0
        w[..., o + 1] = 0x20
        if t == "q4_K":
            w[..., 2] = 0
            w[..., 3] = 0x20
        for M in (16, 512):
            x = torch.randn(M, K, device=dev)
            y = torch.empty(M, N, device=dev)
            for path in (3, 1, 2):
                def call(i=0):
                    rc = lib.dml_cuda_qgemm(QT[t], M, N, K, x.data_ptr(), w.data_ptr(), None, None, y.data_ptr(), 0, 0,
                                            path, stream)
                    if rc:
                        raise RuntimeError(lib.dml_cuda_last_error().decode())
                tq = timed(call, 10)
                print(f"[large-M] {t} M={M} N={N} K={K} { {1: 'fp32 gemv', 2: 'dequant+gemm', 3: 'int8 gemv'}[path] }: {tq * 1e6:.0f} us, "
                      f"{2 * M * N * K / tq / 1e12:.1f} TFLOP/s", flush=True)
                results.append({"case": "qgemm_time", "qtype": t, "M": M, "N": N, "K": K, "path": path, "us": tq * 1e6})
        del w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--json")
    ap.add_argument("--skip-bandwidth", action="store_true")
    a = ap.parse_args()
    print("[quant-run]", torch.__version__, torch.cuda.get_device_name(0), flush=True)
    idx = json.load(open(os.path.join(a.bundle, "index.json")))
    results = []
    for key in idx["cases"]:
        d = os.path.join(a.bundle, key)
        meta = json.load(open(os.path.join(d, "case.json")))
        try:
            {"qgemm": run_qgemm, "llama": run_llama, "index": run_index}[meta["kind"]](d, meta, results)
        except Exception as e:  # report and go on with the other cases
            print(f"FAIL {key}: {type(e).__name__}: {e}", flush=True)
            results.append({"case": key, "ok": False, "error": str(e)})
    if not a.skip_bandwidth:
        bandwidth(a.bundle, results)
    failed = [r for r in results if r.get("ok") is False]
    print(f"[quant-run] {len(failed)} failed checks", flush=True)
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
