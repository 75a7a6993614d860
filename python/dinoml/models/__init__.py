"""Model builders inside the package. `decoder`: decoder-only LLMs from GGUF metadata
(llama/mistral/mixtral, qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, phi3), as `dinoml compile MODEL.gguf` uses."""
from .decoder import ARCHS, DecoderConfig, build_spec

__all__ = ["ARCHS", "DecoderConfig", "build_spec"]
