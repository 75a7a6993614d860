"""`dinoml.runtime`: loads artifacts and runs them, through the runtime C ABI
(include/dinoml/runtime.h) bound in the extension — the same code path as C and C++ callers.

    mod = dinoml.runtime.load("out/linear")
    sess = mod.create_session()
    y = sess.run_numpy({"x": x})["y"]

A Module is immutable and shared by threads; a Session owns its arena and states and is used by
one thread at a time. The GIL is released while a session runs, so threads with their own
sessions run in parallel.

`run_torch` is zero-copy: the session reads the input tensors' memory in place and writes
outputs the call allocates as torch tensors (CUDA tensors stay on the GPU and the run is enqueued
on PyTorch's current stream). `run_dlpack` does the same for any DLPack producer.
This module needs only the runtime extension `_dinoml_rt` (a runtime-only install).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ._ext import rt_ext
from .errors import DinoMLRuntimeError, InvalidArgumentError


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


@dataclasses.dataclass(frozen=True)
class ConstantInfo:
    """A constant of a compiled graph. GGUF-block (quantized) constants are uint8[nbytes] values."""
    name: str
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int
    swappable: bool
    quant: Optional[str]

    @classmethod
    def _from(cls, d: dict) -> "ConstantInfo":
        return cls(d["name"], d["dtype"], tuple(d["shape"]), d["nbytes"], d["swappable"], d["quant"])


class Module:
    """A loaded artifact."""

    def __init__(self, path: Union[str, os.PathLike], weights: Optional[Union[str, os.PathLike]] = None,
                 rank: int = 0):
        self.path = os.fspath(path)
        self.rank = int(rank)
        self._m = rt_ext.RtModule(self.path, os.fspath(weights) if weights is not None else None, self.rank)
        self.inputs: List[TensorInfo] = [TensorInfo._from(d) for d in self._m.inputs]
        self.outputs: List[TensorInfo] = [TensorInfo._from(d) for d in self._m.outputs]
        self.states: List[TensorInfo] = [TensorInfo._from(d) for d in self._m.states]
        # Inputs / outputs whose source model (ONNX) declares another element type (float64 computed
        # in float32), and the import's notes, from metadata.json.
        self.source_dtypes: Dict[str, str] = {}
        # Elements of ONNX sequence inputs / outputs: tensor name -> (sequence name, index).
        self.sequences: Dict[str, tuple] = {}
        self.notes: List[str] = []
        try:
            import json
            with open(os.path.join(self.path, "metadata.json")) as f:
                meta = json.load(f)
            for t in meta.get("inputs", []) + meta.get("outputs", []):
                if "source_dtype" in t:
                    self.source_dtypes[t["name"]] = t["source_dtype"]
                if "sequence" in t:
                    self.sequences[t["name"]] = (t["sequence"], int(t["sequence_index"]))
            self.notes = list(meta.get("notes", []))
        except (OSError, ValueError):
            pass

    @property
    def name(self) -> str:
        return self._m.name

    @property
    def graph_hash(self) -> str:
        return self._m.graph_hash

    @property
    def target(self) -> str:
        """"cpu" or "cuda" (the manifest's target)."""
        return self._m.target

    @property
    def world_size(self) -> int:
        """Ranks of a tensor-parallel artifact (compiled with tensor_parallel=N); 1 otherwise."""
        return self._m.world_size

    def create_session(self) -> "Session":
        return Session(self)

    # ---- weights without recompiling (docs/deploy.md) ----
    @property
    def weights_policy(self) -> str:
        """"embedded", "swappable" or "external": how the artifact was compiled (--weights)."""
        return self._m.weights_policy

    @property
    def constants(self) -> List[ConstantInfo]:
        """Every constant of the compiled graph, with whether set_constant accepts it."""
        return [ConstantInfo._from(d) for d in self._m.constants]

    def swappable_constants(self) -> List[str]:
        return [c.name for c in self.constants if c.swappable]

    def set_constants(self, values: Mapping[str, np.ndarray]) -> None:
        """Replaces constants by name, all or nothing. Each array must have the constant's dtype and
        shape (bfloat16 constants also take float32 arrays); prepacked forms are rebuilt. Atomic for
        running sessions: runs in flight finish on the old weights, later runs use the new ones.
        A constant folded away at compile time cannot be replaced (the error says so and lists the
        swappable ones; compile with weights="swappable" to keep every constant)."""
        self._m.set_constants(dict(values))

    def set_constant(self, name: str, value: np.ndarray) -> None:
        self._m.set_constants({name: value})

    def load_weights(self, path: Union[str, os.PathLike]) -> None:
        """Replaces the constants named in a safetensors file (checked completely first), atomically."""
        self._m.set_weights_file(os.fspath(path))

    def get_constant(self, name: str) -> np.ndarray:
        """A copy of a constant's current value (bfloat16 as float32)."""
        return self._m.get_constant(name)

    def export_weights(self, path: Union[str, os.PathLike]) -> None:
        """Writes every constant's current value to a safetensors file."""
        self._m.export_weights(os.fspath(path))

    def __repr__(self):
        def sig(ts):
            return ", ".join(f"{t.name}: {t.dtype}[{', '.join(str(s) for s in t.shape)}]" for t in ts) or "none"
        return f"<dinoml.runtime.Module '{self.name}' ({sig(self.inputs)}) -> ({sig(self.outputs)})>"


def load(path: Union[str, os.PathLike], weights: Optional[Union[str, os.PathLike]] = None, rank: int = 0) -> Module:
    """Verifies (manifest, ABI, file hashes, CPU ISA) and loads an artifact directory. `weights`: a
    safetensors file with the constants (required for artifacts compiled with weights="external";
    for others its tensors replace the compiled-in values). The file is checked (header, names,
    dtypes, shapes, bounds) before any code of the artifact is loaded. `rank`: which rank's
    constants of a tensor-parallel artifact (run the ranks together with load_group)."""
    return Module(path, weights, rank)


# ONNX element types an artifact holds in another dtype (metadata "source_dtype") -> that dtype:
# run_numpy converts arrays of the source type in and back out (uint64 through the same bits).
_SOURCE_STORAGE = {"float64": np.float32, "int16": np.int32, "uint16": np.int32, "uint32": np.int64, "uint64": np.int64}


class SessionGroup:
    """The ranks of a tensor-parallel artifact run together: one Module (that rank's constants) and
    Session (its states, e.g. its heads of the KV cache) per rank, each rank on its own host thread.
    The artifact's all_reduce / all_gather nodes meet the other ranks through the artifact's kernel
    library: target cpu, an in-process communicator (the ranks share the CPU's cores); target cuda,
    NCCL (rank r on GPU r; NCCL from PyTorch's nvidia-nccl wheel when installed, else the system's
    libnccl.so.2 or $DINOML_NCCL_LIBRARY). `run_numpy` feeds the same inputs to every rank (or one
    dict per rank) and returns rank 0's outputs (every rank computes the same). A rank that fails
    aborts the communicator: the other ranks stop at their next collective instead of waiting, the
    error names the rank, and the group is usable again for the next run."""

    def __init__(self, path: Union[str, os.PathLike]):
        import ctypes
        import threading
        from concurrent.futures import ThreadPoolExecutor
        self.path = os.fspath(path)
        first = Module(self.path)
        self.world_size = W = first.world_size
        self.target = first.target
        if W < 2:
            raise InvalidArgumentError(f"artifact '{self.path}' is not tensor-parallel (world size 1): load it with "
                                       "dinoml.runtime.load")
        if self.target not in ("cpu", "cuda"):
            raise InvalidArgumentError(f"artifact '{self.path}' targets {self.target}: session groups run cpu and "
                                       "cuda artifacts")
        # The kernel library's functions as module.so resolves them (a library of the same soname may
        # have been loaded earlier): looked up through module.so's handle.
        self._lib = lib = ctypes.CDLL(os.path.join(self.path, "module.so"), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        # One thread per rank, for the group's life: a GPU rank's thread keeps its device current.
        self._threads = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"dinoml-rank{r}") for r in range(W)]
        self._lock = threading.Lock()  # one group run at a time
        self.modules: List[Module] = [first] + [None] * (W - 1)
        self.sessions: List[Session] = [None] * W
        self._comms = [None] * W
        if self.target == "cpu":
            lib.dml_cpu_comm_create.restype = ctypes.c_void_p
            lib.dml_cpu_comm_create.argtypes = [ctypes.c_int]
            lib.dml_cpu_comm_destroy.argtypes = [ctypes.c_void_p]
            lib.dml_cpu_comm_bind.argtypes = [ctypes.c_void_p, ctypes.c_int]
            lib.dml_cpu_comm_abort.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            self.modules = [first] + [Module(self.path, rank=r) for r in range(1, W)]
            self.sessions = [m.create_session() for m in self.modules]
        else:
            lib.dml_cuda_last_error.restype = ctypes.c_char_p
            lib.dml_cuda_comm_init.restype = ctypes.c_void_p
            lib.dml_cuda_comm_init.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p]
            for f in ("dml_cuda_comm_bind", "dml_cuda_comm_abort", "dml_cuda_comm_destroy"):
                getattr(lib, f).argtypes = [ctypes.c_void_p]
            lib.dml_cuda_nccl_load.argtypes = [ctypes.c_char_p]
            self._call(lib.dml_cuda_nccl_load(_pytorch_nccl()), "loading NCCL")

            def load_rank(r):
                self._set_device(r)
                m = self.modules[r] if r == 0 else Module(self.path, rank=r)
                return m, m.create_session()
            for r, f in enumerate([self._threads[r].submit(load_rank, r) for r in range(W)]):
                self.modules[r], self.sessions[r] = f.result()
        self._init_comms()

    def _call(self, status: int, what: str):
        if status != 0:
            raise DinoMLRuntimeError(f"{what}: {self._lib.dml_cuda_last_error().decode(errors='replace')}")

    def _set_device(self, r: int):
        if self._lib.dml_cuda_set_device(r) != 0:
            raise InvalidArgumentError(
                f"artifact '{self.path}' is tensor-parallel over {self.world_size} GPUs (rank r runs on GPU r) but GPU "
                f"{r} is not available here: {self._lib.dml_cuda_last_error().decode(errors='replace')}")

    def _init_comms(self):
        import ctypes
        W = self.world_size
        if self.target == "cpu":
            comm = self._lib.dml_cpu_comm_create(W)
            self._comms = [comm] * W
            return
        uid = ctypes.create_string_buffer(128)
        self._call(self._lib.dml_cuda_nccl_unique_id(uid), "ncclGetUniqueId")

        def init(r):  # every rank joins at once (ncclCommInitRank waits for the others)
            self._set_device(r)
            c = self._lib.dml_cuda_comm_init(W, r, uid.raw)
            if not c:
                raise DinoMLRuntimeError(f"rank {r}: {self._lib.dml_cuda_last_error().decode(errors='replace')}")
            return c
        self._comms = [f.result() for f in [self._threads[r].submit(init, r) for r in range(W)]]

    def _destroy_comms(self):
        if self.target == "cpu":
            if self._comms[0]:
                self._lib.dml_cpu_comm_destroy(self._comms[0])
        else:
            for r, c in enumerate(self._comms):
                if c:
                    self._threads[r].submit(self._lib.dml_cuda_comm_destroy, c).result()
        self._comms = [None] * self.world_size

    def _abort(self, why: str):
        if self.target == "cpu":
            self._lib.dml_cpu_comm_abort(self._comms[0], why.encode())
        else:
            for c in self._comms:
                self._lib.dml_cuda_comm_abort(c)

    def _rank_run(self, r: int, feeds):
        cpu = self.target == "cpu"
        if cpu:
            self._lib.dml_cpu_comm_bind(self._comms[r], r)
        else:
            self._lib.dml_cuda_comm_bind(self._comms[r])
        try:
            return self.sessions[r].run_numpy(feeds)
        except Exception as e:
            self._abort(f"rank {r} failed: {e}")
            raise
        finally:
            if cpu:
                self._lib.dml_cpu_comm_bind(None, -1)
            else:
                self._lib.dml_cuda_comm_bind(None)

    def run_numpy(self, inputs=None, **kw) -> Dict[str, np.ndarray]:
        W = self.world_size
        if isinstance(inputs, (list, tuple)):
            if len(inputs) != W:
                raise InvalidArgumentError(f"{len(inputs)} input sets for {W} ranks")
            per_rank = [dict(i) for i in inputs]
        else:
            feeds = dict(inputs or {})
            feeds.update(kw)
            per_rank = [feeds] * W
        with self._lock:
            futures = [self._threads[r].submit(self._rank_run, r, per_rank[r]) for r in range(W)]
            results, errors = [], []
            for r, f in enumerate(futures):
                try:
                    results.append(f.result())
                except Exception as e:  # noqa: BLE001 - re-raised below with the rank
                    errors.append((r, e))
            if errors:
                # Fresh communicators for the next run (these stay aborted).
                self._destroy_comms()
                self._init_comms()
                # The rank whose own failure aborted the group, else the first error.
                r, e = next(((r, e) for r, e in errors if "aborted" not in str(e)), errors[0])
                raise type(e)(f"tensor-parallel rank {r} of {W}: {e}") from e
        return results[0]

    run = run_numpy

    def reset_states(self) -> None:
        for r, s in enumerate(self.sessions):
            self._threads[r].submit(s.reset_states).result()

    def close(self) -> None:
        if getattr(self, "_comms", None) and any(self._comms):
            self._destroy_comms()
        for t in getattr(self, "_threads", []):
            t.shutdown(wait=True)
        self._threads = []

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _pytorch_nccl() -> Optional[bytes]:
    """libnccl.so.2 of PyTorch's nvidia-nccl wheel when installed (None: the system's)."""
    import glob
    import importlib.util
    for pkg in ("nvidia.nccl", "nvidia"):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            hits = sorted(glob.glob(os.path.join(root, "**", "libnccl.so*"), recursive=True))
            if hits:
                return hits[0].encode()
    return None


def load_group(path: Union[str, os.PathLike]) -> SessionGroup:
    """Loads every rank of a tensor-parallel artifact (compiled with tensor_parallel=N) as a
    SessionGroup."""
    return SessionGroup(path)


def export_weights(artifact: Union[str, os.PathLike], path: Union[str, os.PathLike]) -> None:
    """Writes an artifact's constants.bin as a safetensors file (no code loaded), like
    `dinoml export-weights DIR FILE`."""
    rt_ext.export_artifact_weights(os.fspath(artifact), os.fspath(path))


def _torch_to_numpy(t):
    import torch
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)  # raw bf16 bits, accepted as-is
    return t.numpy()


_TORCH_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "int8": "int8",
                 "uint8": "uint8", "int32": "int32", "int64": "int64", "bool": "bool"}


def _torch_dtype(torch, name: str):
    return getattr(torch, _TORCH_DTYPES[name])


def _as_torch_input(name: str, t, want: Optional[str]):
    import torch
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"run_torch: input '{name}' is a {type(t).__name__}, not a torch.Tensor "
                                   "(run_numpy takes arrays, run_dlpack other DLPack producers)")
    if t.device.type not in ("cpu", "cuda"):
        raise InvalidArgumentError(f"run_torch: input '{name}' is on {t.device}; DinoML runs CPU and CUDA tensors")
    got = str(t.dtype).replace("torch.", "")
    if got not in _TORCH_DTYPES:
        raise InvalidArgumentError(f"run_torch: input '{name}' has dtype {t.dtype}, which DinoML does not have"
                                   + (f"; the model expects {want}: convert it with .to(torch.{want})" if want else ""))
    if want is not None and got != want:
        raise InvalidArgumentError(f"run_torch: input '{name}' has dtype {got} but the model expects {want}; "
                                   f"convert it with .to(torch.{want})")
    t = t.detach()
    return t if t.is_contiguous() else t.contiguous()


def _pointer_tuple(name: str, t):
    dtype = str(t.dtype).replace("torch.", "")
    return (name, t.data_ptr(), t.numel() * t.element_size(), dtype, list(t.shape), 1 if t.is_cuda else 0)


class Session:
    """One execution context of a Module (its own arena and states)."""

    def __init__(self, module: Module):
        self.module = module
        self._s = rt_ext.RtSession(module._m)
        self._out_dtypes = {o.name: o.dtype for o in module.outputs}
        self._in_dtypes = {i.name: i.dtype for i in module.inputs}
        self._stream = None  # the CUDA stream set on the session (run_torch follows torch's)
        self._plans = {}  # run_torch: input signature -> planned outputs
        self._state_dtypes = {s.name: s.dtype for s in module.states}

    def run_numpy(self, inputs: Optional[Mapping[str, np.ndarray]] = None, **kw) -> Dict[str, np.ndarray]:
        """Runs with {input name: numpy array} -> {output name: array}.

        Arrays are made C-contiguous; dtypes must match (a mismatch is the runtime's
        InvalidArgumentError, a ValueError) except bfloat16 inputs, which accept float32 arrays
        (rounded to nearest even) or uint16 bit arrays. bfloat16 outputs come back as float32.
        Inputs and outputs the source model declares float64 (computed in float32, see
        Module.notes) take float64 arrays (cast to float32) and come back as float64."""
        feeds = dict(inputs or {})
        feeds.update(kw)
        src = self.module.source_dtypes
        seqs = self.module.sequences
        if not src and not seqs:
            return self._s.run(feeds)
        if seqs:
            # A list / tuple for an ONNX sequence input feeds its elements "<name>[k]".
            seq_names = {s for s, _ in seqs.values()}
            for k in [k for k, v in feeds.items() if k in seq_names and isinstance(v, (list, tuple))]:
                for i, a in enumerate(feeds.pop(k)):
                    feeds[f"{k}[{i}]"] = a
        for k, v in feeds.items():
            want = _SOURCE_STORAGE.get(src.get(k, ""))
            if want is not None and isinstance(v, np.ndarray) and v.dtype == np.dtype(src[k]):
                feeds[k] = v.astype(want)
        out = self._s.run(feeds)
        res: Dict[str, object] = {}
        lists: Dict[str, dict] = {}
        for k, v in out.items():
            if src.get(k) in _SOURCE_STORAGE:
                v = v.astype(np.dtype(src[k]))
            if k in seqs:
                name, i = seqs[k]
                lists.setdefault(name, {})[i] = v
            else:
                res[k] = v
        for name, items in lists.items():
            res[name] = [items[i] for i in sorted(items)]
        return res

    run = run_numpy

    def profile_nodes(self, inputs: Optional[Mapping[str, np.ndarray]] = None, runs: int = 10, **kw) -> List[dict]:
        """Per-node time: runs `runs` times with timing and returns one dict per graph node, in graph
        order: {"index", "node", "op", "kernel", "seconds"} (mean per run), the kernel as chosen in
        the artifact's kernel_manifest.json. CPU artifacts: wall time; CUDA artifacts: device time
        between events around each node of a direct (not graph-replayed) run. Same as
        `dinoml benchmark --per-node`."""
        import json
        feeds = dict(inputs or {})
        feeds.update(kw)
        _, seconds = self._s.run_timed(feeds, runs)
        with open(os.path.join(self.module.path, "kernel_manifest.json")) as f:
            manifest = json.load(f)
        rows = []
        for i, (entry, sec) in enumerate(zip(manifest, seconds)):
            rows.append({"index": i, "node": entry.get("node"), "op": entry.get("op"),
                         "kernel": entry.get("selected"), "seconds": sec / runs})
        return rows

    def run_torch(self, inputs: Optional[Mapping] = None, **kw) -> Dict[str, "object"]:
        """Runs with {name: torch.Tensor} -> {name: torch.Tensor}, zero-copy.

        Inputs are read in place (a non-contiguous tensor is made contiguous first; dtypes must
        match the model's exactly, bfloat16 included). Outputs are new tensors of the model's
        dtypes, allocated here and written by the session directly: on the inputs' GPU when any
        input is a CUDA tensor (CUDA artifacts; the run is enqueued on PyTorch's current stream and
        returns without waiting), else on the CPU."""
        import torch
        feeds = dict(inputs or {})
        feeds.update(kw)
        cuda_devs = {t.device for t in feeds.values() if isinstance(t, torch.Tensor) and t.is_cuda}
        if len(cuda_devs) > 1:
            raise InvalidArgumentError(f"run_torch: inputs are on several GPUs ({sorted(map(str, cuda_devs))}); "
                                       "move them to one device")
        out_dev = next(iter(cuda_devs)) if cuda_devs else torch.device("cpu")
        keep, ins = [], []
        for name, t in feeds.items():
            t = _as_torch_input(name, t, self._in_dtypes.get(name))
            keep.append(t)
            ins.append(_pointer_tuple(name, t))
        if out_dev.type == "cuda":
            with torch.cuda.device(out_dev):
                stream = torch.cuda.current_stream(out_dev).cuda_stream
                if stream != self._stream:
                    self._s.set_stream(stream)
                    self._stream = stream
                return self._run_pointers(torch, ins, out_dev)
        return self._run_pointers(torch, ins, out_dev)

    def _run_pointers(self, torch, ins, out_dev):
        # Output shapes depend only on the inputs' names, dtypes, shapes and devices: plan once
        # per signature (the runtime still validates every run).
        key = tuple((n, dt, tuple(shape), dev) for n, _, _, dt, shape, dev in ins)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= 64:
                self._plans.clear()
            plan = self._plans[key] = self._s.plan_outputs(ins)
        outs, res = [], {}
        for name, dtype, shape, _ in plan:
            res[name] = torch.empty(shape, dtype=_torch_dtype(torch, dtype), device=out_dev)
            outs.append(_pointer_tuple(name, res[name]))
        self._s.run_pointers(ins, outs)
        return res

    def run_dlpack(self, inputs: Optional[Mapping] = None, **kw) -> Dict[str, "object"]:
        """run_torch for any DLPack producer (objects with __dlpack__, e.g. CuPy or JAX arrays),
        viewed as torch tensors without a copy; returns torch tensors (themselves DLPack
        producers, e.g. for cupy.from_dlpack)."""
        import torch
        feeds = dict(inputs or {})
        feeds.update(kw)
        return self.run_torch({k: v if isinstance(v, torch.Tensor) else torch.from_dlpack(v) for k, v in feeds.items()})

    def synchronize(self) -> None:
        """CUDA artifacts: waits for the session's queued work (run_torch on GPU tensors returns
        once the work is enqueued)."""
        self._s.synchronize()

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
