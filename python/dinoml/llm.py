"""`dinoml.llm`: the text side of LLMs, over the C++ implementations in `_dinoml_llm`
(src/tokenizer, src/generate) that servers share:

    tok = dinoml.Tokenizer.from_gguf("model.gguf")      # the GGUF file's own vocabulary
    ids = tok.encode("Hello", add_special=True)          # = llama.cpp's llama_tokenize
    text = tok.decode(ids, remove_special=True)          # = llama_detokenize
    s = dinoml.Sampler(temperature=0.7, top_k=40, top_p=0.9, min_p=0.05, seed=1)
    next_id = s.sample(logits)
    prompt = dinoml.llm.render_chat("chatml", [("user", "Hi")])

Needs only the extension `_dinoml_llm` (no compiler).
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

try:
    from . import _dinoml_llm as _llm
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(f"dinoml: the LLM extension `_dinoml_llm` is not built or cannot be loaded ({e}). Build it with "
                      "`cmake --build build --target _dinoml_llm`; it is written into python/dinoml/.") from e

SamplingParams = _llm.SamplingParams
known_pre_tokenizers = _llm.known_pre_tokenizers
CHAT_FORMATS = ("chatml", "llama3", "gemma")


class Tokenizer:
    """A GGUF file's tokenizer (`tokenizer.ggml.*`): SentencePiece-style ("llama") or byte-level
    BPE ("gpt2" with the `tokenizer.ggml.pre` pre-tokenizer)."""

    def __init__(self, impl):
        self._t = impl

    @classmethod
    def from_gguf(cls, path: str) -> "Tokenizer":
        return cls(_llm.Tokenizer.from_gguf(str(path)))

    def encode(self, text: str, add_special: bool = True, parse_special: bool = False) -> List[int]:
        """Token ids; add_special adds BOS/EOS as the vocabulary says, parse_special turns control
        tokens written in the text (e.g. "<|im_start|>") into their ids."""
        return self._t.encode(text, add_special, parse_special)

    def decode(self, ids: Sequence[int], remove_special: bool = False, unparse_special: bool = False) -> str:
        return self._t.decode([int(i) for i in ids], remove_special, unparse_special)

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        """The bytes of one token (a piece may be part of a UTF-8 character: use StreamDecoder)."""
        return self._t.token_to_piece(int(token), special)

    def token_text(self, token: int) -> str:
        return self._t.token_text(int(token))

    def token_id(self, text: str) -> Optional[int]:
        i = self._t.token_id(text)
        return None if i < 0 else i

    def is_eog(self, token: int) -> bool:
        """Whether the token ends generation (EOS, end-of-turn and the like)."""
        return self._t.is_eog(int(token))

    def __len__(self) -> int:
        return self._t.n_tokens

    @property
    def model(self) -> str:
        return self._t.model

    @property
    def pre(self) -> str:
        return self._t.pre

    @property
    def bos(self) -> Optional[int]:
        return None if self._t.bos < 0 else self._t.bos

    @property
    def eos(self) -> Optional[int]:
        return None if self._t.eos < 0 else self._t.eos

    @property
    def eog(self) -> set:
        return set(self._t.eog)

    @property
    def add_bos(self) -> bool:
        return self._t.add_bos

    @property
    def chat_template(self) -> str:
        return self._t.chat_template


class StreamDecoder:
    """Turns generated tokens into text as they come: bytes are held back until they complete a
    UTF-8 character, so a streamed character is never split."""

    def __init__(self, tokenizer: Tokenizer, special: bool = False):
        self._tok, self._special, self._buf = tokenizer, special, b""

    def push(self, token: int) -> str:
        self._buf += self._tok.token_to_piece(token, self._special)
        # Keep an incomplete trailing sequence (at most 3 bytes) for the next token.
        cut = len(self._buf)
        for back in range(1, min(4, len(self._buf)) + 1):
            b = self._buf[-back]
            if b & 0xC0 == 0x80:
                continue
            need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
            if need > back:
                cut = len(self._buf) - back
            break
        out, self._buf = self._buf[:cut], self._buf[cut:]
        return out.decode("utf-8", "replace")

    def flush(self) -> str:
        out, self._buf = self._buf, b""
        return out.decode("utf-8", "replace")


class Sampler:
    """Next-token choice (C++ `dinoml::generate::Sampler`): penalties (repetition, frequency,
    presence over the last repeat_last_n tokens) -> top-k -> top-p -> min-p -> temperature -> draw
    from a seeded generator; temperature <= 0 is greedy."""

    def __init__(self, temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 64, seed: int = 0,
                 frequency_penalty: float = 0.0, presence_penalty: float = 0.0):
        self.params = _llm.SamplingParams(temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed,
                                          frequency_penalty, presence_penalty)
        self._s = _llm.Sampler(self.params)

    def sample(self, logits: np.ndarray) -> int:
        return self._s.sample(np.ascontiguousarray(logits, dtype=np.float32))

    def distribution(self, logits: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(ids, probabilities) the next draw picks from, most likely first."""
        ids, probs = self._s.distribution(np.ascontiguousarray(logits, dtype=np.float32))
        return np.asarray(ids, dtype=np.int32), np.asarray(probs, dtype=np.float32)

    def accept(self, tokens: Union[int, Iterable[int]]) -> None:
        """Adds tokens (e.g. the prompt) to the repetition-penalty history."""
        for t in [tokens] if isinstance(tokens, int) else tokens:
            self._s.accept(int(t))

    def reset(self, seed: Optional[int] = None) -> None:
        self._s.reset(self.params.seed if seed is None else seed)


def detect_chat_format(template: str) -> str:
    """'chatml', 'llama3' or 'gemma' for a Jinja chat template; ValueError otherwise."""
    return _llm.detect_chat_format(template)


def render_chat(fmt: str, messages: Sequence, add_generation_prompt: bool = True, bos: str = "") -> str:
    """The prompt text for messages given as (role, content) pairs or {"role", "content"} dicts."""
    pairs = [(m["role"], m["content"]) if isinstance(m, dict) else (m[0], m[1]) for m in messages]
    return _llm.render_chat(fmt, pairs, add_generation_prompt, bos)


def encode_chat(tokenizer: Tokenizer, fmt: str, messages: Sequence, add_generation_prompt: bool = True) -> List[int]:
    """Token ids of a chat prompt: messages rendered in format `fmt` ("auto": recognised from the
    GGUF file's template), control tokens parsed. The BOS text a format starts with is left to the
    tokenizer's add-BOS rule, so a prompt never starts with two BOS tokens."""
    if fmt == "auto":
        fmt = detect_chat_format(tokenizer.chat_template)
    bos_text = tokenizer.token_text(tokenizer.bos) if tokenizer.bos is not None else ""
    text = render_chat(fmt, messages, add_generation_prompt, bos_text)
    if tokenizer.add_bos and bos_text and text.startswith(bos_text):
        text = text[len(bos_text):]
    return tokenizer.encode(text, add_special=True, parse_special=True)


__all__ = ["Tokenizer", "encode_chat", "StreamDecoder", "Sampler", "SamplingParams", "detect_chat_format", "render_chat",
           "known_pre_tokenizers", "CHAT_FORMATS"]
