"""`dinoml serve` over the OpenAI API, driven by the official `openai` client: a tiny random-weight
llama (written by DinoML's GGUF writer, compiled from examples/llama/model.py); completions and
chat completions, streaming and not, stop strings, EOS, seeds, 16 concurrent requests, and the
4xx answers to bad parameters; the same file compiled with slots=4 (continuous batching: one
session, one scheduler thread) under concurrent requests of different lengths. Oracle for the ids:
greedy decoding by dinoml.tools.generate, a separate code path over its own session. Loopback only.

`WordCodec` stands in for a GGUF tokenizer (the server's TextCodec interface: tokenize,
detokenize, apply_chat_template, eos_ids): token i is the text "<i>", so every id sequence has
exactly one text and back."""
from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import re
import time

import numpy as np
import pytest

openai = pytest.importorskip("openai", reason="the serve tests need the openai client")

import dinoml as dml  # noqa: E402
from serve_harness import server_thread  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPT = [1, 200, 45, 27, 99, 12]
VOCAB = 1000


class WordCodec:
    def __init__(self, eos_ids=()):
        self.eos_ids = set(eos_ids)

    def tokenize(self, text, add_special=True):
        return [int(t) for t in re.findall(r"<(\d+)>", text)]

    def detokenize(self, ids):
        return "".join(f"<{i}>" for i in ids)

    def apply_chat_template(self, messages, add_generation_prompt=True):
        role = {"system": "<2>", "user": "<3>", "assistant": "<4>"}
        text = "".join(role[m["role"]] + m["content"] + "<5>" for m in messages)
        return self.tokenize(text + ("<4>" if add_generation_prompt else ""))


def text_of(ids):
    return WordCodec().detokenize(ids)


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    import sys
    sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
    import make_random_gguf
    import model as llama_model
    d = tmp_path_factory.mktemp("llm")
    path = str(d / "tiny.gguf")
    make_random_gguf.make(path, "tiny", "f32", seed=3, n_layers=2, dim=64, n_heads=4, n_kv_heads=2, ffn=128)
    art = dml.compile(llama_model.build_spec(path, ctx=64, max_seq=16), target="cpu", out=str(d / "art"))
    return art.path


def greedy(art, prompt, n):
    from dinoml.tools.generate import generate
    return generate(art, prompt, n)["tokens"]


@pytest.fixture(scope="module")
def served(llm):
    ref = greedy(llm, PROMPT, 12)
    # An EOS id that greedy decoding reaches at step k (first occurrence), for finish_reason "stop".
    k = next(i for i in range(3, 12) if ref[i] not in ref[:i])
    codecs = {"llm": WordCodec(eos_ids={ref[k]})}
    with server_thread([f"llm={llm}", f"raw={llm}"], codecs=codecs, threads=2, max_queue=32) as port:
        yield port, ref, k


@pytest.fixture
def client(served):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{served[0]}/v1", api_key="unused", max_retries=0, timeout=60)


def test_models_and_health(served, client):
    ids = sorted(m.id for m in client.models.list().data)
    assert ids == ["llm", "raw"]
    c = http.client.HTTPConnection("127.0.0.1", served[0], timeout=10)
    c.request("GET", "/health")
    r = c.getresponse()
    assert r.status == 200 and json.loads(r.read()) == {"status": "ok"}


def test_completion_token_ids_and_eos(served, client):
    _, ref, k = served
    r = client.completions.create(model="raw", prompt=PROMPT, max_tokens=8, temperature=0)
    assert r.choices[0].token_ids == ref[:8] and r.choices[0].finish_reason == "length"
    assert r.choices[0].text == ""  # no tokenizer: the ids are the output
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(PROMPT), 8)
    r = client.completions.create(model="llm", prompt=PROMPT, max_tokens=12, temperature=0)
    assert r.choices[0].text == text_of(ref[:k]) and r.choices[0].finish_reason == "stop"  # EOS ends it
    r = client.completions.create(model="llm", prompt=text_of(PROMPT), max_tokens=2, temperature=0)
    assert r.choices[0].text == text_of(ref[:2])


def test_completion_stream_and_stop_string(served, client):
    _, ref, k = served
    chunks = list(client.completions.create(model="llm", prompt=PROMPT, max_tokens=k, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == text_of(ref[:k])
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == k
    j = next(i for i in range(1, k) if ref[i] not in ref[:i])
    r = client.completions.create(model="llm", prompt=PROMPT, max_tokens=10, temperature=0, stop=[text_of([ref[j]])])
    assert r.choices[0].text == text_of(ref[:j]) and r.choices[0].finish_reason == "stop"
    s = "".join(c.choices[0].text for c in client.completions.create(
        model="llm", prompt=PROMPT, max_tokens=10, temperature=0, stop=text_of([ref[j]]), stream=True))
    assert s == text_of(ref[:j])


def test_chat_completions(served, llm, client):
    msgs = [{"role": "system", "content": "<7><8>"}, {"role": "user", "content": "<100><101><102>"}]
    ids = WordCodec().apply_chat_template(msgs)
    want = greedy(llm, ids, 4)
    want = want[:next((i for i, t in enumerate(want) if t == served[1][served[2]]), 4)]  # EOS stops early
    r = client.chat.completions.create(model="llm", messages=msgs, max_tokens=4, temperature=0)
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content == text_of(want)
    assert r.usage.prompt_tokens == len(ids)
    chunks = list(client.chat.completions.create(model="llm", messages=msgs, max_tokens=4, temperature=0,
                                                 stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text_of(want)
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")


def test_seeded_sampling_reproduces(client):
    kw = dict(model="raw", prompt=PROMPT, max_tokens=8, temperature=0.9, top_p=0.95, seed=1234)
    a = client.completions.create(**kw).choices[0].token_ids
    b = client.completions.create(**kw).choices[0].token_ids
    assert a == b and len(a) == 8 and all(0 <= t < VOCAB for t in a)


def test_sixteen_concurrent_requests(served, client):
    _, ref, _ = served

    def one(i):
        stream = i % 2 == 1
        r = client.completions.create(model="raw", prompt=PROMPT, max_tokens=6, temperature=0, stream=stream)
        if stream:
            return [t for c in r if c.choices for t in (c.choices[0].token_ids or [])]
        return r.choices[0].token_ids

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        results = list(ex.map(one, range(16)))
    assert all(r == ref[:6] for r in results), results


@pytest.mark.parametrize("kw,status,match", [
    (dict(model="llm", prompt=PROMPT, temperature=3.0), 400, "'temperature' is 3.0; it must be between 0.0 and 2.0"),
    (dict(model="llm", prompt=PROMPT, n=2), 400, "'n' = 2: this server returns one choice per request"),
    (dict(model="llm", prompt=PROMPT, max_tokens=0), 400, "'max_tokens' is 0"),
    (dict(model="llm", prompt=PROMPT, top_p="x"), 400, "'top_p' must be a number"),
    (dict(model="llm", prompt=PROMPT, max_tokens=100), 400, "maximum context length is 64 tokens"),
    (dict(model="llm", prompt=[5, VOCAB + 1]), 400, f"prompt token id {VOCAB + 1} is outside the vocabulary"),
    (dict(model="raw", prompt="hello"), 400, "model 'raw' has no tokenizer"),
    (dict(model="gpt-4", prompt=PROMPT), 404, "the model 'gpt-4' does not exist"),
    (dict(model="llm", prompt=PROMPT, logprobs=2), 400, "'logprobs' = 2 is not supported"),
])
def test_bad_parameters(client, kw, status, match):
    with pytest.raises(openai.APIStatusError) as e:
        client.completions.create(**kw)
    assert e.value.status_code == status
    assert match in e.value.body["message"], e.value.body


def test_bad_chat_and_malformed_json(served, client):
    with pytest.raises(openai.BadRequestError, match="role must be system, developer, user or assistant"):
        client.chat.completions.create(model="llm", messages=[{"role": "robot", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="has no tokenizer and chat template"):
        client.chat.completions.create(model="raw", messages=[{"role": "user", "content": "x"}])
    c = http.client.HTTPConnection("127.0.0.1", served[0], timeout=10)
    c.request("POST", "/v1/completions", body=b'{"model": "llm", "prompt": [1,', headers={"Content-Type": "application/json"})
    r = c.getresponse()
    body = json.loads(r.read())
    assert r.status == 400 and body["error"]["message"].startswith("malformed JSON in the request body")


def test_server_sampler():
    """The server's use of dinoml.llm.Sampler on known logits: top-k 1 and tiny temperatures are
    greedy (1e-40 is below float32's normal range); every draw lies in the top-p support computed
    here with NumPy (at temperature 1, the chain's order); frequency and presence penalties reach
    the sampler (the greedy choice moves off a repeated id)."""
    from dinoml.serve.llm import SamplingParams, ServerSampler
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal(50) * 3).astype(np.float32)
    order = np.argsort(-logits)
    best = int(order[0])
    for t in (0.0, 1e-40, 2.2e-309):
        assert ServerSampler(SamplingParams(1, temperature=t), []).sample(logits) == best
    assert all(ServerSampler(SamplingParams(1, temperature=1.5, top_k=1, seed=s), []).sample(logits) == best
               for s in range(10))
    p = np.exp(logits[order] - logits[order][0])
    p /= p.sum()
    support = set(order[:int(np.searchsorted(np.cumsum(p), 0.8)) + 1].tolist())
    draws = {ServerSampler(SamplingParams(1, temperature=0.7, top_p=0.8, seed=s), []).sample(logits)
             for s in range(200)}
    assert draws <= support and len(draws) > 1
    gap = float(logits[order[0]] - logits[order[1]])
    s = ServerSampler(SamplingParams(3, temperature=0.0, presence_penalty=2.0, frequency_penalty=2.0), [best] * 3)
    assert gap < 2.0 + 3 * 2.0 and s.sample(logits) == int(order[1])


def test_gguf_tokenizer_codec(tmp_path):
    """--tokenizer FILE.gguf: text prompts and chat through dinoml.llm's tokenizer and chat template
    (the GGUF writer's SentencePiece-style vocabulary), ids and text against greedy decoding and
    the tokenizer's own encode/decode."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
    import make_random_gguf
    import model as llama_model
    from dinoml.llm import Tokenizer, encode_chat
    from dinoml.serve.codec import codec_from_gguf
    path = str(tmp_path / "tiny.gguf")
    make_random_gguf.make(path, "tiny", "f32", seed=4, n_layers=1, dim=32, n_heads=2, n_kv_heads=1, ffn=64)
    art = dml.compile(llama_model.build_spec(path, ctx=160, max_seq=64), target="cpu", out=str(tmp_path / "a")).path
    tok = Tokenizer.from_gguf(path)

    def expected(ids, n):
        out = greedy(art, ids, n)
        out = out[:next((i for i, t in enumerate(out) if tok.is_eog(t)), n)]
        return out, tok.decode(out)

    with server_thread([f"t={art}"], codecs={"t": codec_from_gguf(path, "chatml")}, threads=1) as port:
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
        ids, text = expected(tok.encode("hello world", add_special=True, parse_special=True), 6)
        r = c.completions.create(model="t", prompt="hello world", max_tokens=6, temperature=0)
        assert ids and r.choices[0].token_ids == ids and r.choices[0].text == text
        assert "".join(ch.choices[0].text for ch in c.completions.create(
            model="t", prompt="hello world", max_tokens=6, temperature=0, stream=True)) == text
        msgs = [{"role": "user", "content": "hi there"}]
        prompt = encode_chat(tok, "chatml", msgs)
        ids, text = expected(prompt, 5)
        r = c.chat.completions.create(model="t", messages=msgs, max_tokens=5, temperature=0)
        assert r.usage.prompt_tokens == len(prompt) and r.choices[0].message.content == text


def _simultaneous_completions(c, model, max_tokens, n):
    """n simultaneous greedy completions of PROMPT by `model`: for each, the number of tokens it
    generated or the openai.APIStatusError it got."""
    def one(_):
        try:
            return len(c.completions.create(model=model, prompt=PROMPT, max_tokens=max_tokens, temperature=0)
                       .choices[0].token_ids)
        except openai.APIStatusError as e:
            return e

    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        return list(ex.map(one, range(n)))


def test_queue_full_gives_503(llm):
    """One slot, no queue: of eight simultaneous 50-token completions, those arriving while the slot
    generates get 503 with the limit named; the others complete."""
    with server_thread([f"raw={llm}"], threads=1, max_queue=0) as port:
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)

        results = _simultaneous_completions(c, "raw", 50, 8)
    busy = [r for r in results if not isinstance(r, int)]
    assert busy and all(r.status_code == 503 and "--max-queue 0" in r.body["message"] for r in busy), results
    assert all(r == 50 for r in results if isinstance(r, int)) and len(busy) < 8


@pytest.fixture(scope="module")
def llm_slots(llm):
    """The tiny llama of `llm` compiled with slots=4 (max_seq 16: longer prompts are prefilled in
    chunks, in the same steps as other sequences' decode tokens)."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
    import model as llama_model
    d = os.path.dirname(llm)
    spec = llama_model.build_spec(os.path.join(d, "tiny.gguf"), ctx=64, max_seq=16, slots=4)
    return dml.compile(spec, target="cpu", out=os.path.join(d, "art-slots")).path


def test_continuous_batching_matches_greedy(llm, llm_slots):
    """Twelve concurrent requests (prompts of 3..33 tokens, 4..24 new ones, half streamed) on a
    slots=4 artifact: at most four run at once, the others wait and join the batch as sequences
    leave it; every request gets the ids of greedy decoding of its prompt alone. A seeded sampled
    request running among them draws what the one-sequence artifact draws for the same seed."""
    rng = np.random.default_rng(2)
    jobs = [(rng.integers(0, VOCAB, 3 + 30 * i // 11).tolist(), 4 + (i * 7) % 21) for i in range(12)]
    want = [greedy(llm, p, n) for p, n in jobs]
    seeded = dict(prompt=PROMPT, max_tokens=8, temperature=0.9, top_p=0.95, seed=77)
    with server_thread([f"b={llm_slots}", f"one={llm}"], threads=2, max_queue=16) as port:
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
        ref_sampled = c.completions.create(model="one", **seeded).choices[0].token_ids
        models = {m.id: m for m in c.models.list().data}
        assert set(models) == {"b", "one"}

        def one(i):
            if i == len(jobs):
                return c.completions.create(model="b", **seeded).choices[0].token_ids
            prompt, n = jobs[i]
            if i % 2:
                r = c.completions.create(model="b", prompt=prompt, max_tokens=n, temperature=0, stream=True)
                return [t for ch in r if ch.choices for t in (ch.choices[0].token_ids or [])]
            return c.completions.create(model="b", prompt=prompt, max_tokens=n, temperature=0).choices[0].token_ids

        with concurrent.futures.ThreadPoolExecutor(len(jobs) + 1) as ex:
            got = list(ex.map(one, range(len(jobs) + 1)))
    assert got[:-1] == want
    assert got[-1] == ref_sampled and len(ref_sampled) == 8


def test_continuous_batching_queue_full_and_cancel(llm_slots):
    """slots=4, no queue: of sixteen simultaneous 58-token completions, those arriving while four
    run get 503; the others complete. A stream the client drops frees its slot for later requests."""
    with server_thread([f"b={llm_slots}"], threads=2, max_queue=0) as port:
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)

        results = _simultaneous_completions(c, "b", 58, 16)
        busy = [r for r in results if not isinstance(r, int)]
        assert busy and all(r.status_code == 503 and "--max-queue 0" in r.body["message"] for r in busy), results
        assert all(r == 58 for r in results if isinstance(r, int)) and len(busy) <= 12

        def retried(**kw):  # a dropped stream's slot is freed once the server sees the disconnect
            for _ in range(100):
                try:
                    return c.completions.create(model="b", prompt=PROMPT, temperature=0, **kw)
                except openai.APIStatusError as e:
                    assert e.status_code == 503
                    time.sleep(0.05)
            raise AssertionError("no slot came free: dropped streams keep their slots")

        for _ in range(6):  # more dropped streams than slots: each must give its slot back
            stream = retried(max_tokens=58, stream=True)
            next(iter(stream))
            stream.close()
        assert len(retried(max_tokens=3).choices[0].token_ids) == 3


def test_batch_scheduler_runs_sequences_together(llm, llm_slots):
    """The scheduler without HTTP: four sequences admitted at once share steps (fewer runs than
    tokens), each gets its greedy ids, and a fifth waits for a slot and then runs."""
    import threading
    from dinoml.serve.batching import BatchedSequence, BatchScheduler
    from dinoml.serve.llm import SamplingParams, ServerSampler
    from dinoml.tools.generate import BatchDecoder
    jobs = [([3 + i, 40, 41 + i] * (1 + 3 * i), 6 + i) for i in range(5)]
    sched = BatchScheduler("t", BatchDecoder(llm_slots), max_queue=1)
    outs = [[] for _ in jobs]
    done = [threading.Event() for _ in jobs]

    def emit(i):
        def f(item):
            outs[i].append(item)
            if not isinstance(item, int):
                done[i].set()
        return f

    try:
        for i, (p, n) in enumerate(jobs):
            sched.admit(BatchedSequence(p, n, ServerSampler(SamplingParams(n, temperature=0), p), set(), emit(i),
                                        threading.Event()))
        with pytest.raises(Exception, match="--max-queue 1"):
            sched.admit(BatchedSequence(PROMPT, 2, ServerSampler(SamplingParams(2, temperature=0), PROMPT), set(),
                                        lambda item: None, threading.Event()))
        assert all(e.wait(30) for e in done)
    finally:
        sched.close()
    for (p, n), out in zip(jobs, outs):
        assert out == greedy(llm, p, n) + ["length"]
    assert sched.steps < sum(n for _, n in jobs) - 5, sched.steps


def test_compiled_gguf_serves_text_with_its_own_tokenizer(tmp_path):
    """`dinoml compile MODEL.gguf` writes DIR/tokenizer.gguf; `dinoml serve DIR` then takes text and
    chat with no --tokenizer (the process as a user starts it)."""
    import subprocess
    import sys
    sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
    import make_random_gguf
    from serve_harness import server_process
    path = str(tmp_path / "tiny.gguf")
    make_random_gguf.make(path, "tiny", "f32", seed=5, n_layers=1, dim=32, n_heads=2, n_kv_heads=1, ffn=64)
    out = str(tmp_path / "chat")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    subprocess.run([sys.executable, "-m", "dinoml.cli", "compile", path, "--target", "cpu", "--out", out,
                    "--model-arg", "ctx=64", "--model-arg", "max_seq=16"], check=True, env=env)
    assert os.path.isfile(os.path.join(out, "tokenizer.gguf"))
    with server_process([out, "--threads", "1", "--chat-template", "chatml"]) as (_, port):
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
        r = c.chat.completions.create(model="chat", messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                      temperature=0)
        assert r.usage.prompt_tokens > 1 and r.usage.completion_tokens >= 1
        r = c.completions.create(model="chat", prompt="hello", max_tokens=3, temperature=0)
        assert isinstance(r.choices[0].text, str) and r.usage.prompt_tokens >= 1
