"""llama.cpp as the oracle of the GGUF decoder tests (test_llama.py, test_llm_architectures.py):
greedy decoding of PROMPT for N steps through examples/llama/llama_cpp_ref.py (libllama from npm,
the conftest's ggml_libdir fixture), returning its tokens and the logits of every step."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA_DIR = os.path.join(ROOT, "examples", "llama")
PROMPT = [1, 300, 451, 27, 999, 512, 260, 870, 42, 613, 777, 301]
N = 32


def llama_cpp(libdir, path, out, kv_f32=False, prompt=PROMPT, n=N):
    """(tokens, logits [n, vocab]) of llama.cpp's greedy run on GGUF file `path`; the logits are
    written to `out` (.npy) on the way. kv_f32: F32 KV cache and exact attention."""
    env = dict(os.environ, DINOML_GGML_REF_LIBDIR=libdir)
    r = subprocess.run([sys.executable, os.path.join(LLAMA_DIR, "llama_cpp_ref.py"), str(path), "--tokens",
                        ",".join(map(str, prompt)), "--n", str(n), "--ctx", "256", "--threads", "1",
                        "--logits", str(out)] + (["--kv-f32"] if kv_f32 else []),
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["tokens"], np.load(out)
