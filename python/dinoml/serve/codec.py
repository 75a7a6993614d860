"""The TextCodec of an LLM model (llm.TextCodec) from its GGUF file: dinoml.llm's tokenizer
(ids equal llama.cpp's) and native chat templates (chatml, llama3, gemma)."""
from __future__ import annotations

import os
from typing import List, Optional, Sequence


class GgufCodec:
    """tokenize / detokenize / apply_chat_template / eos_ids over dinoml.llm.

    Prompts are tokenized like llama.cpp's server does: control tokens written in the text (e.g.
    "<|im_start|>") become their ids, BOS/EOS as the vocabulary says. Generated text leaves control
    tokens out."""

    def __init__(self, path: str, chat_format: Optional[str] = None):
        from .. import llm
        self._llm = llm
        self.tok = llm.Tokenizer.from_gguf(path)
        self.path = path
        self.eos_ids = set(self.tok.eog) | ({self.tok.eos} if self.tok.eos is not None else set())
        self.chat_format = chat_format
        self._format_error: Optional[str] = None
        if chat_format is None:
            try:
                self.chat_format = llm.detect_chat_format(self.tok.chat_template)
            except ValueError as e:  # chat requests say why; completions still work
                self._format_error = str(e)

    def tokenize(self, text: str, add_special: bool = True) -> List[int]:
        return self.tok.encode(text, add_special=add_special, parse_special=True)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tok.decode(ids, remove_special=False, unparse_special=False)

    def apply_chat_template(self, messages: List[dict], add_generation_prompt: bool = True) -> List[int]:
        """The chat prompt's ids (dinoml.llm.encode_chat: rendered natively, control tokens parsed,
        never two BOS tokens)."""
        if self.chat_format is None:
            raise ValueError(f"no chat template for {os.path.basename(self.path)}: {self._format_error}")
        return self._llm.encode_chat(self.tok, self.chat_format, messages, add_generation_prompt)


def codec_from_gguf(path: str, chat_format: Optional[str] = None) -> GgufCodec:
    if not os.path.isfile(path):
        raise ValueError(f"--tokenizer: GGUF file '{path}' does not exist")
    try:
        return GgufCodec(path, chat_format)
    except ImportError as e:
        raise ValueError(f"--tokenizer {path}: this build has no GGUF tokenizer ({e}); send token-id prompts to "
                         "/v1/completions instead") from None
