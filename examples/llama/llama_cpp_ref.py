"""llama.cpp as an oracle (ctypes over libllama from npm @node-llama-cpp/linux-x64, fetched by
scripts/fetch-ggml-ref): evaluates a prompt and greedy-decodes, like tools/generate.py does with
a DinoML artifact. Run it in its own process (it loads ggml's CPU backend and its OpenMP).

    python examples/llama/llama_cpp_ref.py MODEL.gguf --tokens 1,2,3 --n 32 --logits out.npy

Only facts of the public C API are used: llama_backend_init, ggml_backend_load_all_from_path,
llama_model_default_params / llama_context_default_params (returned by value: larger than 16
bytes, so the SysV ABI returns them through a hidden pointer, which ctypes passes as the first
argument), llama_model_load_from_file, llama_init_from_model, llama_decode with a batch
{n_tokens, token, embd=NULL, pos=NULL, n_seq_id=NULL, seq_id=NULL, logits=NULL} (positions are
then tracked by llama.cpp and only the last token's logits are output), llama_get_logits_ith(-1).
The parameter structs are passed as opaque over-sized byte blocks (the callee reads its own
size); only the three leading fields n_ctx, n_batch, n_ubatch of llama_context_params are written
(their offsets have not moved across versions; later fields have), threads are set with
llama_set_n_threads, and the context's n_ctx / threads are read back and checked.
"""
from __future__ import annotations

import argparse
import ctypes as C
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Params(C.Structure):
    _fields_ = [("raw", C.c_uint64 * 128)]  # 1 KiB: more than either params struct


class _Batch(C.Structure):
    _fields_ = [("n_tokens", C.c_int32), ("token", C.POINTER(C.c_int32)), ("embd", C.c_void_p),
                ("pos", C.c_void_p), ("n_seq_id", C.c_void_p), ("seq_id", C.c_void_p), ("logits", C.c_void_p)]


_LOG_CB = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)


def lib_dir() -> str:
    """The directory with libllama (fetched with npm); raises FileNotFoundError when unavailable."""
    env = os.environ.get("DINOML_GGML_REF_LIBDIR")
    if env:
        return env
    r = subprocess.run([os.path.join(ROOT, "scripts", "fetch-ggml-ref")], capture_output=True, text=True)
    if r.returncode != 0:
        raise FileNotFoundError(f"llama.cpp reference libraries unavailable: {r.stderr.strip()}")
    return r.stdout.strip().splitlines()[-1]


def _find(d: str, stem: str) -> str:
    """lib<stem>*.so in d; "libggml.v" / "libllama.v" also match the CUDA package's
    "libggml.cuda.v..." / "libllama.cuda.v..." names."""
    alt = stem[:-1] + "cuda.v" if stem.endswith(".v") else None
    for f in sorted(os.listdir(d)):
        if (f.startswith(stem) or (alt and f.startswith(alt))) and f.endswith(".so"):
            return os.path.join(d, f)
    raise FileNotFoundError(f"no {stem}*.so in {d}")


class LlamaCpp:
    def __init__(self, model: str, n_ctx: int = 512, n_batch: int = 512, threads: int = 2, quiet: bool = True,
                 kv_f32: bool = False, gpu_layers: int = 0):
        d = lib_dir()
        self._ggml = C.CDLL(_find(d, "libggml.v"), mode=C.RTLD_GLOBAL)
        self._ggml.ggml_backend_load_all_from_path.argtypes = [C.c_char_p]
        self._ggml.ggml_backend_load_all_from_path(d.encode())
        L = self._lib = C.CDLL(_find(d, "libllama.v"), mode=C.RTLD_GLOBAL)
        self._cb = _LOG_CB(lambda level, text, ud: None)
        if quiet:
            L.llama_log_set.argtypes = [_LOG_CB, C.c_void_p]
            L.llama_log_set(self._cb, None)
            base = C.CDLL(_find(d, "libggml-base"), mode=C.RTLD_GLOBAL)
            base.ggml_log_set.argtypes = [_LOG_CB, C.c_void_p]
            base.ggml_log_set(self._cb, None)
        L.llama_backend_init()
        for f in ("llama_model_default_params", "llama_context_default_params"):
            getattr(L, f).argtypes = [C.POINTER(_Params)]
            getattr(L, f).restype = C.c_void_p
        L.llama_model_load_from_file.argtypes = [C.c_char_p, _Params]
        L.llama_model_load_from_file.restype = C.c_void_p
        L.llama_init_from_model.argtypes = [C.c_void_p, _Params]
        L.llama_init_from_model.restype = C.c_void_p
        L.llama_decode.argtypes = [C.c_void_p, _Batch]
        L.llama_decode.restype = C.c_int32
        L.llama_get_logits_ith.argtypes = [C.c_void_p, C.c_int32]
        L.llama_get_logits_ith.restype = C.POINTER(C.c_float)
        L.llama_model_get_vocab.argtypes = [C.c_void_p]
        L.llama_model_get_vocab.restype = C.c_void_p
        L.llama_vocab_n_tokens.argtypes = [C.c_void_p]
        L.llama_vocab_n_tokens.restype = C.c_int32
        L.llama_memory_clear.argtypes = [C.c_void_p, C.c_bool]
        L.llama_get_memory.argtypes = [C.c_void_p]
        L.llama_get_memory.restype = C.c_void_p
        for f in ("llama_free", "llama_model_free"):
            getattr(L, f).argtypes = [C.c_void_p]

        mp = _Params()
        L.llama_model_default_params(C.byref(mp))
        # n_gpu_layers: the int32 after llama_model_params' two leading pointers (devices,
        # tensor_buft_overrides); its default is 0, -1 or 999 in the versions that have this layout.
        # Written only when asked: a CPU-only libllama ignores it.
        raw = (C.c_int32 * 8).from_buffer(mp)
        if gpu_layers:
            if raw[4] not in (0, -1, 999):
                raise RuntimeError(f"llama_model_params layout differs (n_gpu_layers default {raw[4]})")
            raw[4] = gpu_layers
        self.model = L.llama_model_load_from_file(model.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {model}")
        cp = _Params()
        L.llama_context_default_params(C.byref(cp))
        lead = (C.c_uint32 * 3)(n_ctx, n_batch, n_batch)
        C.memmove(C.byref(cp), lead, C.sizeof(lead))
        if kv_f32:
            # F32 KV cache without flash attention: flash_attn_type, type_k, type_v are int32 fields
            # 13, 26, 27 of this version's llama_context_params (checked by their defaults: AUTO = -1,
            # GGML_TYPE_F16 = 1); set to DISABLED = 0, GGML_TYPE_F32 = 0.
            raw = (C.c_int32 * 32).from_buffer(cp)
            if (raw[13], raw[26], raw[27]) != (-1, 1, 1):
                raise RuntimeError("llama_context_params layout differs from the one kv_f32 knows")
            raw[13], raw[26], raw[27] = 0, 0, 0
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        L.llama_set_n_threads.argtypes = [C.c_void_p, C.c_int32, C.c_int32]
        L.llama_set_n_threads(self.ctx, threads, threads)
        for f in ("llama_n_ctx", "llama_n_threads", "llama_n_threads_batch"):
            getattr(L, f).argtypes = [C.c_void_p]
            getattr(L, f).restype = C.c_uint32 if f == "llama_n_ctx" else C.c_int32
        got = (L.llama_n_ctx(self.ctx), L.llama_n_threads(self.ctx), L.llama_n_threads_batch(self.ctx))
        if got[0] < n_ctx or got[1:] != (threads, threads):
            raise RuntimeError(f"llama.cpp context has n_ctx/threads {got}, asked for {(n_ctx, threads, threads)}: "
                               "the llama_context_params layout of this libllama differs")
        self.n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))

    def reset(self):
        self._lib.llama_memory_clear(self._lib.llama_get_memory(self.ctx), True)

    def feed(self, tokens) -> np.ndarray:
        arr = (C.c_int32 * len(tokens))(*tokens)
        b = _Batch(len(tokens), C.cast(arr, C.POINTER(C.c_int32)), None, None, None, None, None)
        st = self._lib.llama_decode(self.ctx, b)
        if st != 0:
            raise RuntimeError(f"llama_decode failed with {st}")
        p = self._lib.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(p, shape=(self.n_vocab,)).copy()

    def generate(self, prompt, n: int) -> dict:
        self.reset()
        t0 = time.perf_counter()
        logits = self.feed(list(prompt))
        t1 = time.perf_counter()
        out, all_logits = [], [logits]
        for i in range(n):
            tok = int(np.argmax(logits))
            out.append(tok)
            if i + 1 < n:
                logits = self.feed([tok])
                all_logits.append(logits)
        t2 = time.perf_counter()
        return {"tokens": out, "logits": np.stack(all_logits), "prefill_s": t1 - t0, "decode_s": t2 - t1,
                "prefill_tok_s": len(prompt) / (t1 - t0), "decode_tok_s": (n - 1) / (t2 - t1) if n > 1 else 0.0}

    def close(self):
        self._lib.llama_free(self.ctx)
        self._lib.llama_model_free(self.model)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="llama.cpp greedy decoding (oracle)")
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--kv-f32", action="store_true", help="F32 KV cache, no flash attention (default: F16, auto)")
    ap.add_argument("--gpu-layers", type=int, default=0, help="layers offloaded to a GPU backend (CUDA build; 999: all)")
    ap.add_argument("--logits", default=None, help="save the [n, vocab] logits here (.npy)")
    ap.add_argument("--repeat", type=int, default=1, help="runs (the best speed is reported)")
    a = ap.parse_args(argv)
    prompt = [int(t) for t in a.tokens.split(",") if t.strip()]
    llm = LlamaCpp(a.model, n_ctx=a.ctx, n_batch=max(512, len(prompt)), threads=a.threads, kv_f32=a.kv_f32,
                   gpu_layers=a.gpu_layers)
    best = None
    for _ in range(a.repeat):
        r = llm.generate(prompt, a.n)
        if best is None:
            best = r
        else:
            best["prefill_tok_s"] = max(best["prefill_tok_s"], r["prefill_tok_s"])
            best["decode_tok_s"] = max(best["decode_tok_s"], r["decode_tok_s"])
    if a.logits:
        np.save(a.logits, best["logits"])
    print(json.dumps({k: v for k, v in best.items() if k != "logits"}))
    llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
