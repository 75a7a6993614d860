"""Text in, text out (`dinoml generate --prompt`, `dinoml chat`) with a compiled random llama
(examples/llama, 1 layer) whose tokenizer is Llama 2's real vocabulary (scripts/fetch-vocabs; the
synthetic vocabulary of make_random_gguf when that is unavailable): greedy text generation equals
greedy decoding of the prompt's ids (tools/generate.generate) decoded by the tokenizer, seeded
sampling reproduces, stop strings cut the text, peak RSS is reported, and the chat REPL answers
turns under tmux (send-keys / capture-pane)."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import dinoml as dml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA_DIR = os.path.join(ROOT, "examples", "llama")
sys.path.insert(0, LLAMA_DIR)

import make_random_gguf  # noqa: E402
from dinoml.tools.generate import generate  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("textgen")
    r = subprocess.run([os.path.join(ROOT, "scripts", "fetch-vocabs")], capture_output=True, text=True)
    vocab = os.path.join(r.stdout.strip().splitlines()[-1], "llama2.gguf") if r.returncode == 0 else None
    path = d / "tiny.gguf"
    make_random_gguf.make(str(path), "tiny", "q4_0", seed=3, n_layers=1, vocab_from=vocab)
    out = d / "art"
    r = subprocess.run([sys.executable, "-m", "dinoml.cli", "compile", os.path.join(LLAMA_DIR, "model.py"), "--gguf",
                        str(path), "--model-arg", "ctx=192", "--model-arg", "max_seq=32", "--target", "cpu", "--out",
                        str(out)], capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    return str(path), str(out)


def cli(*args):
    r = subprocess.run([sys.executable, "-m", "dinoml.cli", *args], capture_output=True, text=True, env=ENV)
    return r


def test_greedy_text_equals_greedy_ids(model):
    gguf, art = model
    tok = dml.Tokenizer.from_gguf(gguf)
    prompt = "Once upon a time, in a land far away"
    r = cli("generate", art, "--gguf", gguf, "--prompt", prompt, "--temperature", "0", "--n", "12", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    ids = tok.encode(prompt)
    ref = generate(art, ids, 12)["tokens"]
    cut = next((i for i, t in enumerate(ref) if tok.is_eog(t)), len(ref))
    assert res["tokens"] == ref[:cut] and res["prompt_tokens"] == len(ids)
    assert res["text"] == tok.decode(res["tokens"]) and res["peak_rss_mib"] > 10
    # Streaming prints the same text after the prompt; the report (stderr) has the peak RSS.
    r = cli("generate", art, "--gguf", gguf, "--prompt", prompt, "--temperature", "0", "--n", "12")
    assert r.returncode == 0 and r.stdout.rstrip("\n") == prompt + res["text"] and "peak RSS" in r.stderr
    if len(res["text"]) > 4:  # a stop string ends the text before it
        stop = res["text"][2:4]
        r = cli("generate", art, "--gguf", gguf, "--prompt", prompt, "--temperature", "0", "--n", "12", "--json",
                "--stop", stop)
        s = json.loads(r.stdout)
        assert s["stop"] == "stop" and s["text"] == res["text"][:res["text"].index(stop)]


def test_seeded_sampling_reproduces(model):
    gguf, art = model
    args = ["generate", art, "--gguf", gguf, "--prompt", "Hello", "--n", "10", "--json", "--temperature", "1.5",
            "--top-k", "0", "--top-p", "1", "--min-p", "0"]
    a, b, c = (json.loads(cli(*args, "--seed", s).stdout) for s in ("11", "11", "12"))
    assert a["tokens"] == b["tokens"] and a["tokens"] != c["tokens"]


def test_generate_errors(model, tmp_path):
    gguf, art = model
    r = cli("generate", art, "--prompt", "hi")
    assert r.returncode == 1 and "--gguf" in r.stderr
    r = cli("generate", art, "--gguf", gguf, "--prompt", "hi", "--top-p", "0")
    assert r.returncode == 1 and "top_p" in r.stderr
    other = tmp_path / "other.gguf"  # a tokenizer of another size than the model's logits
    tokens, scores, types = make_random_gguf.vocabulary(400)
    dml.gguf.write(str(other), [("tokenizer.ggml.model", "str", "llama"), ("tokenizer.ggml.tokens", "arr[str]", tokens),
                                ("tokenizer.ggml.scores", "arr[f32]", scores),
                                ("tokenizer.ggml.token_type", "arr[i32]", types)], [])
    r = cli("generate", art, "--gguf", str(other), "--prompt", "hi")
    assert r.returncode == 1 and "the tokenizer has 400 tokens" in r.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_chat_under_tmux(model, tmp_path):
    gguf, art = model
    name = f"dinoml-chat-{os.getpid()}"
    cmd = (f"cd {ROOT} && PYTHONPATH={ROOT}/python {sys.executable} -m dinoml.cli chat {art} --gguf {gguf} "
           f"--chat-template chatml --temperature 0 --n 6 2> {tmp_path}/err.txt; echo CHAT-EXITED-$?; sleep 60")
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "200", "-y", "50", cmd], check=True)

    def wait_for(text, timeout=60):
        t0 = time.time()
        while time.time() - t0 < timeout:
            pane = subprocess.run(["tmux", "capture-pane", "-p", "-t", name, "-S", "-200"], capture_output=True,
                                  text=True).stdout
            if text in pane:
                return pane
            time.sleep(0.3)
        raise AssertionError(f"'{text}' did not appear; screen:\n{pane}")
    try:
        wait_for("[dinoml chat: chatml format")
        subprocess.run(["tmux", "send-keys", "-t", name, "Hello there", "Enter"], check=True)
        pane = wait_for("tokens,")
        assert "> Hello there" in pane
        subprocess.run(["tmux", "send-keys", "-t", name, "And again?", "Enter"], check=True)
        t0 = time.time()
        while pane.count("tokens,") < 2 and time.time() - t0 < 60:
            time.sleep(0.3)
            pane = subprocess.run(["tmux", "capture-pane", "-p", "-t", name, "-S", "-200"], capture_output=True,
                                  text=True).stdout
        assert pane.count("tokens,") == 2
        subprocess.run(["tmux", "send-keys", "-t", name, "/exit", "Enter"], check=True)
        wait_for("CHAT-EXITED-0")
        assert "peak RSS" in (tmp_path / "err.txt").read_text()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
