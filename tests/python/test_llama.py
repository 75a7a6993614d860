"""A llama model end to end against llama.cpp (issue 6, item 4): a random 4-layer llama (d 256,
8 heads / 2 KV heads, FFN 512, vocab 1000) written by DinoML's GGUF writer in F32 and in a
Q4_K/Q6_K mix (llama.cpp's Q4_K_M recipe), compiled from examples/llama/model.py, greedy-decoded
for 32 tokens after a 12-token prompt; the same file evaluated by llama.cpp (libllama from npm
@node-llama-cpp/linux-x64 through examples/llama/llama_cpp_ref.py, in its own process).

Acceptance: at every step both sides have seen the same tokens, the logits match within a
tolerance relative to the largest |logit| of llama.cpp, and the chosen tokens are identical —
unless llama.cpp's top two logits are closer than that tolerance, after which the continuations
may differ and the comparison stops (reported). Skips only when npm is missing.

Tolerance: the issue's 1e-2 of max |logit| for both files (F32 measured 1.8e-4: llama.cpp's
default flash attention over its F16 KV cache accumulates V·softmax in F16; against llama.cpp with
an F32 KV cache and no flash attention the F32 model matches to 2.9e-7,
test_llama_f32_matches_llama_cpp_exact_attention, 1e-5). Q4_K/Q6_K: both sides quantize
activations to q8_K blocks the same way, but any difference upstream of an 8-bit rounding (even
float summation order, or llama.cpp's F16 KV cache) flips some roundings, each flip a whole quantum,
so the model has a noise floor of its own: llama.cpp moves by as much when it only switches its KV
cache between F16 and F32. make_random_gguf's default block-output gain (0.1) keeps that floor
below 1e-2: measured on seeds 1, 2, 3, 7, 11, DinoML vs llama.cpp 7.7e-3..8.8e-3 (max over 32
steps), llama.cpp F16 vs F32 KV 7.4e-3..8.9e-3. (With gain 0.25 both were ~1.4e-2 / 1.3e-2.)
Evidence that the schemes agree: with a single quantized matrix (F32 file, only
`output` in q6_K / q4_0, or only ffn_down in q6_K) DinoML's int8 path is 1.9e-3..3.0e-3 from
llama.cpp while an exact dequantized-weight compile of the same file is 5.2e-3..9.3e-3 away.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import dinoml as dml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA_DIR = os.path.join(ROOT, "examples", "llama")
sys.path.insert(0, LLAMA_DIR)

import llama_cpp_oracle as oracle  # noqa: E402
import make_random_gguf  # noqa: E402
import model as llama_model  # noqa: E402
from llama_cpp_oracle import N, PROMPT  # noqa: E402
from dinoml.tools.generate import Decoder, generate  # noqa: E402



def llama_cpp(libdir, path, tmp_path, kv_f32=False):
    return oracle.llama_cpp(libdir, path, tmp_path / f"ref_logits{'_kv32' if kv_f32 else ''}.npy", kv_f32)


@pytest.mark.parametrize("quant", ["f32", "q4_k_m"])
def test_llama_matches_llama_cpp(ggml_libdir, tmp_path, quant):
    path = tmp_path / f"tiny-{quant}.gguf"
    make_random_gguf.make(str(path), "tiny", quant, seed=7)
    spec = llama_model.build_spec(str(path), ctx=64, max_seq=16)
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    graph = json.load(open(os.path.join(art.path, "graph.dinoir.json")))
    kept = [t["name"] for t in graph["tensors"] if "quant" in t]
    assert (len(kept) > 0) == (quant != "f32")  # quantized matrices stay blocks (qgemm kernels)

    ref_tokens, ref_logits = llama_cpp(ggml_libdir, path, tmp_path)
    assert ref_logits.shape == (N, 1000)
    # Teacher-forced with llama.cpp's tokens, so all N steps see the same context on both sides.
    dec = Decoder(art.path)
    logits = dec.feed(PROMPT)
    errs, close_calls = [], []
    for i in range(N):
        ref, got = ref_logits[i].astype(np.float64), logits.astype(np.float64)
        tol = 1e-2 * np.abs(ref).max()
        err = np.abs(ref - got).max()
        assert err <= tol, f"step {i}: max |logit difference| {err:.4g} > tolerance {tol:.4g}"
        errs.append(err / np.abs(ref).max())
        top2 = np.sort(ref)[-2:]
        if int(np.argmax(got)) != ref_tokens[i]:
            assert top2[1] - top2[0] < tol, (f"step {i}: DinoML's greedy token {int(np.argmax(got))} != llama.cpp's "
                                             f"{ref_tokens[i]} (top-2 gap {top2[1] - top2[0]:.4g} >= tolerance {tol:.4g})")
            close_calls.append(i)
        if i + 1 < N:
            logits = dec.feed([ref_tokens[i]])
    # Free-running greedy decoding: identical until a step where llama.cpp's top two are within
    # the tolerance (from there on either continuation is right).
    ours = generate(art.path, PROMPT, N, dec)
    for i in range(N):
        if ours["tokens"][i] != ref_tokens[i]:
            top2 = np.sort(ref_logits[i])[-2:]
            assert top2[1] - top2[0] < 1e-2 * np.abs(ref_logits[i]).max(), (
                f"free-running continuations differ at step {i}")
            break
    print(f"{quant}: max |logit error| / max |logit| = {max(errs):.2e} over {N} steps; greedy tokens identical "
          f"{'' if not close_calls else 'except close calls at ' + str(close_calls)}; free-running identical for "
          f"{next((i for i in range(N) if ours['tokens'][i] != ref_tokens[i]), N)} steps")


def teacher_forced_errors(art_path, ref_tokens, ref_logits):
    """max |logit difference| / max |logit| per step, DinoML fed llama.cpp's tokens."""
    dec = Decoder(art_path)
    logits, errs = dec.feed(PROMPT), []
    for i in range(N):
        ref = ref_logits[i].astype(np.float64)
        errs.append(np.abs(ref - logits).max() / np.abs(ref).max())
        if i + 1 < N:
            logits = dec.feed([ref_tokens[i]])
    return np.array(errs)


def test_llama_f32_matches_llama_cpp_exact_attention(ggml_libdir, tmp_path):
    """With llama.cpp's F32 KV cache and flash attention off, the F32 model is the same computation
    on both sides up to float summation order: norms (eps from the file), rope (freq base, adjacent
    pairs), GQA attention, SwiGLU. Measured 2.9e-7 of max |logit|."""
    path = tmp_path / "tiny-f32.gguf"
    make_random_gguf.make(str(path), "tiny", "f32", seed=7)
    art = dml.compile(llama_model.build_spec(str(path), ctx=64, max_seq=16), target="cpu", out=str(tmp_path / "art"))
    ref_tokens, ref_logits = llama_cpp(ggml_libdir, path, tmp_path, kv_f32=True)
    errs = teacher_forced_errors(art.path, ref_tokens, ref_logits)
    assert errs.max() <= 1e-5, f"max |logit error| / max |logit| = {errs.max():.3g} > 1e-5 (steps {np.argmax(errs)})"
    assert generate(art.path, PROMPT, N)["tokens"] == ref_tokens


def test_generate_cli(tmp_path):
    """`dinoml compile MODEL.py --gguf` and `dinoml generate` through the Python CLI."""
    path = tmp_path / "tiny.gguf"
    make_random_gguf.make(str(path), "tiny", "q4_0", seed=3, n_layers=1)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = tmp_path / "art"
    r = subprocess.run([sys.executable, "-m", "dinoml.cli", "compile", os.path.join(LLAMA_DIR, "model.py"), "--gguf",
                        str(path), "--model-arg", "ctx=48", "--model-arg", "max_seq=8", "--target", "cpu", "--out",
                        str(out)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "dinoml.cli", "generate", str(out), "--tokens", "1,5,9", "--n", "5",
                        "--json"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert len(res["tokens"]) == 5 and res["decode_tok_s"] > 0
    ref = generate(str(out), [1, 5, 9], 5)
    assert ref["tokens"] == res["tokens"]
    # The cache holds 48 positions: asking for more is a clear error.
    r = subprocess.run([sys.executable, "-m", "dinoml.cli", "generate", str(out), "--tokens", ",".join(["1"] * 40),
                        "--n", "10"], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "KV cache holds 48 positions" in r.stderr


def test_model_rejects_other_architectures(tmp_path):
    path = tmp_path / "x.gguf"
    dml.gguf.write(str(path), [("general.architecture", "str", "gpt2")],
                   [("token_embd.weight", np.zeros((4, 32), np.float32), "f32")])
    with pytest.raises(ValueError, match="architecture is 'gpt2'"):
        llama_model.build_spec(str(path))


def test_gguf_write_round_trip(tmp_path):
    """dml.gguf.write: metadata of each kind round-trips; tensors come back as their quantization
    (checked against NumPy bounds: f16 exact rounding, q8_0 within half a step of its block scale)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 64)).astype(np.float32)
    md = [("a.u32", "u32", 7), ("a.i64", "i64", -3), ("a.f32", "f32", 0.5), ("a.b", "bool", True),
          ("a.s", "str", "x"), ("a.arr", "arr[i32]", [1, -2, 3]), ("a.strs", "arr[str]", ["p", "q"])]
    path = tmp_path / "w.gguf"
    dml.gguf.write(str(path), md, [("t16", a, "f16"), ("t8", a, "q8_0"), ("t4k", np.tile(a, (1, 4)), "q4_K")])
    info = dml.gguf.read(str(path))
    got = info["metadata"]
    assert got["a.u32"] == 7 and got["a.i64"] == -3 and got["a.f32"] == 0.5 and got["a.b"] is True
    assert got["a.s"] == "x" and list(got["a.arr"]) == [1, -2, 3] and list(got["a.strs"]) == ["p", "q"]
    assert info["metadata_types"]["a.arr"] == "arr[i32]"
    assert {t["name"]: t["type"] for t in info["tensors"]} == {"t16": "f16", "t8": "q8_0", "t4k": "q4_K"}
    np.testing.assert_array_equal(dml.gguf.tensor(str(path), "t16"), a.astype(np.float16).astype(np.float32))
    step = np.abs(a.reshape(3, 2, 32)).max(axis=2, keepdims=True) / 127
    err = np.abs(dml.gguf.tensor(str(path), "t8").reshape(3, 2, 32) - a.reshape(3, 2, 32))
    assert (err <= 0.51 * step + 1e-7).all()
    assert dml.gguf.tensor(str(path), "t4k").shape == (3, 256)
    with pytest.raises(dml.IrError, match="type 'q9_9' cannot be quantized"):
        dml.gguf.write(str(tmp_path / "bad.gguf"), [], [("t", a, "q9_9")])
    with pytest.raises(dml.IrError, match="unknown value type 'u7'"):
        dml.gguf.write(str(tmp_path / "bad.gguf"), [("k", "u7", 1)], [])
