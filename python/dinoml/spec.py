"""`Spec`: a traced (or loaded) model graph, ready to be compiled, saved or interpreted."""
from __future__ import annotations

import json
import os

from ._ext import ext
from .dims import Dim


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(e) for e in shape) + "]"


class Spec:
    """Wraps a finished C++ `ir::Graph` (with its constants)."""

    def __init__(self, graph):
        self.graph = graph

    @classmethod
    def load(cls, path: str) -> "Spec":
        """Reads a .dinoir.json (and the constants file it names)."""
        return cls(ext.Graph.load(os.fspath(path)))

    # ---- signature ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def input_names(self):
        return list(self.graph.inputs)

    @property
    def output_names(self):
        return list(self.graph.outputs)

    @property
    def inputs(self):
        """[{name, dtype, shape (IntExprs), kind}] in signature order."""
        return [self.graph.tensor(n) for n in self.graph.inputs]

    @property
    def outputs(self):
        return [self.graph.tensor(n) for n in self.graph.outputs]

    @property
    def states(self):
        return [self.graph.tensor(n) for n in self.graph.states]

    @property
    def dims(self):
        return [Dim._wrap(d) for d in self.graph.dims]

    def nodes(self):
        """[{name, op, inputs, outputs, attrs}] in topological order."""
        return self.graph.nodes()

    def tensor(self, name: str):
        return self.graph.tensor(name)

    # ---- serialisation ------------------------------------------------------------------------
    def graph_json(self) -> str:
        """The graph's .dinoir.json text (constants referenced by offset, never inlined)."""
        return self.graph.to_json()

    def to_dict(self) -> dict:
        return json.loads(self.graph_json())

    def hash(self) -> str:
        """SHA-256 of the canonical dump (structure and constant contents)."""
        return self.graph.hash()

    def save(self, path: str) -> str:
        """Writes PATH (a .dinoir.json, or a directory that gets graph.dinoir.json) and the
        constants file next to it. Returns the JSON path."""
        path = os.fspath(path)
        if os.path.isdir(path) or path.endswith(os.sep):
            os.makedirs(path, exist_ok=True)
            path = os.path.join(path, "graph.dinoir.json")
            constants = "constants.bin"
        else:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            base = os.path.basename(path)
            stem = base[: -len(".dinoir.json")] if base.endswith(".dinoir.json") else os.path.splitext(base)[0]
            constants = f"{stem}.constants.bin"
        self.graph.save(path, constants)
        return path

    # ---- convenience ------------------------------------------------------------------------------
    def reference(self, inputs, states=None):
        """Runs the C++ reference interpreter (see dinoml.reference)."""
        from .reference import reference
        return reference(self, inputs, states=states)

    def __repr__(self):
        def sig(ts):
            return ", ".join(f"{t['name']}: {t['dtype']}{_shape_str(t['shape'])}" for t in ts) or "none"

        nodes = self.nodes()
        counts = {}
        for n in nodes:
            counts[n["op"]] = counts.get(n["op"], 0) + 1
        ops = ", ".join(f"{op}×{c}" if c > 1 else op for op, c in counts.items())
        lines = [f"Spec '{self.name}'",
                 f"  inputs:  {sig(self.inputs)}",
                 f"  outputs: {sig(self.outputs)}"]
        if self.graph.states:
            lines.append(f"  states:  {sig(self.states)}")
        if self.graph.dims:
            lines.append("  dims:    " + ", ".join(f"{d.name}∈[{d.min},{d.max}] buckets {list(d.buckets)}"
                                                    for d in self.graph.dims))
        lines.append(f"  nodes:   {len(nodes)} ({ops})")
        return "\n".join(lines)
