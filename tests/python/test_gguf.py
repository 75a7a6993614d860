"""GGUF constants end to end (issue 6): a GGUF file written here by an independent pure-Python
writer (the format spec, struct-packed), parameters bound with dml.gguf_constant under both
policies, compiled for the CPU and run.

Oracles: NumPy decodes the q8_0 / q4_0 blocks from the format definition (x = d·q, x = d·(q-8));
outputs are compared with float64 matmuls on those weights. The `keep` policy runs the int8 path
(activations quantized to 8-bit blocks) or the dequantize-tile path, whichever the kernel picks:
its tolerance is the activation-quantization bound Σ_blocks max|x_block|/254 · Σ|w_block| (+ fp32
slack), computed per element; `dequantize` is an fp32 GEMM (1e-4 relative).
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import dinoml as dml

RNG = np.random.default_rng(6)
K, N1, N2 = 128, 40, 24

# ---- a minimal independent GGUF writer ------------------------------------------------------
T_U32, T_F32, T_STR, T_ARR = 4, 6, 8, 9
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8


def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kv, tensors, alignment=32):
    """kv: [(key, type, value)]; tensors: [(name, ggml_type, ne list, raw bytes)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for key, t, v in kv:
        out += _s(key) + struct.pack("<I", t)
        if t == T_U32:
            out += struct.pack("<I", v)
        elif t == T_F32:
            out += struct.pack("<f", v)
        elif t == T_STR:
            out += _s(v)
        elif t == T_ARR:
            out += struct.pack("<IQ", T_STR, len(v)) + b"".join(_s(x) for x in v)
    offset = 0
    offsets = []
    for name, gt, ne, raw in tensors:
        offsets.append(offset)
        out += _s(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", gt, offset)
        offset += (len(raw) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for (name, gt, ne, raw), off in zip(tensors, offsets):
        out += raw + b"\0" * (-len(raw) % alignment)
    with open(path, "wb") as f:
        f.write(out)


def q8_0_blocks(n, k):
    """Random q8_0 rows [n, k]: raw bytes and the float32 weights they encode."""
    nb = k // 32
    d = (RNG.uniform(0.002, 0.01, (n, nb))).astype(np.float16)
    q = RNG.integers(-127, 128, (n, nb, 32), dtype=np.int8)
    raw = b"".join(d[i, b].tobytes() + q[i, b].tobytes() for i in range(n) for b in range(nb))
    w = (q.astype(np.float32) * d.astype(np.float32)[..., None]).reshape(n, k)
    return raw, w


def q4_0_blocks(n, k):
    nb = k // 32
    d = (RNG.uniform(0.005, 0.03, (n, nb))).astype(np.float16)
    nib = RNG.integers(0, 16, (n, nb, 32), dtype=np.uint8)
    packed = (nib[..., :16] | (nib[..., 16:] << 4)).astype(np.uint8)
    raw = b"".join(d[i, b].tobytes() + packed[i, b].tobytes() for i in range(n) for b in range(nb))
    w = ((nib.astype(np.int32) - 8).astype(np.float32) * d.astype(np.float32)[..., None]).reshape(n, k)
    return raw, w


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    raw8, w8 = q8_0_blocks(N1, K)
    raw4, w4 = q4_0_blocks(N2, K)
    bias = RNG.standard_normal(N1).astype(np.float32)
    wh = (RNG.standard_normal((N2, K)) * 0.05).astype(np.float16)
    kv = [("general.architecture", T_STR, "llama"), ("llama.embedding_length", T_U32, K),
          ("test.eps", T_F32, 1e-5), ("tokenizer.ggml.tokens", T_ARR, ["<s>", "a", "b"])]
    tensors = [("w8", GGML_Q8_0, [K, N1], raw8), ("w4", GGML_Q4_0, [K, N2], raw4),
               ("bias", GGML_F32, [N1], bias.tobytes()), ("wh", GGML_F16, [K, N2], wh.tobytes())]
    write_gguf(path, kv, tensors)
    return path, {"w8": w8, "w4": w4, "bias": bias, "wh": wh.astype(np.float32)}


class TwoHeads(dml.Module):
    def __init__(self, second="w4"):
        self.w8 = dml.Parameter([N1, K])
        self.bias = dml.Parameter([N1])
        self.w2 = dml.Parameter([N2, K])

    def forward(self, x):
        y = dml.ops.gemm_rcr_bias(x, self.w8, self.bias)
        z = dml.ops.gemm_rcr(x, self.w2)
        return dml.ops.output(y, "y"), dml.ops.output(z, "z")


def _spec(path, policy, second="w4"):
    m = dml.Dim("M", min=1, max=64, typical=8, buckets=(4, 64))
    consts = {"w8": dml.gguf_constant(path, "w8", policy), "bias": dml.gguf_constant(path, "bias"),
              "w2": dml.gguf_constant(path, second, policy if second != "wh" else "dequantize")}
    return dml.trace(TwoHeads(), inputs={"x": dml.TensorSpec([m, K])}, constants=consts, name="gguf_heads")


def _int8_bound(x, w):
    """Per output element: Σ_blocks max|x_b|/254 · Σ|w_b| (activation rounding) for blocks of 32."""
    xb = np.abs(x.reshape(x.shape[0], -1, 32)).max(axis=2) / 254.0          # [M, nb]
    wb = np.abs(w.reshape(w.shape[0], -1, 32)).sum(axis=2)                   # [N, nb]
    return xb @ wb.T


def _check(got, x, w, bias, policy):
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + (0 if bias is None else bias)
    mag = np.abs(x.astype(np.float64)) @ np.abs(w.T.astype(np.float64))
    tol = 2e-5 * mag + 1e-5
    if policy == "keep":
        tol = tol + _int8_bound(x.astype(np.float64), w.astype(np.float64)) * 1.001
    err = np.abs(got - ref)
    assert (err <= tol).all(), f"max err {err.max()} (tol at that element {tol.flat[err.argmax()]})"


def test_read_metadata_and_tensors(gguf_file):
    path, _ = gguf_file
    info = dml.gguf.read(path)
    assert info["version"] == 3 and info["alignment"] == 32
    assert info["metadata"]["general.architecture"] == "llama"
    assert info["metadata"]["llama.embedding_length"] == K
    assert info["metadata"]["tokenizer.ggml.tokens"] == ["<s>", "a", "b"]
    assert info["metadata_types"]["test.eps"] == "f32"
    t = {d["name"]: d for d in info["tensors"]}
    assert t["w8"]["type"] == "q8_0" and t["w8"]["shape"] == [N1, K] and t["w8"]["ne"] == [K, N1]
    assert t["w4"]["nbytes"] == N2 * K // 32 * 18


def test_dequantized_tensors_match_numpy_decoding(gguf_file):
    path, w = gguf_file
    for name in ("w8", "w4", "bias", "wh"):
        np.testing.assert_array_equal(dml.gguf.tensor(path, name), w[name])


@pytest.mark.parametrize("policy", ["keep", "dequantize"])
def test_compiled_gemm_with_gguf_weights(gguf_file, compile_and_run, policy, tmp_path):
    path, w = gguf_file
    spec = _spec(path, policy)
    xs = [RNG.standard_normal((m, K)).astype(np.float32) for m in (1, 3, 17, 64)]
    outs = compile_and_run(spec, [{"x": x} for x in xs])
    for x, o in zip(xs, outs):
        _check(o["y"], x, w["w8"], w["bias"], policy)
        _check(o["z"], x, w["w4"], None, policy)
    # The reference interpreter reads kept blocks through the exact dequantization.
    ref = dml.reference(spec, {"x": xs[2]})
    _check(ref["y"], xs[2], w["w8"], w["bias"], "dequantize")


def test_artifact_records_policy_and_blocks(gguf_file, tmp_path):
    path, _ = gguf_file
    art = dml.compile(_spec(path, "auto", second="wh"), target="cpu", out=str(tmp_path / "a"))
    g = json.load(open(os.path.join(art.path, "graph.dinoir.json")))
    t = {x["name"]: x for x in g["tensors"]}
    assert t["w8"]["quant"] == {"type": "q8_0", "block_size": 32, "block_bytes": 34}
    assert t["w8"]["source"] == {"format": "gguf", "tensor": "w8", "type": "q8_0", "policy": "keep"}
    assert t["w8"]["constant"]["nbytes"] == N1 * K // 32 * 34 and t["w8"]["dtype"] == "float32"
    assert "quant" not in t["w2"] and t["w2"]["source"]["policy"] == "dequantize" and t["w2"]["source"]["type"] == "f16"
    assert t["w2"]["constant"]["nbytes"] == N2 * K * 4
    assert t["bias"]["source"]["policy"] == "dequantize"
    km = json.load(open(os.path.join(art.path, "kernel_manifest.json")))
    text = json.dumps(km)
    assert "dml.qgemm" in text
    # Constant q8_0 / q4_0 weights default to the tiles repacked at module init.
    q = [e for e in km["kernels"] if e.get("family") == "qgemm"] if isinstance(km, dict) and "kernels" in km else \
        [e for e in km if isinstance(e, dict) and e.get("family") == "qgemm"]
    assert q and all(e["selected"] == "dml.qgemm.repacked" for e in q), q
    # The runtime's verifier accepts the quantized slot sizes.
    assert dml.runtime.load(art.path) is not None


def test_errors_name_the_problem(gguf_file):
    path, _ = gguf_file
    m = dml.Dim("M", min=1, max=8)

    def trace(consts, model=None):
        return dml.trace(model or TwoHeads(), inputs={"x": dml.TensorSpec([m, K])}, constants=consts)

    base = {"w8": dml.gguf_constant(path, "w8"), "bias": dml.gguf_constant(path, "bias"),
            "w2": dml.gguf_constant(path, "w4")}
    with pytest.raises(dml.IrError, match="tensor 'nope' not found"):
        trace({**base, "w2": dml.gguf_constant(path, "nope")})
    with pytest.raises(dml.IrError, match=r"has shape \[24, 128\].*declared \[40, 128\]"):
        trace({**base, "w8": dml.gguf_constant(path, "w4")})
    with pytest.raises(dml.IrError, match="policy keep needs a block-quantized type"):
        trace({**base, "w2": dml.gguf_constant(path, "wh", "keep")})
    with pytest.raises(ValueError, match="policy must be one of"):
        dml.gguf_constant(path, "w8", "squeeze")
    with pytest.raises(dml.IrError, match="not a GGUF file"):
        bad = os.path.join(os.path.dirname(path), "bad.gguf")
        open(bad, "wb").write(b"NOPE" + b"\0" * 40)
        trace({**base, "w2": dml.gguf_constant(bad, "w4")})

    class Misuse(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([N1, K])

        def forward(self, x):
            return dml.ops.output(dml.ops.relu(self.w), "y")

    with pytest.raises((dml.IrError, dml.ShapeError), match="only gemm_rcr"):
        trace({"w": dml.gguf_constant(path, "w8", "keep")}, Misuse())


def test_gguf_info_cli(gguf_file):
    path, _ = gguf_file
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "..", "python"),
                                                        os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "dinoml", "gguf-info", path], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "general.architecture" in out.stdout and "q8_0" in out.stdout and "ne=[128 x 40]" in out.stdout
    js = subprocess.run([sys.executable, "-m", "dinoml", "gguf-info", "--json", path], capture_output=True, text=True,
                        env=env)
    info = json.loads(js.stdout)
    assert [t["name"] for t in info["tensors"]] == ["w8", "w4", "bias", "wh"]
    bad = subprocess.run([sys.executable, "-m", "dinoml", "gguf-info", path + ".missing"], capture_output=True,
                         text=True, env=env)
    assert bad.returncode != 0 and "cannot open GGUF file" in bad.stderr


def test_profiler_times_the_qgemm_candidates(gguf_file, tmp_path):
    path, w = gguf_file
    art = dml.compile(_spec(path, "keep"), target="cpu", out=str(tmp_path / "p"), profile=True)
    plan = json.load(open(os.path.join(art.path, "execution_plan.json")))
    text = json.dumps(plan)
    for name in ("dml.qgemm.auto", "dml.qgemm.int8dot", "dml.qgemm.dequant_tile", "dml.qgemm.repacked",
                 "dml.qgemm.repacked.st"):
        assert name in text
    # The profiled artifact still computes the right thing, whichever kernel won each bucket.
    session = dml.runtime.load(art.path).create_session()
    for m in (2, 40):
        x = RNG.standard_normal((m, K)).astype(np.float32)
        o = session.run_numpy({"x": x})
        _check(o["y"], x, w["w8"], w["bias"], "keep")
        _check(o["z"], x, w["w4"], None, "keep")


def test_type_without_repacked_layout_keeps_the_in_place_kernels(tmp_path):
    """q4_1 has no repacked tile layout: its GEMM keeps dml.qgemm.auto (blocks read in place), and
    the repacked candidates are not offered for it; q8_0 beside it still defaults to repacked."""
    n, k = 19, 96
    nb = k // 32
    d = RNG.uniform(0.005, 0.03, (n, nb)).astype(np.float16)
    m = RNG.uniform(-0.1, 0.1, (n, nb)).astype(np.float16)
    nib = RNG.integers(0, 16, (n, nb, 32), dtype=np.uint8)
    packed = (nib[..., :16] | (nib[..., 16:] << 4)).astype(np.uint8)
    raw = b"".join(d[i, b].tobytes() + m[i, b].tobytes() + packed[i, b].tobytes() for i in range(n) for b in range(nb))
    w41 = (nib.astype(np.float32) * d.astype(np.float32)[..., None] + m.astype(np.float32)[..., None]).reshape(n, k)
    raw8, w8 = q8_0_blocks(N1, k)
    path = str(tmp_path / "q41.gguf")
    write_gguf(path, [("general.architecture", T_STR, "llama")],
               [("w8", GGML_Q8_0, [k, N1], raw8), ("w41", 3, [k, n], raw),
                ("bias", GGML_F32, [N1], np.zeros(N1, np.float32).tobytes())])

    class Heads(dml.Module):
        def __init__(self):
            self.w8 = dml.Parameter([N1, k])
            self.bias = dml.Parameter([N1])
            self.w2 = dml.Parameter([n, k])

        def forward(self, x):
            return (dml.ops.output(dml.ops.gemm_rcr_bias(x, self.w8, self.bias), "y"),
                    dml.ops.output(dml.ops.gemm_rcr(x, self.w2), "z"))

    dim = dml.Dim("M", min=1, max=8)
    spec = dml.trace(Heads(), inputs={"x": dml.TensorSpec([dim, k])}, name="q41",
                     constants={"w8": dml.gguf_constant(path, "w8", "keep"), "bias": dml.gguf_constant(path, "bias"),
                                "w2": dml.gguf_constant(path, "w41", "keep")})
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "a"))
    km = json.load(open(os.path.join(art.path, "kernel_manifest.json")))
    entries = km["kernels"] if isinstance(km, dict) and "kernels" in km else km
    q = {e["selected"]: e["candidates"] for e in entries if isinstance(e, dict) and e.get("family") == "qgemm"}
    assert set(q) == {"dml.qgemm.repacked", "dml.qgemm.auto"}, q
    assert not any("repacked" in c for c in q["dml.qgemm.auto"])
    session = dml.runtime.load(art.path).create_session()
    for rows in (1, 3, 8):
        x = RNG.standard_normal((rows, k)).astype(np.float32)
        o = session.run_numpy({"x": x})
        _check(o["y"], x, w8, np.zeros(N1, np.float32), "keep")
        _check(o["z"], x, w41, None, "keep")
