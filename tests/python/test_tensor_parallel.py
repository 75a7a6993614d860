"""Tensor-parallel sharding (issue 42): `shard_tensor_parallel` splits a decoder's graph into N rank
graphs (Megatron-style: q/k/v and gate/up column-parallel, output and down projections
row-parallel, attention and the KV cache by heads, the embedding and the LM head by vocabulary)
with all_reduce / all_gather between them. The reference interpreter runs the rank graphs in
lockstep (`interpret_group`, collectives computed across ranks) and must give the unsharded
graph's logits and, per rank, its shard of the KV cache — for a prefill and a decode step."""
import os
import sys

import numpy as np
import pytest

from dinoml._ext import ext
from dinoml.models import build_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
import make_random_gguf  # noqa: E402

PROMPT = np.array([1, 5, 9, 300, 777], np.int64)


def spec_of(tmp_path, name, quant="f32", arch=None, **kw):
    path = str(tmp_path / f"{name}.gguf")
    if arch:
        make_random_gguf.make_arch(path, arch, quant, vocab=1024, **kw)
    else:
        make_random_gguf.make(path, "tiny", quant, vocab=1024, ctx=64, **kw)
    return build_spec(path, ctx=32, max_seq=8).graph


def check(g, world, tol=1e-5):
    """Prefill of PROMPT then one decode step, sharded vs unsharded; returns the report."""
    ranks, report = ext.shard_tensor_parallel(g, world)
    assert len(ranks) == world
    feeds = [{"tokens": PROMPT, "positions": np.arange(len(PROMPT), dtype=np.int64)},
             {"tokens": np.array([42], np.int64), "positions": np.array([len(PROMPT)], np.int64)}]
    ref_states, tp_states = {}, []
    for feed in feeds:
        ref, ref_states = ext.interpret(g, feed, ref_states)
        res = ext.interpret_group(ranks, feed, tp_states)
        scale = np.abs(ref["logits"]).max()
        for r, (outs, _) in enumerate(res):
            err = np.abs(outs["logits"] - ref["logits"]).max() / scale
            assert err <= tol, f"world {world} rank {r}: max |logit error| {err:.3g} of max |logit| > {tol}"
        tp_states = [s for _, s in res]
    # Each rank holds its heads of the cache: concatenated in rank order they are the whole cache.
    for name, whole in ref_states.items():
        parts = [s[name] for s in tp_states]
        if parts[0].shape == whole.shape:
            continue  # replicated cache (kv heads that do not divide by the world size)
        np.testing.assert_allclose(np.concatenate(parts, axis=0), whole, rtol=1e-5, atol=1e-6, err_msg=name)
    return ranks, report


@pytest.mark.parametrize("world", [2, 4, 8])
def test_llama_4_layers(tmp_path, world):
    g = spec_of(tmp_path, "llama", n_kv_heads=8)
    ranks, report = check(g, world)
    # 4 layers x (q, k, v, gate, up) + LM head column-parallel; (output, down) row-parallel.
    assert report["column_gemms"] == 21 and report["row_gemms"] == 8, report
    assert report["vocab_embeddings"] == 1 and report["all_reduce"] == 9 and report["all_gather"] == 1, report
    assert report["replicated"] == [], report["replicated"]
    st = ranks[0].tensor_names()
    assert st  # same structure on every rank, different weights
    assert all(r.num_nodes == ranks[0].num_nodes for r in ranks)


def test_gqa_fewer_kv_heads_than_ranks(tmp_path):
    """2 kv heads over 4 ranks: the projections still split, attention runs replicated."""
    g = spec_of(tmp_path, "gqa", n_kv_heads=2)
    ranks, report = check(g, 4)
    assert report["column_gemms"] >= 20 and report["all_gather"] >= 12, report
    assert ranks[0].tensor("cache_k.0")["shape"] == [2, 32, 32]


@pytest.mark.parametrize("arch", ["qwen2", "gemma2", "phi3", "qwen3", "mixtral"])
def test_architectures(tmp_path, arch):
    g = spec_of(tmp_path, arch, arch=arch, n_kv_heads=4, n_heads=8) if arch != "gemma2" else \
        spec_of(tmp_path, arch, arch=arch, n_kv_heads=2)
    _, report = check(g, 2)
    print(arch, report)
    assert report["column_gemms"] >= 2 and report["all_reduce"] >= 2, report


def test_quantized_weights(tmp_path):
    """Q4_K/Q6_K blocks split by rows (N); a K split that is not whole blocks stays replicated."""
    g = spec_of(tmp_path, "q4k", quant="q4_k_m", n_kv_heads=8, dim=512, n_heads=8, ffn=1024)
    _, report = check(g, 2, tol=1e-5)
    assert report["column_gemms"] >= 20 and report["row_gemms"] >= 4, report


def test_world_size_errors(tmp_path):
    g = spec_of(tmp_path, "llama", n_kv_heads=8)
    with pytest.raises(Exception, match="world size 0 must be >= 1"):
        ext.shard_tensor_parallel(g, 0)
    one, _ = ext.shard_tensor_parallel(g, 1)
    assert len(one) == 1
    with pytest.raises(Exception, match="world_size 2 needs every rank"):
        ranks, _ = ext.shard_tensor_parallel(g, 2)
        ext.interpret(ranks[0], {"tokens": PROMPT, "positions": np.arange(5, dtype=np.int64)}, {})


def test_compiled_group_matches_one_rank(tmp_path):
    """A 2-rank artifact (one module, each rank's constants) run as a SessionGroup: the same logits as
    the unsharded artifact for a prefill and two decode steps; a bad input on one rank is a clear
    error on the group (no hang) and the group runs again afterwards."""
    import dinoml as dml
    path = str(tmp_path / "m.gguf")
    make_random_gguf.make(path, "tiny", "f32", vocab=1024, ctx=64, n_kv_heads=8, n_layers=2)
    spec = build_spec(path, ctx=32, max_seq=8)
    one = dml.runtime.load(dml.compile(spec, out=str(tmp_path / "one")).path).create_session()
    art = dml.compile(spec, out=str(tmp_path / "tp2"), tensor_parallel=2)
    assert dml.runtime.load(art.path).world_size == 2
    group = dml.runtime.load_group(art.path)
    steps = [(PROMPT, np.arange(5)), (np.array([42]), np.array([5])), (np.array([7]), np.array([6]))]
    for toks, pos in steps:
        feed = {"tokens": toks.astype(np.int64), "positions": pos.astype(np.int64)}
        ref = one.run(feed)["logits"]
        got = group.run(feed)["logits"]
        assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
    bad = [{"tokens": PROMPT, "positions": np.arange(5, dtype=np.int64)},
           {"tokens": PROMPT.astype(np.int32), "positions": np.arange(5, dtype=np.int64)}]
    with pytest.raises(Exception, match="tensor-parallel rank 1 of 2: .*tokens"):
        group.run(bad)
    group.reset_states()
    feed = {"tokens": PROMPT, "positions": np.arange(5, dtype=np.int64)}
    one.reset_states()
    assert np.abs(group.run(feed)["logits"] - one.run(feed)["logits"]).max() <= 1e-5 * 50
    # Loading a rank that does not exist, and running one rank alone, fail clearly.
    with pytest.raises(Exception, match="rank 2 does not exist: .* world size 2"):
        dml.runtime.load(art.path, rank=2)
    alone = dml.runtime.load(art.path, rank=1).create_session()
    with pytest.raises(Exception, match="run it through a session group"):
        alone.run(feed)
    group.close()
    # dinoml generate's decoder runs the ranks as a group: the same greedy tokens as one rank.
    from dinoml.tools.generate import generate
    one_rank = generate(str(tmp_path / "one"), list(PROMPT), 6)
    two_ranks = generate(art.path, list(PROMPT), 6)
    assert list(two_ranks["tokens"]) == list(one_rank["tokens"])


@pytest.mark.parametrize("model", ["bert", "gpt2", "llama"])
def test_torch_modules(model):
    """Hugging Face modules through dml.from_torch shard without model changes: GPT-2's fused c_attn
    ([T, 3·d] viewed as [B, S, 3·d] and split) is split per section, Llama's q/k/v/gate/up column-wise."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import dinoml as dml
    torch.manual_seed(0)
    if model == "bert":
        m = transformers.BertModel(transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                           intermediate_size=128, vocab_size=512))
    elif model == "gpt2":
        m = transformers.GPT2Model(transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=512,
                                                           n_positions=64, bos_token_id=0, eos_token_id=0))
    else:
        m = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
            vocab_size=512))
    ids = torch.randint(0, 512, (1, 8))
    g = dml.from_torch(m.eval(), (ids,), kwargs={} if model == "bert" else {"use_cache": False}).graph
    feed = {g.inputs[0]: ids.numpy()}
    ref, _ = ext.interpret(g, feed, {})
    ranks, report = ext.shard_tensor_parallel(g, 2)
    out = ext.interpret_group(ranks, feed)[0][0]
    for k, v in ref.items():
        assert np.abs(out[k] - v).max() <= 1e-5 * np.abs(v).max(), k
    assert report["row_gemms"] == 4 and report["replicated"] == [], report
