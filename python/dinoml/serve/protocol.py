"""Open Inference Protocol (KServe v2) tensors: request parsing and response building.

Pure functions over bytes and numpy arrays (no HTTP, no event loop), so the parser can be fuzzed
on its own (fuzz/serve_protocol_fuzz.py). Every malformed request raises ProtocolError with the
HTTP status and a message that names the offending field; nothing else escapes `parse_infer_request`.

Binary tensor data extension (as tritonclient speaks it): the HTTP body is the JSON request
(its byte length in the `Inference-Header-Content-Length` header) followed by the raw tensors of
the inputs that carry `parameters.binary_data_size`, in the order those inputs appear in the JSON.
Raw layout: C order, little-endian, BOOL one byte per element, BF16 the 16 high bits of float32.
Outputs are returned raw the same way when `outputs[i].parameters.binary_data` or the request's
`parameters.binary_data_output` is true (the response then carries the header too).
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

# DinoML dtype -> protocol datatype name.
DATATYPES = {"float32": "FP32", "float16": "FP16", "bfloat16": "BF16", "int8": "INT8", "uint8": "UINT8",
             "int32": "INT32", "int64": "INT64", "bool": "BOOL"}
# Every datatype the protocol defines, for "known but not served" messages.
PROTOCOL_DATATYPES = ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16",
                      "FP32", "FP64", "BF16", "BYTES")
# Raw (binary extension) element type per protocol datatype; BF16 travels as its uint16 bits.
_RAW = {"FP32": np.dtype("<f4"), "FP16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "INT8": np.dtype("i1"),
        "UINT8": np.dtype("u1"), "INT32": np.dtype("<i4"), "INT64": np.dtype("<i8"), "BOOL": np.dtype("?")}
# What JSON `data` is converted to before the runtime sees it (BF16: float32, rounded by the runtime).
_JSON_AS = {"FP32": np.float32, "FP16": np.float16, "BF16": np.float32, "INT8": np.int8, "UINT8": np.uint8,
            "INT32": np.int32, "INT64": np.int64, "BOOL": np.bool_}

HEADER_LENGTH = "inference-header-content-length"


class ProtocolError(Exception):
    """A request the protocol rejects: `status` is the HTTP status, str(self) the message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class TensorSig:
    """One input or output as the protocol shows it: shape items are ints, -1 for dynamic dims;
    bounds gives (min, max) per dynamic axis (None for fixed ones)."""
    name: str
    datatype: str
    shape: Tuple[int, ...]
    bounds: Tuple[Optional[Tuple[int, int]], ...]

    def metadata(self) -> dict:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


def signature_of(info) -> TensorSig:
    """TensorSig of a dinoml.runtime.TensorInfo."""
    shape, bounds = [], []
    for item, (_, lo, hi) in zip(info.shape, info.axes):
        if isinstance(item, int):
            shape.append(item)
            bounds.append(None)
        else:
            shape.append(-1)
            bounds.append((int(lo), int(hi)))
    return TensorSig(info.name, DATATYPES[info.dtype], tuple(shape), tuple(bounds))


@dataclasses.dataclass
class InferRequest:
    """A parsed infer request: inputs ready for Session.run_numpy, the outputs to return (None = all)
    and whether each is wanted raw."""
    id: Optional[str]
    inputs: Dict[str, np.ndarray]
    outputs: Optional[List[str]]
    binary_outputs: Dict[str, bool]
    binary_default: bool
    timeout_us: Optional[int]


def _obj(v: Any, what: str) -> dict:
    if not isinstance(v, dict):
        raise ProtocolError(400, f"{what} must be a JSON object, got {_kind(v)}")
    return v


def _kind(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(v), type(v).__name__)


def _params(d: dict, what: str) -> dict:
    p = d.get("parameters", {})
    if p is None:
        return {}
    return _obj(p, f"{what}.parameters")


def _flag(p: dict, key: str, what: str) -> bool:
    v = p.get(key, False)
    if not isinstance(v, bool):
        raise ProtocolError(400, f"{what}.parameters.{key} must be true or false, got {_kind(v)}")
    return v


def split_body(body: bytes, header_length: Optional[str]) -> Tuple[bytes, bytes]:
    """(JSON part, binary part) of a request body, from the Inference-Header-Content-Length value."""
    if header_length is None:
        return body, b""
    try:
        n = int(header_length.strip())
    except ValueError:
        raise ProtocolError(400, f"Inference-Header-Content-Length must be an integer, got {header_length!r}")
    if n < 0 or n > len(body):
        raise ProtocolError(400, f"Inference-Header-Content-Length is {n} but the body has {len(body)} bytes")
    return body[:n], body[n:]


def load_json(raw: bytes, what: str = "request body") -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(400, f"malformed JSON in the {what}: {e}")
    except RecursionError:
        raise ProtocolError(400, f"malformed JSON in the {what}: nested too deeply")


def _shape(v: Any, what: str) -> Tuple[int, ...]:
    if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in v):
        raise ProtocolError(400, f"{what}.shape must be an array of integers, got {json.dumps(v)[:80]}")
    if any(d < 0 for d in v):
        raise ProtocolError(400, f"{what}.shape {v} has a negative dimension")
    return tuple(v)


def _check_shape(sig: TensorSig, shape: Tuple[int, ...], what: str) -> None:
    want = "[" + ", ".join("?" if d < 0 else str(d) for d in sig.shape) + "]"
    if len(shape) != len(sig.shape):
        raise ProtocolError(400, f"{what} has shape {list(shape)} (rank {len(shape)}) but the model expects "
                                 f"rank {len(sig.shape)}: {want}")
    for axis, (got, fixed, bounds) in enumerate(zip(shape, sig.shape, sig.bounds)):
        if fixed >= 0 and got != fixed:
            raise ProtocolError(400, f"{what} has shape {list(shape)} but the model expects "
                                     f"{want} (axis {axis} must be {fixed})")
        if bounds is not None and not bounds[0] <= got <= bounds[1]:
            raise ProtocolError(400, f"{what} has shape {list(shape)}: axis {axis} is {got}, outside the "
                                     f"model's range [{bounds[0]}, {bounds[1]}]")


def _json_tensor(data: Any, datatype: str, shape: Tuple[int, ...], what: str) -> np.ndarray:
    count = math.prod(shape)
    if not isinstance(data, list):
        data = [data]
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError):  # ragged nesting
        raise ProtocolError(400, f"{what}.data is not a rectangular array of numbers")
    if arr.size != count:
        raise ProtocolError(400, f"{what}.data has {arr.size} elements but shape {list(shape)} needs {count}")
    kind = arr.dtype.kind if arr.size else "b" if datatype == "BOOL" else "i"
    if datatype == "BOOL":
        if kind != "b":
            raise ProtocolError(400, f"{what}.data must hold true/false for datatype BOOL")
    elif datatype in ("FP32", "FP16", "BF16"):
        if kind not in "if":
            raise ProtocolError(400, f"{what}.data must hold numbers for datatype {datatype}")
    else:  # integers: reject fractions, booleans and values outside the type's range
        if kind != "i" and kind != "u":
            raise ProtocolError(400, f"{what}.data must hold integers for datatype {datatype}")
        info = np.iinfo(_JSON_AS[datatype])
        if arr.size and (int(arr.min()) < info.min or int(arr.max()) > info.max):
            raise ProtocolError(400, f"{what}.data has values outside the range of {datatype} "
                                     f"[{info.min}, {info.max}]")
    return arr.astype(_JSON_AS[datatype], copy=False).reshape(shape)


def parse_infer_request(body: bytes, header_length: Optional[str], inputs: Sequence[TensorSig],
                        outputs: Sequence[TensorSig], model: str) -> InferRequest:
    """Parses and validates one infer request against the model's signature."""
    head, tail = split_body(body, header_length)
    req = _obj(load_json(head), "the request")
    rid = req.get("id")
    if rid is not None and not isinstance(rid, str):
        raise ProtocolError(400, f"request id must be a string, got {_kind(rid)}")
    params = _params(req, "request")
    timeout_us = params.get("timeout")
    if timeout_us is not None and (not isinstance(timeout_us, int) or isinstance(timeout_us, bool) or timeout_us < 0):
        raise ProtocolError(400, f"request parameters.timeout must be a non-negative integer (microseconds), "
                                 f"got {json.dumps(timeout_us)[:40]}")
    binary_default = _flag(params, "binary_data_output", "request")
    by_name = {s.name: s for s in inputs}
    items = req.get("inputs")
    if not isinstance(items, list) or not items:
        raise ProtocolError(400, f"the request needs \"inputs\": a non-empty array (model '{model}' takes "
                                 f"{', '.join(by_name)})")
    feeds: Dict[str, np.ndarray] = {}
    offset = 0
    for i, item in enumerate(items):
        what = f"inputs[{i}]"
        _obj(item, what)
        name = item.get("name")
        if not isinstance(name, str):
            raise ProtocolError(400, f"{what}.name must be a string")
        what = f"input '{name}'"
        sig = by_name.get(name)
        if sig is None:
            raise ProtocolError(400, f"model '{model}' has no input '{name}'; its inputs: "
                                     f"{', '.join(f'{s.name} ({s.datatype})' for s in inputs)}")
        if name in feeds:
            raise ProtocolError(400, f"{what} is given twice")
        dt = item.get("datatype")
        if not isinstance(dt, str):
            raise ProtocolError(400, f"{what}.datatype must be a string such as \"{sig.datatype}\"")
        if dt != sig.datatype:
            known = "" if dt in PROTOCOL_DATATYPES else f" (\"{dt}\" is not a protocol datatype)"
            raise ProtocolError(400, f"{what} has datatype {dt} but model '{model}' expects {sig.datatype}{known}")
        shape = _shape(item.get("shape"), what)
        _check_shape(sig, shape, what)
        p = _params(item, what)
        size = p.get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ProtocolError(400, f"{what}.parameters.binary_data_size must be a non-negative integer")
            if "data" in item:
                raise ProtocolError(400, f"{what} has both \"data\" and parameters.binary_data_size")
            raw = _RAW[dt]
            need = math.prod(shape) * raw.itemsize
            if size != need:
                raise ProtocolError(400, f"{what}: binary_data_size is {size} bytes but shape {list(shape)} of "
                                         f"{dt} needs {need}")
            if offset + size > len(tail):
                raise ProtocolError(400, f"{what}: the body ends {offset + size - len(tail)} bytes short of its "
                                         f"binary data (binary part: {len(tail)} bytes)")
            arr = np.frombuffer(tail, dtype=raw, count=math.prod(shape), offset=offset).reshape(shape)
            if dt == "BOOL" and arr.size and tail[offset:offset + size].strip(b"\x00\x01"):
                raise ProtocolError(400, f"{what}: BOOL binary data must be bytes 0 or 1")
            offset += size
            feeds[name] = arr
        else:
            if "data" not in item:
                raise ProtocolError(400, f"{what} has neither \"data\" nor parameters.binary_data_size")
            feeds[name] = _json_tensor(item["data"], dt, shape, what)
    if offset != len(tail):
        raise ProtocolError(400, f"the body has {len(tail) - offset} bytes of binary data that no input claims "
                                 "(check Inference-Header-Content-Length and binary_data_size)")
    missing = [s.name for s in inputs if s.name not in feeds]
    if missing:
        raise ProtocolError(400, f"model '{model}' needs input(s) {', '.join(missing)}")
    wanted, binary = None, {}
    out_items = req.get("outputs")
    if out_items is not None:
        if not isinstance(out_items, list):
            raise ProtocolError(400, "\"outputs\" must be an array")
        known = {s.name for s in outputs}
        wanted = []
        for i, item in enumerate(out_items):
            _obj(item, f"outputs[{i}]")
            name = item.get("name")
            if not isinstance(name, str) or name not in known:
                raise ProtocolError(400, f"model '{model}' has no output {json.dumps(name)[:60]}; its outputs: "
                                         f"{', '.join(sorted(known))}")
            p = _params(item, f"output '{name}'")
            if "classification" in p:
                raise ProtocolError(400, f"output '{name}': the classification extension is not supported")
            if name not in wanted:
                wanted.append(name)
            binary[name] = _flag(p, "binary_data", f"output '{name}'") if "binary_data" in p else binary_default
    return InferRequest(rid, feeds, wanted, binary, binary_default, timeout_us)


def _bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(a), np.uint16(0x7FC0), rounded)


def build_infer_response(model: str, version: str, req: InferRequest, results: Dict[str, np.ndarray],
                         outputs: Sequence[TensorSig]) -> Tuple[bytes, Optional[int]]:
    """(body, JSON header length or None when all outputs are JSON)."""
    names = req.outputs if req.outputs is not None else [s.name for s in outputs]
    dts = {s.name: s.datatype for s in outputs}
    items, blobs = [], []
    for name in names:
        arr = np.asarray(results[name])
        dt = dts[name]
        item: Dict[str, Any] = {"name": name, "datatype": dt, "shape": list(arr.shape)}
        if req.binary_outputs.get(name, req.binary_default):
            raw = _bf16_bits(arr) if dt == "BF16" else np.ascontiguousarray(arr, dtype=_RAW[dt])
            blob = raw.tobytes()
            item["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            item["data"] = arr.reshape(-1).tolist()
        items.append(item)
    resp: Dict[str, Any] = {"model_name": model, "model_version": version, "outputs": items}
    if req.id is not None:
        resp["id"] = req.id
    head = json.dumps(resp, separators=(",", ":")).encode()
    if not blobs:
        return head, None
    return head + b"".join(blobs), len(head)


def error_body(message: str) -> bytes:
    return json.dumps({"error": message}).encode()
