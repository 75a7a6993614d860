"""The TextCodec of an LLM model (llm.TextCodec): tokenizer and chat template from its GGUF file."""
from __future__ import annotations

import os


def codec_from_gguf(path: str):
    if not os.path.isfile(path):
        raise ValueError(f"--tokenizer: GGUF file '{path}' does not exist")
    try:
        from ..tokenizer import Tokenizer  # the GGUF tokenizer (tokenizer.ggml.*) and chat templates
    except ImportError as e:
        raise ValueError(f"--tokenizer {path}: this build has no GGUF tokenizer (dinoml.tokenizer: {e}); "
                         "send token-id prompts to /v1/completions instead") from None
    return Tokenizer.from_gguf(path)
