"""The models one server hosts: artifacts loaded once, a session pool each.

A stateless artifact is a tensor model, served over the Open Inference Protocol (/v2). A decoder
artifact (inputs `tokens`, `positions`, output `logits`, KV-cache states: examples/llama/model.py)
is an LLM, served over the OpenAI API (/v1); its KV cache lives in session states, so it cannot be
a stateless /v2 model. Any other artifact with states is refused at start-up with the reason.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

from .. import runtime
from .pool import WorkerPool
from .protocol import DATATYPES, TensorSig, signature_of


@dataclasses.dataclass
class ModelSpec:
    """One `dinoml serve` argument: DIR or NAME=DIR."""
    name: str
    path: str

    @classmethod
    def parse(cls, arg: str) -> "ModelSpec":
        name, sep, path = arg.partition("=")
        if not sep:
            path = arg
            name = os.path.basename(os.path.normpath(arg))
        if not name or not path:
            raise ValueError(f"model argument {arg!r}: expected DIR or NAME=DIR")
        if "/" in name or name in (".", ".."):
            raise ValueError(f"model name {name!r} (from {arg!r}) may not contain '/': use NAME=DIR")
        if not os.path.isdir(path):
            raise ValueError(f"model '{name}': artifact directory '{path}' does not exist")
        return cls(name, path)


def is_decoder(module: runtime.Module) -> bool:
    """inputs tokens, positions (and slots, logit_rows when compiled with slots), output logits."""
    return ({t.name for t in module.inputs} in ({"tokens", "positions"}, {"tokens", "positions", "slots", "logit_rows"})
            and [o.name for o in module.outputs] == ["logits"]
            and any(s.name.startswith("cache_k.") for s in module.states))


class TensorModel:
    """A stateless artifact served over /v2: one Session per pool worker."""

    kind = "tensor"

    def __init__(self, name: str, module: runtime.Module, sessions: int, max_queue: int, metrics):
        self.name = name
        self.version = "1"
        self.module = module
        for t in list(module.inputs) + list(module.outputs):
            if t.dtype not in DATATYPES:
                raise ValueError(f"model '{name}': tensor '{t.name}' has dtype {t.dtype}, which the Open "
                                 "Inference Protocol server does not map")
        self.inputs: List[TensorSig] = [signature_of(t) for t in module.inputs]
        self.outputs: List[TensorSig] = [signature_of(t) for t in module.outputs]
        self.pool = WorkerPool(name, [module.create_session() for _ in range(sessions)], max_queue,
                               on_depth=lambda n: metrics.queue_depth.labels(model=name).set(n))
        metrics.queue_depth.labels(model=name).set(0)

    def metadata(self) -> dict:
        return {"name": self.name, "versions": [self.version], "platform": f"dinoml_{self.module.target}",
                "inputs": [s.metadata() for s in self.inputs], "outputs": [s.metadata() for s in self.outputs]}


class Repository:
    """name -> TensorModel or LlmModel."""

    def __init__(self, specs: Sequence[ModelSpec], threads: int, max_queue: int, metrics,
                 codecs: Optional[Dict[str, object]] = None):
        from .llm import LlmModel
        self.models: Dict[str, object] = {}
        codecs = dict(codecs or {})
        for spec in specs:
            if spec.name in self.models:
                raise ValueError(f"two models are named '{spec.name}': name them with NAME=DIR")
            module = runtime.load(spec.path)
            if is_decoder(module):
                self.models[spec.name] = LlmModel(spec.name, spec.path, module, threads, max_queue, metrics,
                                                  codecs.pop(spec.name, None))
            elif module.states:
                raise ValueError(f"model '{spec.name}' ({spec.path}) keeps state between runs "
                                 f"({', '.join(s.name for s in module.states)}) and is not a decoder "
                                 "(tokens, positions -> logits): a stateless protocol cannot serve it")
            else:
                self.models[spec.name] = TensorModel(spec.name, module, threads, max_queue, metrics)
        if codecs:
            raise ValueError(f"--tokenizer names model(s) {sorted(codecs)} that are not LLM artifacts being served")

    def tensor_models(self) -> Dict[str, TensorModel]:
        return {k: m for k, m in self.models.items() if m.kind == "tensor"}

    def llm_models(self) -> Dict[str, object]:
        return {k: m for k, m in self.models.items() if m.kind == "llm"}

    def close(self) -> None:
        for m in self.models.values():
            m.pool.close()
