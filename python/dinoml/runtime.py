"""`dinoml.runtime`: loads artifacts and runs them, through the runtime C ABI
(include/dinoml/runtime.h) bound in the extension — the same code path as C and C++ callers.

    mod = dinoml.runtime.load("out/linear")
    sess = mod.create_session()
    y = sess.run_numpy({"x": x})["y"]

A Module is immutable and shared by threads; a Session owns its arena and states and is used by
one thread at a time. The GIL is released while a session runs, so threads with their own
sessions run in parallel.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ._ext import ext


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """An input/output/state of a module: shape items are ints (fixed) or dim names/expressions;
    axes gives (dim name or None, min, max) per axis."""
    name: str
    dtype: str
    shape: Tuple[Union[int, str], ...]
    axes: Tuple[Tuple[Optional[str], int, int], ...]

    @classmethod
    def _from(cls, d: dict) -> "TensorInfo":
        return cls(d["name"], d["dtype"], tuple(d["shape"]), tuple(tuple(a) for a in d["axes"]))


class Module:
    """A loaded artifact."""

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        self._m = ext.RtModule(self.path)
        self.inputs: List[TensorInfo] = [TensorInfo._from(d) for d in self._m.inputs]
        self.outputs: List[TensorInfo] = [TensorInfo._from(d) for d in self._m.outputs]
        self.states: List[TensorInfo] = [TensorInfo._from(d) for d in self._m.states]

    @property
    def name(self) -> str:
        return self._m.name

    @property
    def graph_hash(self) -> str:
        return self._m.graph_hash

    def create_session(self) -> "Session":
        return Session(self)

    def __repr__(self):
        def sig(ts):
            return ", ".join(f"{t.name}: {t.dtype}[{', '.join(str(s) for s in t.shape)}]" for t in ts) or "none"
        return f"<dinoml.runtime.Module '{self.name}' ({sig(self.inputs)}) -> ({sig(self.outputs)})>"


def load(path: Union[str, os.PathLike]) -> Module:
    """Verifies (manifest, ABI, file hashes, CPU ISA) and loads an artifact directory."""
    return Module(path)


def _torch_to_numpy(t):
    import torch
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)  # raw bf16 bits, accepted as-is
    return t.numpy()


class Session:
    """One execution context of a Module (its own arena and states)."""

    def __init__(self, module: Module):
        self.module = module
        self._s = ext.RtSession(module._m)
        self._out_dtypes = {o.name: o.dtype for o in module.outputs}
        self._state_dtypes = {s.name: s.dtype for s in module.states}

    def run_numpy(self, inputs: Optional[Mapping[str, np.ndarray]] = None, **kw) -> Dict[str, np.ndarray]:
        """Runs with {input name: numpy array} -> {output name: array}.

        Arrays are made C-contiguous; dtypes must match (a mismatch is the runtime's
        InvalidArgumentError, a ValueError) except bfloat16 inputs, which accept float32 arrays
        (rounded to nearest even) or uint16 bit arrays. bfloat16 outputs come back as float32."""
        feeds = dict(inputs or {})
        feeds.update(kw)
        return self._s.run(feeds)

    run = run_numpy

    def run_torch(self, inputs: Optional[Mapping] = None, **kw) -> Dict[str, "object"]:
        """Runs with {name: torch.Tensor} -> {name: torch.Tensor} (bfloat16 stays bfloat16)."""
        import torch
        feeds = dict(inputs or {})
        feeds.update(kw)
        outs = self._s.run({k: _torch_to_numpy(v) for k, v in feeds.items()})
        res = {}
        for k, arr in outs.items():
            t = torch.from_numpy(arr)
            res[k] = t.to(torch.bfloat16) if self._out_dtypes.get(k) == "bfloat16" else t
        return res

    def get_state(self, name: str) -> np.ndarray:
        """A copy of state `name` (bfloat16 as float32)."""
        return self._s.get_state(name)

    def set_state(self, name: str, value) -> None:
        """Overwrites state `name` (same dtype and shape; bfloat16 accepts float32 / uint16 bits)."""
        if type(value).__module__.startswith("torch"):
            value = _torch_to_numpy(value)
        self._s.set_state(name, value)

    def reset_states(self) -> None:
        """Zeroes every state."""
        self._s.reset_states()

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena held now (grows to the largest bucket run so far)."""
        return self._s.arena_bytes

    def memory(self) -> dict:
        """Heap the session holds: arena + states + session-owned outputs + a fixed overhead
        (``total_bytes``); ``constants_bytes`` are mapped once per module and shared."""
        return self._s.memory()

    def __repr__(self):
        return f"<dinoml.runtime.Session of '{self.module.name}', arena {self.arena_bytes} B>"


__all__ = ["load", "Module", "Session", "TensorInfo"]
