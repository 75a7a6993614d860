"""`embedding` over a table kept as GGUF blocks (issue 39, item 3: quantized token embedding).

The table is a [V, D] float32 constant stored as q4_0 / q8_0 / q4_K / q6_K blocks (gguf_constant
policy keep); the CPU kernel dequantizes only the rows the ids select. Oracles: the reference
interpreter (which reads a quantized constant as its exact dequantization) and dml.gguf.tensor (the
same dequantization, ggml's); both must equal the compiled rows bit for bit. The same constant also
feeds gemm_rcr as b (a tied LM head): one copy of the blocks serves both.
"""
import json
import os
import shutil

import numpy as np
import pytest

import dinoml as dml

V = 37
DIMS = {"q4_0": 64, "q8_0": 96, "q4_K": 256, "q6_K": 512}  # whole blocks per row
BLOCK = {"q4_0": (32, 18), "q8_0": (32, 34), "q4_K": (256, 144), "q6_K": (256, 210)}
RNG = np.random.default_rng(39)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("qemb") / "tables.gguf")
    tensors = [(f"t_{q}", RNG.standard_normal((V, d)).astype(np.float32), q) for q, d in DIMS.items()]
    dml.gguf.write(path, [("general.architecture", "str", "t")], tensors)
    return path


class TiedTable(dml.Module):
    def __init__(self, d):
        self.table = dml.Parameter([V, d])

    def forward(self, ids, x):
        return {"rows": dml.ops.embedding(ids, self.table), "logits": dml.ops.gemm_rcr(x, self.table)}


def _spec(path, qtype, index_dtype="int64", policy="keep"):
    d = DIMS[qtype]
    t = dml.Dim("T", min=1, max=32, buckets=(1, 8, 32))
    return dml.trace(TiedTable(d), inputs={"ids": dml.TensorSpec([t], index_dtype), "x": dml.TensorSpec([2, d])},
                     constants={"table": dml.gguf_constant(path, f"t_{qtype}", policy)}, name=f"emb_{qtype}")


@pytest.mark.parametrize("qtype", sorted(DIMS))
def test_quantized_embedding_equals_reference(tables, qtype, tmp_path):
    d = DIMS[qtype]
    bs, bb = BLOCK[qtype]
    spec = _spec(tables, qtype)
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "a"))
    # The table stays blocks (once, though the embedding and the GEMM both read it).
    g = json.load(open(os.path.join(art.path, "graph.dinoir.json")))
    quant = [t for t in g["tensors"] if "quant" in t]
    assert len(quant) == 1 and quant[0]["quant"]["type"] == qtype
    assert quant[0]["constant"]["nbytes"] == V * (d // bs) * bb
    emb = [k for k in art.kernel_manifest if k["op"] == "embedding"]
    assert [k["selected"] for k in emb] == ["dml_cpu_embedding_quant.dequantize_rows"]
    dense = dml.gguf.tensor(tables, f"t_{qtype}")
    session = dml.runtime.load(art.path).create_session()
    x = RNG.standard_normal((2, d)).astype(np.float32)
    for n in (1, 5, 8, 32):
        ids = RNG.integers(0, V, n).astype(np.int64)
        ids[0] = V - 1
        got = session.run_numpy({"ids": ids, "x": x})
        ref = dml.reference(spec, {"ids": ids, "x": x})
        np.testing.assert_array_equal(got["rows"], ref["rows"])
        np.testing.assert_array_equal(got["rows"], dense[ids])
        # The tied head (quantized GEMM, 8-bit activations) stays close to the exact product.
        exact = x.astype(np.float64) @ dense.T.astype(np.float64)
        assert np.abs(got["logits"] - exact).max() <= 2e-2 * np.abs(exact).max()


def test_int32_ids_and_policies_agree(tables, compile_and_run):
    ids = np.array([3, 0, 36, 3, 17], np.int32)
    x = np.zeros((2, DIMS["q4_K"]), np.float32)
    kept = compile_and_run(_spec(tables, "q4_K", "int32"), {"ids": ids, "x": x})
    deq = compile_and_run(_spec(tables, "q4_K", "int32", policy="dequantize"), {"ids": ids, "x": x})
    np.testing.assert_array_equal(kept["rows"], deq["rows"])


@pytest.mark.parametrize("bad", [V, -1, 1 << 40])
def test_bad_ids_are_a_clear_error(tables, tmp_path, bad):
    art = dml.compile(_spec(tables, "q8_0"), target="cpu", out=str(tmp_path / "a"))
    session = dml.runtime.load(art.path).create_session()
    ids = np.array([0, 1, bad], np.int64)
    with pytest.raises(dml.DinoMLRuntimeError,
                       match=rf"dml_cpu_embedding_quant: index {bad} at position 2 is out of range \[0, {V}\)"):
        session.run_numpy({"ids": ids, "x": np.zeros((2, DIMS["q8_0"]), np.float32)})


def test_constant_ids_are_not_folded_into_a_dense_table(tables, tmp_path):
    """An embedding whose ids are constants would fold to dense rows; a quantized table is never
    folded (fold_constants leaves nodes that read one), so the blocks and the kernel stay."""
    d = DIMS["q4_0"]

    class Fixed(dml.Module):
        def __init__(self):
            self.table = dml.Parameter([V, d])

        def forward(self, x):
            return {"y": x + dml.ops.embedding(np.array([2, 9], np.int64), self.table)}

    spec = dml.trace(Fixed(), inputs={"x": dml.TensorSpec([2, d])},
                     constants={"table": dml.gguf_constant(tables, "t_q4_0", "keep")}, name="fixed")
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "a"))
    assert [k["selected"] for k in art.kernel_manifest if k["op"] == "embedding"] == \
        ["dml_cpu_embedding_quant.dequantize_rows"]
    x = RNG.standard_normal((2, d)).astype(np.float32)
    got = dml.runtime.load(art.path).create_session().run_numpy({"x": x})["y"]
    np.testing.assert_array_equal(got, x + dml.gguf.tensor(tables, "t_q4_0")[[2, 9]])


def test_quantized_table_elsewhere_is_refused(tables):
    class Misuse(dml.Module):
        def __init__(self):
            self.table = dml.Parameter([V, DIMS["q8_0"]])

        def forward(self, ids):
            return {"y": dml.ops.gather(self.table, ids, axis=0)}

    with pytest.raises((dml.IrError, dml.ShapeError),
                       match=r"only gemm_rcr\* \(as b\) and embedding \(as the table\) can consume quantized"):
        dml.trace(Misuse(), inputs={"ids": dml.TensorSpec([4], "int64")},
                  constants={"table": dml.gguf_constant(tables, "t_q8_0", "keep")})


@pytest.mark.skipif(not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")),
                    reason="nvcc is needed to build a CUDA artifact")
def test_cuda_lowers_the_quantized_embedding(tables, tmp_path):
    art = dml.compile(_spec(tables, "q6_K"), target="cuda", arch="sm_90a", out=str(tmp_path / "a"))
    emb = [k for k in art.kernel_manifest if k["op"] == "embedding"]
    assert [k["selected"] for k in emb] == ["dml_cuda_embedding_quant.dequantize_rows"]
    src = open(os.path.join(art.path, "debug", "module.cu")).read()
    assert "dml_cuda_embedding_quant(14 /* q6_K */" in src
