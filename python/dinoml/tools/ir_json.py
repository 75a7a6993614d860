"""Writes DinoML IR graphs (`graph.dinoir.json` + `constants.bin`, the IR's JSON form of
src/ir/serialize.cpp) directly from Python, without the compiled extension: the GPU machine's
Python cannot load the extension built here, yet its tools (benchmark-ops cuda, the profiling and
end-to-end checks of tests/gpu) must build graphs there. Constants go to constants.bin at
64-byte aligned offsets with their sha256, as the IR contract asks.
"""
from __future__ import annotations

import hashlib
import json
import os


class Graph:
    """A .dinoir.json graph written directly (the IR's JSON form, src/ir/serialize.cpp), so the
    bundle needs no Python extension: constants go to constants.bin at 64-byte aligned offsets."""

    def __init__(self, name, dims):
        self.j = {"schema_version": 1, "name": name, "dims": dims, "inputs": [], "outputs": [], "states": [],
                  "constants_file": "constants.bin", "tensors": [], "nodes": []}
        self.blob = bytearray()

    def tensor(self, name, dtype, shape, kind):
        self.j["tensors"].append({"name": name, "dtype": dtype, "shape": shape, "layout": "row_major", "kind": kind})
        if kind in ("input", "output"):
            self.j[kind + "s"].append(name)
        return name

    def const(self, name, data: bytes, dtype, shape, quant=None):
        off = (len(self.blob) + 63) // 64 * 64
        self.blob += b"\0" * (off - len(self.blob)) + data
        t = {"name": name, "dtype": dtype, "shape": shape, "layout": "row_major", "kind": "constant",
             "constant": {"offset": off, "nbytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
        if quant:
            t["quant"] = quant
        self.j["tensors"].append(t)
        return name

    def node(self, op, inputs, outputs, attrs=None):
        self.j["nodes"].append({"name": f"{op}_{len(self.j['nodes'])}", "op": op, "inputs": inputs, "outputs": outputs,
                                "attrs": attrs or {}})

    def output(self, src, name):
        """The graph output `name` (an `output` node copying `src`, as GraphBuilder::output)."""
        t = next(t for t in self.j["tensors"] if t["name"] == src)
        self.tensor(name, t["dtype"], t["shape"], "output")
        self.node("output", [src], [name])

    def save(self, d, case=None):
        """Writes DIR/graph.dinoir.json and DIR/constants.bin (and DIR/case.json when `case` is given:
        what the checks that read the directory back need to know about it)."""
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "graph.dinoir.json"), "w") as f:
            json.dump(self.j, f, indent=1)
        with open(os.path.join(d, "constants.bin"), "wb") as f:
            f.write(bytes(self.blob))
        if case is not None:
            with open(os.path.join(d, "case.json"), "w") as f:
                json.dump(case, f, indent=1)


def dim(name, lo, hi, typical, buckets):
    return {"name": name, "min": lo, "max": hi, "typical": typical, "buckets": buckets, "divisible_by": 1}
