"""Fuzzes `dinoml serve`'s request handling with hypothesis (not in CI: run for minutes, niced).

    python fuzz/serve_fuzz.py --seconds 600

Two layers, alternating until the time is spent:
1. the KServe v2 parser (dinoml.serve.protocol.parse_infer_request) on generated requests: JSON
   documents shaped like infer requests with wrong types, shapes, datatypes, sizes and binary
   tails, plus byte-level mutations of valid requests. Contract: it returns an InferRequest or
   raises ProtocolError; any other exception is a bug.
2. a live server (uvicorn on loopback, a small FP32 model and a tiny llama) receiving the same
   bodies over HTTP on /v2/models/m/infer and random JSON on /v1/completions and
   /v1/chat/completions. Contract: every answer is a 2xx/4xx/503/504 with a JSON error body where
   it is an error, never a 5xx other than those, and the server keeps answering /v2/health/live.

Prints the counts per status and exits 1 on the first contract violation (with the input).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "tests", "python"),
                os.path.join(ROOT, "examples", "llama")]

import dinoml as dml  # noqa: E402
from dinoml.serve.protocol import ProtocolError, parse_infer_request, signature_of  # noqa: E402

DATATYPES = ["FP32", "FP16", "BF16", "INT64", "INT32", "INT8", "UINT8", "BOOL", "BYTES", "FP64", "x", ""]
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                      st.text(max_size=8))
json_any = st.recursive(json_leaf, lambda c: st.one_of(st.lists(c, max_size=6),
                                                       st.dictionaries(st.text(max_size=8), c, max_size=5)),
                        max_leaves=30)
shape = st.one_of(st.lists(st.integers(-2, 6), max_size=4), json_any)
data = st.one_of(st.lists(st.one_of(st.floats(allow_nan=False, width=32), st.integers(-300, 300), st.booleans()),
                          max_size=40), st.lists(st.lists(st.integers(-5, 5), max_size=8), max_size=6), json_any)
params = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "binary_data_size": st.one_of(st.integers(-4, 200), json_leaf),
    "binary_data": st.one_of(st.booleans(), json_leaf)}), json_any)
tensor = st.fixed_dictionaries({}, optional={"name": st.one_of(st.sampled_from(["x", "y", "z"]), json_leaf),
                                             "datatype": st.one_of(st.sampled_from(DATATYPES), json_leaf),
                                             "shape": shape, "data": data, "parameters": params})
request = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.text(max_size=6), json_leaf), "inputs": st.one_of(st.lists(tensor, max_size=3), json_any),
    "outputs": st.one_of(st.lists(tensor, max_size=3), json_any),
    "parameters": st.one_of(st.fixed_dictionaries({}, optional={
        "binary_data_output": st.one_of(st.booleans(), json_leaf),
        "timeout": st.one_of(st.integers(-5, 10**7), json_leaf)}), json_any)})


def encode(req, tail: bytes, use_header: bool):
    head = json.dumps(req).encode()
    return head + tail, (str(len(head)) if use_header else None)


def mutate(body: bytes, ops) -> bytes:
    b = bytearray(body)
    for pos, kind, byte in ops:
        if not b:
            break
        i = pos % len(b)
        if kind == 0:
            b[i] = byte
        elif kind == 1:
            del b[i]
        else:
            b.insert(i, byte)
    return bytes(b)


class Fuzz:
    def __init__(self, art: str, port: int):
        m = dml.runtime.load(art)
        self.ins = [signature_of(t) for t in m.inputs]
        self.outs = [signature_of(t) for t in m.outputs]
        self.port = port
        self.status = Counter()
        self.parsed = Counter()

    def parse(self, body: bytes, header):
        try:
            parse_infer_request(body, header, self.ins, self.outs, "m")
            self.parsed["ok"] += 1
        except ProtocolError as e:
            assert 400 <= e.status < 500, e.status
            self.parsed[e.status] += 1

    def post(self, path: str, body: bytes, header=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = {"Content-Type": "application/json"}
        if header is not None:
            h["Inference-Header-Content-Length"] = header
        c.request("POST", path, body=body, headers=h)
        r = c.getresponse()
        raw = r.read()
        c.close()
        self.status[(path, r.status)] += 1
        assert r.status < 500 or r.status in (503, 504), (r.status, raw[:300])
        if r.status >= 400:
            assert "error" in json.loads(raw), raw[:300]


def run(fz: Fuzz, seconds: float) -> None:
    end = time.monotonic() + seconds
    cfg = settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))

    @cfg
    @given(request, st.binary(max_size=64), st.booleans())
    def structured(req, tail, use_header):
        body, header = encode(req, tail, use_header)
        fz.parse(body, header)
        fz.post("/v2/models/m/infer", body, header)

    valid = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 8],
                                    "parameters": {"binary_data_size": 32}}],
                        "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    tail = np.arange(8, dtype=np.float32).tobytes()

    @cfg
    @given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 2), st.integers(0, 255)), min_size=1,
                    max_size=8), st.booleans())
    def mutated(ops, use_header):
        body = mutate(valid + tail, ops)
        header = str(len(valid)) if use_header else None
        fz.parse(body, header)
        fz.post("/v2/models/m/infer", body, header)

    openai_req = st.fixed_dictionaries({}, optional={
        "model": st.one_of(st.sampled_from(["llm", "m", "x"]), json_leaf),
        "prompt": st.one_of(st.lists(st.integers(-3, 1100), max_size=12), st.text(max_size=10), json_any),
        "messages": st.one_of(st.lists(st.fixed_dictionaries({}, optional={
            "role": st.one_of(st.sampled_from(["user", "system", "assistant", "tool"]), json_leaf),
            "content": st.one_of(st.text(max_size=10), json_any)}), max_size=3), json_any),
        "max_tokens": st.one_of(st.integers(-2, 80), json_leaf), "temperature": st.one_of(st.floats(-1, 3), json_leaf),
        "top_p": st.one_of(st.floats(-0.5, 1.5), json_leaf), "top_k": st.one_of(st.integers(-2, 50), json_leaf),
        "n": st.one_of(st.integers(0, 3), json_leaf), "stream": st.one_of(st.booleans(), json_leaf),
        "stop": st.one_of(st.text(max_size=4), st.lists(st.text(max_size=4), max_size=5), json_leaf),
        "seed": st.one_of(st.integers(-2**70, 2**70), json_leaf)})

    # Mostly valid completions: every sampling parameter at and around its edges, streams too.
    near_valid = st.fixed_dictionaries({
        "model": st.just("llm"), "prompt": st.lists(st.integers(0, 999), min_size=1, max_size=20),
        "max_tokens": st.integers(1, 12)}, optional={
        "temperature": st.floats(0, 2), "top_p": st.floats(0, 1), "top_k": st.integers(0, 400),
        "min_p": st.floats(0, 1), "repetition_penalty": st.floats(0.01, 100), "seed": st.integers(0, 2**64),
        "frequency_penalty": st.floats(-2, 2), "presence_penalty": st.floats(-2, 2), "stream": st.booleans(),
        "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()})})

    @cfg
    @given(st.one_of(openai_req, near_valid), st.sampled_from(["/v1/completions", "/v1/chat/completions"]))
    def openai_api(req, path):
        fz.post(path, json.dumps(req).encode())

    rounds = 0
    while time.monotonic() < end:
        for t in (structured, mutated, openai_api):
            t()
        rounds += 1
        c = http.client.HTTPConnection("127.0.0.1", fz.port, timeout=10)
        c.request("GET", "/v2/health/live")
        assert c.getresponse().status == 200
    print(f"rounds: {rounds}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args()
    from serve_harness import server_thread
    import make_random_gguf
    import model as llama_model

    tmp = tempfile.mkdtemp(prefix="dinoml-serve-fuzz-")
    batch = dml.Dim("batch", min=1, max=4, buckets=(1, 4))

    class Linear(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([8, 6])

        def forward(self, x):
            return dml.ops.output(dml.ops.gemm_rrr(x, self.w), "y")

    art = dml.compile(dml.trace(Linear(), inputs={"x": dml.TensorSpec([batch, 8])},
                                constants={"w": np.ones((8, 6), np.float32)}, name="m"),
                      target="cpu", out=os.path.join(tmp, "m")).path
    gguf = os.path.join(tmp, "tiny.gguf")
    make_random_gguf.make(gguf, "tiny", "f32", seed=1, n_layers=1, dim=32, n_heads=2, n_kv_heads=1, ffn=64)
    llm = dml.compile(llama_model.build_spec(gguf, ctx=32, max_seq=16), target="cpu", out=os.path.join(tmp, "llm")).path
    t0 = time.monotonic()
    with server_thread([f"m={art}", f"llm={llm}"], threads=1, max_queue=4, max_body_bytes=1 << 16,
                       timeout_ms=5000) as port:
        fz = Fuzz(art, port)
        try:
            run(fz, a.seconds)
        except Exception:
            traceback.print_exc()
            print("CONTRACT VIOLATION", file=sys.stderr)
            return 1
    print(json.dumps({"seconds": round(time.monotonic() - t0, 1), "parser": {str(k): v for k, v in fz.parsed.items()},
                      "http": {f"{p} {s}": n for (p, s), n in sorted(fz.status.items())}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
