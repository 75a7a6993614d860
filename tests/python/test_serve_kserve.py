"""`dinoml serve` over the Open Inference Protocol (KServe v2), driven by NVIDIA's tritonclient:
three models (FP32 dynamic batch; INT64 in/out; FP16 + BF16), JSON and binary tensor data,
metadata, the protocol's errors, a full queue (503), a deadline (504), /metrics and a graceful
SIGTERM. Results are checked against NumPy on the models' own weights. Loopback only."""
from __future__ import annotations

import concurrent.futures
import http.client
import json
import signal
import threading
import time

import numpy as np
import pytest

tritonclient_http = pytest.importorskip("tritonclient.http", reason="the serve tests need tritonclient[http]")
ml_dtypes = pytest.importorskip("ml_dtypes")
from tritonclient.utils import InferenceServerException  # noqa: E402

import dinoml as dml  # noqa: E402
from serve_harness import server_process, server_thread  # noqa: E402
from testkit import Gemm8, Linear  # noqa: E402

RNG = np.random.default_rng(5)
W = RNG.standard_normal((8, 6)).astype(np.float32)
B = RNG.standard_normal(6).astype(np.float32)
TABLE = RNG.standard_normal((32, 4)).astype(np.float32)
SLOW_W = (RNG.standard_normal((8, 512, 512)) / 512 ** 0.5).astype(np.float32)


class Embed(dml.Module):
    def __init__(self):
        self.table = dml.Parameter([32, 4])

    def forward(self, ids):
        e = dml.ops.embedding(ids, self.table)
        return {"emb": e, "top": dml.ops.argmax(e, axis=1)}


def slow_ref(x):
    for w in SLOW_W:
        x = np.maximum(x @ w, 0)
    return x


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    batch = dml.Dim("batch", min=1, max=4, buckets=(1, 4))
    n = dml.Dim("n", min=1, max=16, buckets=(16,))
    rows = dml.Dim("rows", min=1, max=4096, buckets=(1, 4096))

    def halves(h, b):
        return {"h2": h * 2, "b2": b * 2, "bf": dml.ops.cast(h, "float32")}

    specs = {
        "linear": dml.trace(Linear(), inputs={"x": dml.TensorSpec([batch, 8])}, constants={"weight": W, "bias": B},
                            name="linear"),
        "embed": dml.trace(Embed(), inputs={"ids": dml.TensorSpec([n], "int64")}, constants={"table": TABLE},
                           name="embed"),
        "halves": dml.trace(halves, inputs={"h": dml.TensorSpec([3], "float16"), "b": dml.TensorSpec([3], "bfloat16")},
                            name="halves"),
        "slow": dml.trace(Gemm8(), inputs={"x": dml.TensorSpec([rows, 512])},
                          constants={f"w{i}": SLOW_W[i] for i in range(8)}, name="slow"),
    }
    return {k: dml.compile(s, target="cpu", out=str(d / k)).path for k, s in specs.items()}


@pytest.fixture(scope="module")
def server(artifacts):
    models = [artifacts["linear"], f"ids={artifacts['embed']}", artifacts["halves"], artifacts["slow"]]
    with server_thread(models, threads=2, max_queue=16, max_body_bytes=4 << 20) as port:
        yield port


@pytest.fixture
def client(server):
    return tritonclient_http.InferenceServerClient(url=f"127.0.0.1:{server}", concurrency=8)


def infer_input(name, arr, datatype, binary):
    i = tritonclient_http.InferInput(name, list(arr.shape), datatype)
    i.set_data_from_numpy(arr, binary_data=binary)
    return i


def out(name, binary):
    return tritonclient_http.InferRequestedOutput(name, binary_data=binary)


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_three_models_correct(client, binary):
    for b in (1, 3, 4):
        x = RNG.standard_normal((b, 8)).astype(np.float32)
        r = client.infer("linear", [infer_input("x", x, "FP32", binary)], outputs=[out("y", binary)])
        np.testing.assert_allclose(r.as_numpy("y"), x @ W + B, rtol=1e-5, atol=1e-5)

    ids = np.array([3, 31, 0, 7, 7], np.int64)
    r = client.infer("ids", [infer_input("ids", ids, "INT64", binary)], outputs=[out("emb", binary), out("top", binary)])
    np.testing.assert_array_equal(r.as_numpy("emb"), TABLE[ids])
    assert r.as_numpy("top").dtype == np.int64
    np.testing.assert_array_equal(r.as_numpy("top"), np.argmax(TABLE[ids], axis=1))

    h = np.array([0.5, 1.5, -2.0], np.float16)
    b16 = np.array([1.0, 1.0078125, -3.0], ml_dtypes.bfloat16)  # 1 + 2^-7: exact in bf16
    # BF16 travels binary only (tritonclient's rule); FP16 follows the parametrization.
    r = client.infer("halves", [infer_input("h", h, "FP16", binary), infer_input("b", b16, "BF16", True)],
                     outputs=[out("h2", binary), out("b2", True), out("bf", binary)])
    np.testing.assert_array_equal(r.as_numpy("h2"), h * 2)
    np.testing.assert_array_equal(r.as_numpy("b2").astype(np.float32), [2.0, 2.015625, -6.0])
    np.testing.assert_array_equal(r.as_numpy("bf"), h.astype(np.float32))


def test_all_outputs_by_default_and_request_id(client):
    ids = np.array([1, 2], np.int64)
    r = client.infer("ids", [infer_input("ids", ids, "INT64", False)], request_id="req-7")
    assert r.get_response()["id"] == "req-7"
    assert {o["name"] for o in r.get_response()["outputs"]} == {"emb", "top"}
    np.testing.assert_array_equal(r.as_numpy("emb"), TABLE[ids])


def test_concurrent_requests(server):
    # One client per thread: tritonclient's InferenceServerClient is not thread safe (its gevent
    # connection pool belongs to the thread that first uses it; shared by 8 threads, a request
    # now and then failed with "greenlet.error: Cannot switch to a different thread").
    local = threading.local()

    def infer(x):
        if not hasattr(local, "client"):
            local.client = tritonclient_http.InferenceServerClient(url=f"127.0.0.1:{server}")
        return local.client.infer("linear", [infer_input("x", x, "FP32", True)]).as_numpy("y")

    xs = [RNG.standard_normal((2, 8)).astype(np.float32) for _ in range(32)]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        res = list(ex.map(infer, xs))
    for x, y in zip(xs, res):
        np.testing.assert_allclose(y, x @ W + B, rtol=1e-5, atol=1e-5)


def test_metadata_and_health(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("linear") and client.is_model_ready("linear", "1")
    meta = client.get_server_metadata()
    assert meta["name"] == "dinoml" and "binary_tensor_data" in meta["extensions"]
    m = client.get_model_metadata("linear")
    assert m["name"] == "linear" and m["versions"] == ["1"] and m["platform"] == "dinoml_cpu"
    assert m["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 8]}]
    assert m["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 6]}]
    m = client.get_model_metadata("halves", "1")
    assert [(t["name"], t["datatype"]) for t in m["inputs"]] == [("h", "FP16"), ("b", "BF16")]
    assert {t["name"]: t["datatype"] for t in m["outputs"]} == {"h2": "FP16", "b2": "BF16", "bf": "FP32"}
    assert client.get_model_metadata("ids")["inputs"][0] == {"name": "ids", "datatype": "INT64", "shape": [-1]}
    assert {m["name"] for m in client.get_model_repository_index()} == {"linear", "ids", "halves", "slow"}


def expect_error(status, match, fn, *args, **kw):
    with pytest.raises(InferenceServerException) as e:
        fn(*args, **kw)
    assert e.value.status() == str(status), e.value
    assert match in e.value.message(), e.value.message()
    return e.value.message()


def test_errors_through_tritonclient(client):
    x = np.zeros((2, 8), np.float32)
    expect_error(404, "unknown model 'nope'; models served: halves, ids, linear, slow", client.infer, "nope",
                 [infer_input("x", x, "FP32", True)])
    expect_error(404, "model 'linear' has no version '2'", client.get_model_metadata, "linear", "2")
    expect_error(400, "input 'x' has shape [2, 7] but the model expects [?, 8] (axis 1 must be 8)",
                 client.infer, "linear", [infer_input("x", np.zeros((2, 7), np.float32), "FP32", True)])
    expect_error(400, "input 'x' has shape [5, 8]: axis 0 is 5, outside the model's range [1, 4]",
                 client.infer, "linear", [infer_input("x", np.zeros((5, 8), np.float32), "FP32", False)])
    expect_error(400, "input 'x' has datatype INT64 but model 'linear' expects FP32",
                 client.infer, "linear", [infer_input("x", np.zeros((2, 8), np.int64), "INT64", True)])
    expect_error(400, "model 'linear' has no input 'z'; its inputs: x (FP32)",
                 client.infer, "linear", [infer_input("z", x, "FP32", True)])
    expect_error(400, "model 'linear' has no output \"q\"", client.infer, "linear",
                 [infer_input("x", x, "FP32", True)], outputs=[out("q", True)])
    # Over the 4 MiB body limit: 2048 x 512 float32 = 4 MiB of tensor + the JSON header.
    big = np.zeros((2048, 512), np.float32)
    expect_error(413, "exceeds the server's limit of 4194304 bytes", client.infer, "slow",
                 [infer_input("x", big, "FP32", True)])


def raw_post(port, path, body: bytes, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", path, body=body, headers=headers or {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


@pytest.mark.parametrize("body,status,match", [
    (b'{"inputs": [', 400, "malformed JSON in the request body"),
    (b'[1, 2]', 400, "the request must be a JSON object"),
    (b'{"inputs": []}', 400, "the request needs \\\"inputs\\\""),
    (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 8], "data": [1, 2]}]}', 400,
     "input 'x'.data has 2 elements but shape [1, 8] needs 8"),
    (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 8], "data": ["a","b","c","d","e","f","g","h"]}]}',
     400, "input 'x'.data must hold numbers for datatype FP32"),
    (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, -8], "data": []}]}', 400, "negative dimension"),
    (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 8], "parameters": {"binary_data_size": 32}}]}',
     400, "the body ends 32 bytes short of its binary data"),
])
def test_malformed_requests(server, body, status, match):
    got, data = raw_post(server, "/v2/models/linear/infer", body)
    assert got == status, data
    assert match in json.loads(data)["error"].replace('"', '\\"') or match in json.loads(data)["error"], data


def test_binary_header_length_errors(server):
    got, data = raw_post(server, "/v2/models/linear/infer", b'{"inputs": []}',
                         {"Inference-Header-Content-Length": "999", "Content-Type": "application/octet-stream"})
    assert got == 400 and "Inference-Header-Content-Length is 999 but the body has 14 bytes" in json.loads(data)["error"]
    head = json.dumps({"inputs": [{"name": "ids", "datatype": "INT64", "shape": [2],
                                   "parameters": {"binary_data_size": 16}}]}).encode()
    got, data = raw_post(server, "/v2/models/ids/infer", head + np.array([1, 2], np.int64).tobytes() + b"xx",
                         {"Inference-Header-Content-Length": str(len(head))})
    assert got == 400 and "2 bytes of binary data that no input claims" in json.loads(data)["error"]
    got, data = raw_post(server, "/v2/models/ids/infer", head + np.array([1, 2], np.int64).tobytes(),
                         {"Inference-Header-Content-Length": str(len(head))})
    assert got == 200, data
    assert json.loads(data)["outputs"][1]["data"] == np.argmax(TABLE[[1, 2]], axis=1).tolist()


def test_unknown_route_and_llm_hint(server):
    got, data = raw_post(server, "/v2/nothing", b"{}")
    assert got == 404 and json.loads(data) == {"error": "no route POST /v2/nothing"}


def test_queue_full_gives_503_and_deadline_504(artifacts):
    x = RNG.standard_normal((1024, 512)).astype(np.float32)
    with server_thread([artifacts["slow"]], threads=1, max_queue=1) as port:
        c = tritonclient_http.InferenceServerClient(url=f"127.0.0.1:{port}", concurrency=8)
        inp = [infer_input("x", x, "FP32", True)]
        reqs = [c.async_infer("slow", inp) for _ in range(6)]
        ok, full = 0, []
        for r in reqs:
            try:
                y = r.get_result().as_numpy("y")
                np.testing.assert_allclose(y, slow_ref(x), rtol=1e-3, atol=1e-3)
                ok += 1
            except InferenceServerException as e:
                assert e.status() == "503", e
                full.append(e.message())
        # 1 session + 1 queue place: at most two of six simultaneous requests are admitted at once.
        assert ok >= 2 and full, (ok, full)
        assert "model 'slow' is busy" in full[0] and "--max-queue 1" in full[0]
        # A deadline shorter than one run: 504, whether it expires in the queue or while running.
        msg = expect_error(504, "deadline passed", c.infer, "slow", inp, timeout=1000)
        assert "model 'slow'" in msg
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        assert 'dinoml_requests_total{model="slow",protocol="kserve",status="503"}' in text
        assert 'dinoml_requests_total{model="slow",protocol="kserve",status="200"}' in text
        assert 'dinoml_request_duration_seconds_bucket{le="+Inf",model="slow",protocol="kserve"}' in text
        assert 'dinoml_queue_depth{model="slow"}' in text


def test_graceful_shutdown_on_sigterm(artifacts):
    x = RNG.standard_normal((1024, 512)).astype(np.float32)
    with server_process([artifacts["slow"], "--threads", "1"]) as (proc, port):
        result = {}

        def call():  # the client is made and used on this thread only (it is not thread safe)
            try:
                c = tritonclient_http.InferenceServerClient(url=f"127.0.0.1:{port}")
                result["y"] = c.infer("slow", [infer_input("x", x, "FP32", True)]).as_numpy("y")
            except Exception as e:  # reported below
                result["error"] = e

        t = threading.Thread(target=call)
        t.start()
        # Wait until the request runs, then ask the server to stop.
        end, running = time.monotonic() + 20, False
        while not running and time.monotonic() < end:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/metrics")
            running = 'dinoml_requests_running{model="slow"} 1.0' in conn.getresponse().read().decode()
        assert running, "the request never showed as running"
        proc.send_signal(signal.SIGTERM)
        t.join(60)
        assert "error" not in result, result.get("error")
        np.testing.assert_allclose(result["y"], slow_ref(x), rtol=1e-3, atol=1e-3)  # in-flight request finished
        assert proc.wait(30) == 0
        assert "dinoml serve: stopped" in proc.stdout.read()
        with pytest.raises(OSError):  # no longer accepting
            http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/v2/health/live")
