"""llama.cpp's tokenizer as the oracle (ctypes over libllama from npm, scripts/fetch-ggml-ref):
loads a GGUF file with vocab_only and runs llama_tokenize / llama_detokenize. Run in its own
process (it loads ggml's CPU backend):

    python tests/python/llama_vocab_ref.py VOCAB.gguf CASES.json OUT.json

CASES.json: [{"text": str, "add_special": bool, "parse_special": bool}, ...]; OUT.json gets
[{"ids": [...], "detok": str, "detok_special": str}, ...] (detok: remove_special=True,
unparse_special=False; detok_special: False, True).
vocab_only is the first bool of llama_model_params, at byte 72 in this libllama (checked: the
bools that follow start 0, 0, 1 by default).
"""
from __future__ import annotations

import ctypes as C
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "llama"))
import llama_cpp_ref as R  # noqa: E402

VOCAB_ONLY_OFFSET = 72


def main(path: str, cases_path: str, out_path: str) -> int:
    d = R.lib_dir()
    g = C.CDLL(R._find(d, "libggml.v"), mode=C.RTLD_GLOBAL)
    g.ggml_backend_load_all_from_path.argtypes = [C.c_char_p]
    g.ggml_backend_load_all_from_path(d.encode())
    L = C.CDLL(R._find(d, "libllama.v"), mode=C.RTLD_GLOBAL)
    cb = R._LOG_CB(lambda level, text, ud: None)
    L.llama_log_set.argtypes = [R._LOG_CB, C.c_void_p]
    L.llama_log_set(cb, None)
    L.llama_backend_init()
    L.llama_model_default_params.argtypes = [C.POINTER(R._Params)]
    L.llama_model_load_from_file.argtypes = [C.c_char_p, R._Params]
    L.llama_model_load_from_file.restype = C.c_void_p
    L.llama_model_get_vocab.argtypes = [C.c_void_p]
    L.llama_model_get_vocab.restype = C.c_void_p
    L.llama_tokenize.argtypes = [C.c_void_p, C.c_char_p, C.c_int32, C.POINTER(C.c_int32), C.c_int32, C.c_bool, C.c_bool]
    L.llama_tokenize.restype = C.c_int32
    L.llama_detokenize.argtypes = [C.c_void_p, C.POINTER(C.c_int32), C.c_int32, C.c_char_p, C.c_int32, C.c_bool, C.c_bool]
    L.llama_detokenize.restype = C.c_int32
    mp = R._Params()
    L.llama_model_default_params(C.byref(mp))
    raw = (C.c_uint8 * 1024).from_buffer(mp)
    if list(raw[VOCAB_ONLY_OFFSET:VOCAB_ONLY_OFFSET + 3]) != [0, 0, 1]:
        raise RuntimeError("llama_model_params layout differs from the one this script knows (vocab_only at 72)")
    raw[VOCAB_ONLY_OFFSET] = 1
    model = L.llama_model_load_from_file(path.encode(), mp)
    if not model:
        raise RuntimeError(f"llama.cpp could not load the vocabulary of {path}")
    vocab = L.llama_model_get_vocab(model)

    def detok(ids, remove_special, unparse_special):
        arr = (C.c_int32 * max(1, len(ids)))(*ids)
        cap = 64 + 16 * len(ids)
        while True:
            buf = C.create_string_buffer(cap)
            n = L.llama_detokenize(vocab, arr, len(ids), buf, cap, remove_special, unparse_special)
            if n >= 0:
                return buf.raw[:n].decode("utf-8", "replace")
            cap = -n + 1

    out = []
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    for c in cases:
        b = c["text"].encode("utf-8")
        cap = len(b) + 16
        while True:
            toks = (C.c_int32 * cap)()
            n = L.llama_tokenize(vocab, b, len(b), toks, cap, c["add_special"], c["parse_special"])
            if n >= 0:
                break
            cap = -n
        ids = list(toks[:n])
        out.append({"ids": ids, "detok": detok(ids, True, False), "detok_special": detok(ids, False, True)})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
