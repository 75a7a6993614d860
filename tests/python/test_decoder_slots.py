"""Batched decoding (issue 39, item 5): a decoder compiled with slots=4 holds four sequences' KV
caches and one run takes tokens of any of them. Oracle: the same GGUF file compiled without slots,
run one sequence at a time (dinoml.tools.generate.Decoder, one token per run, so every position's
logits are known). Tiny random F32 files: llama (the fused attention) and gemma2 (soft-capped
composed attention, a sliding window of 8 on even layers). Sequences are interleaved at different
positions, one step mixes a prefill chunk with decode tokens, a slot is reused for a new sequence
after its old one ends (the old rows must stay invisible), and 1e-5 of max |logit| is the tolerance.
Both again with a float16 KV cache (kv_dtype="float16") in both artifacts: tolerance 1e-3 there, as
a K/V row computed in a prefill chunk and the same row computed alone differ in float32 summation
order (GEMMs of other M), which can round it to the neighbouring float16 value (one fp16 ulp is
4.9e-4 relative; measured 1.3e-4 of max |logit| for gemma2's soft caps, 0 for llama).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import dinoml as dml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))

import make_random_gguf  # noqa: E402
from dinoml.models import build_spec  # noqa: E402
from dinoml.tools.generate import BatchDecoder, Decoder, generate  # noqa: E402

CTX, SLOTS, MAX_SEQ = 64, 4, 24


@pytest.fixture(scope="module", params=["llama", "gemma2", "llama-kv-f16", "gemma2-kv-f16"])
def arts(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"slots-{request.param}")
    path = str(d / "tiny.gguf")
    arch = request.param.split("-")[0]
    kv = "float16" if request.param.endswith("kv-f16") else "float32"  # both artifacts with a float16 cache
    if arch == "llama":
        make_random_gguf.make(path, "tiny", "f32", seed=5, n_layers=2, dim=64, n_heads=4, n_kv_heads=2, ffn=128)
    else:
        make_random_gguf.make_arch(path, "gemma2", "f32", seed=5, n_layers=2)
    one = dml.compile(build_spec(path, ctx=CTX, max_seq=MAX_SEQ, kv_dtype=kv), target="cpu", out=str(d / "one")).path
    many = dml.compile(build_spec(path, ctx=CTX, max_seq=MAX_SEQ, slots=SLOTS, kv_dtype=kv), target="cpu",
                       out=str(d / "many")).path
    return one, many, (1e-3 if kv == "float16" else 1e-5), kv


def reference(one, seq):
    """logits after each token of seq, one sequence alone, one token per run."""
    dec = Decoder(one)
    return np.stack([dec.feed([t]) for t in seq])


def test_slots_match_one_sequence_at_a_time(arts):
    one, many, tol, _ = arts
    rng = np.random.default_rng(1)
    seqs = {name: rng.integers(0, 1000, n).tolist() for name, n in (("a", 40), ("b", 30), ("c", 20), ("d", 20),
                                                                      ("e", 25))}
    refs = {k: reference(one, v) for k, v in seqs.items()}
    dec = BatchDecoder(many)
    assert (dec.slots, dec.ctx, dec.max_seq) == (SLOTS, CTX, MAX_SEQ)
    done = {k: 0 for k in seqs}
    worst = [0.0]

    def step(plan):  # [(slot, sequence name, tokens this step)]
        out = dec.step([(slot, seqs[k][done[k]:done[k] + n]) for slot, k, n in plan])
        assert out.shape == (len(plan), 1000)
        for row, (slot, k, n) in enumerate(plan):
            done[k] += n
            assert dec.pos[slot] == done[k]
            ref = refs[k][done[k] - 1]
            err = np.abs(out[row] - ref).max() / np.abs(ref).max()
            worst[0] = max(worst[0], err)
            assert err <= tol, f"slot {slot} ({k}) at position {done[k] - 1}: {err:.3g} of max |logit|"

    step([(2, "a", 10)])                                  # prefill alone, in slot 2
    step([(2, "a", 1), (0, "b", 20)])                     # decode + a prefill chunk
    step([(0, "b", 1), (2, "a", 1), (3, "c", 13)])        # two decodes + prefill
    step([(3, "c", 1), (1, "d", 12), (0, "b", 1), (2, "a", 1)])
    for _ in range(5):                                    # every slot decodes
        step([(s, k, 1) for s, k in ((0, "b"), (1, "d"), (2, "a"), (3, "c"))])
    step([(2, "a", 8), (3, "c", 1)])                      # a long chunk of a running sequence
    while done["c"] < len(seqs["c"]):
        step([(3, "c", 1), (0, "b", 1)])
    dec.reset(3)                                          # "c" ended; "e" reuses slot 3 from position 0
    step([(3, "e", 6), (2, "a", 1)])
    step([(3, "e", 18), (0, "b", 1), (2, "a", 1)])
    step([(3, "e", 1), (0, "b", 1)])
    assert worst[0] < tol


def test_generate_runs_a_slots_artifact_in_slot_zero(arts):
    one, many, tol, _ = arts
    prompt = [1, 200, 45, 27, 99, 12, 7, 300]
    a, b = generate(one, prompt, 8), generate(many, prompt, 8)
    assert a["tokens"] == b["tokens"]
    assert np.abs(a["logits"] - b["logits"]).max() <= tol * np.abs(a["logits"]).max()


def test_interfaces(arts):
    one, many, _, kv = arts
    m1, ms = dml.runtime.load(one), dml.runtime.load(many)
    assert {s.dtype for s in m1.states} == {s.dtype for s in ms.states} == {kv}
    assert [t.name for t in m1.inputs] == ["tokens", "positions"]  # without slots: the interface as it was
    assert [tuple(o.shape) for o in m1.outputs] == [(1, 1000)]
    assert [t.name for t in ms.inputs] == ["tokens", "positions", "slots", "logit_rows"]
    assert [tuple(o.shape) for o in ms.outputs] == [("rows", 1000)]
    s1 = {s.name: tuple(s.shape) for s in m1.states}
    ss = {s.name: tuple(s.shape) for s in ms.states}
    assert ss["cache_k.0"] == (s1["cache_k.0"][0], SLOTS * CTX, s1["cache_k.0"][2])


def test_bad_steps_are_refused(arts):
    _, many, _, _ = arts
    dec = BatchDecoder(many)
    with pytest.raises(ValueError, match=r"slot 4 is out of range: this artifact has slots 0\.\.3"):
        dec.step([(4, [1])])
    with pytest.raises(ValueError, match="slot -1 is out of range"):
        dec.step([(-1, [1])])
    with pytest.raises(ValueError, match="slot 1 appears twice"):
        dec.step([(1, [1]), (1, [2])])
    with pytest.raises(ValueError, match=f"at most {MAX_SEQ} per step"):
        dec.step([(0, [1] * 20), (1, [1] * 5)])
    with pytest.raises(ValueError, match="needs at least one token"):
        dec.step([(0, [])])
    for _ in range(3):
        dec.step([(0, [1] * 20)])
    with pytest.raises(ValueError, match=f"holds {CTX} positions per sequence: 60 used \\+ 5 new is too many"):
        dec.step([(0, [1] * 5)])
    # The artifact itself refuses what the Python side would (a direct session.run).
    s = dml.runtime.load(many).create_session()

    def run(pos, slots, rows):
        n = len(pos)
        s.run({"tokens": np.ones(n, np.int64), "positions": np.array(pos, np.int64),
               "slots": np.array(slots, np.int64), "logit_rows": np.array(rows, np.int64)})

    for pos, slots, rows, msg in (([0, 1], [0, SLOTS], [1], "outside the cache rows"),
                                  ([0, 1], [0, -1], [1], "outside the cache rows"),
                                  ([0, CTX], [0, 1], [1], f"index {CTX} at position 1 is out of range"),
                                  ([0, -1], [0, 1], [1], "index -1 at position 1 is out of range"),
                                  ([0, 1], [0, 1], [2], "index 2 at position 0 is out of range")):
        with pytest.raises(dml.DinoMLRuntimeError, match=msg):
            run(pos, slots, rows)
    with pytest.raises(ValueError, match="compiled without slots"):
        BatchDecoder(arts[0])


def test_slots_option_checks(tmp_path):
    path = str(tmp_path / "t.gguf")
    make_random_gguf.make(path, "tiny", "f32", seed=1, n_layers=1, dim=32, n_heads=2, n_kv_heads=1, ffn=64)
    with pytest.raises(ValueError, match="slots 0 must be >= 1"):
        build_spec(path, ctx=64, slots=0)
    with pytest.raises(ValueError, match=r"max_seq 4 must be in slots 8\.\.slots\*ctx"):
        build_spec(path, ctx=64, max_seq=4, slots=8)
