"""A ctypes binding of the runtime C ABI (include/dinoml/runtime.h) for the GPU machine, where
the pybind11 extension built here (for this machine's Python) does not load. It needs only the
artifact's own lib/libdinoml_runtime.so, and passes torch CUDA tensors as device pointers
(DINOML_DEVICE_CUDA), so inputs and outputs never leave the GPU.
"""
from __future__ import annotations

import ctypes
import glob
import os
import site
import sys

MAX_RANK = 8
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "int8": 3, "uint8": 4, "int32": 5, "int64": 6, "bool": 7}
DEVICE_HOST, DEVICE_CUDA = 0, 1


def cuda_library_dirs():
    """Folders holding cuBLASLt (CUDA artifacts link it; it is not shipped inside them): the
    system's CUDA, else the copy PyTorch's wheels carry."""
    dirs = [d for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/lib") if os.path.exists(os.path.join(d, "libcublasLt.so.13"))]
    for sp in site.getsitepackages() + [site.getusersitepackages()]:
        dirs += sorted({os.path.dirname(p) for p in glob.glob(os.path.join(sp, "nvidia", "**", "libcublasLt.so.13"),
                                                                recursive=True)})
    return dirs


def reexec_with_cuda_libraries(tag: str = "DML_CUDA_LIBS_SET"):
    """The dynamic loader reads LD_LIBRARY_PATH once, at process start: put cuBLASLt's folders on
    it and re-execute this script once (call before loading any artifact)."""
    if os.environ.get(tag) == "1":
        return
    os.environ[tag] = "1"
    os.environ["LD_LIBRARY_PATH"] = ":".join(cuda_library_dirs() + [os.environ.get("LD_LIBRARY_PATH", "")])
    os.execv(sys.executable, [sys.executable] + sys.argv)


class Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("nbytes", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * MAX_RANK),
                ("device", ctypes.c_int32)]


class AxisInfo(ctypes.Structure):
    _fields_ = [("dim_name", ctypes.c_char_p), ("min", ctypes.c_int64), ("max", ctypes.c_int64)]


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("axes", AxisInfo * MAX_RANK)]


class DinoMLError(RuntimeError):
    pass


_libs = {}


def _lib(artifact_dir: str):
    path = os.path.join(artifact_dir, "lib", "libdinoml_runtime.so")
    real = os.path.realpath(path)
    if real in _libs:
        return _libs[real]
    lib = ctypes.CDLL(real)
    lib.dinoml_last_error.restype = ctypes.c_char_p
    lib.dinoml_status_name.restype = ctypes.c_char_p
    lib.dinoml_module_target.restype = ctypes.c_char_p
    lib.dinoml_module_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.dinoml_module_load_rank.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.dinoml_module_world_size.argtypes = [ctypes.c_void_p]
    lib.dinoml_session_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.dinoml_session_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(Tensor), ctypes.c_size_t,
                                       ctypes.POINTER(Tensor), ctypes.c_size_t]
    lib.dinoml_session_set_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.dinoml_session_synchronize.argtypes = [ctypes.c_void_p]
    lib.dinoml_session_free.argtypes = [ctypes.c_void_p]
    lib.dinoml_module_free.argtypes = [ctypes.c_void_p]
    lib.dinoml_module_target.argtypes = [ctypes.c_void_p]
    lib.dinoml_module_num_nodes.argtypes = [ctypes.c_void_p]
    lib.dinoml_module_num_nodes.restype = ctypes.c_size_t
    lib.dinoml_session_run_timed.argtypes = [ctypes.c_void_p, ctypes.POINTER(Tensor), ctypes.c_size_t,
                                             ctypes.POINTER(Tensor), ctypes.c_size_t,
                                             ctypes.POINTER(ctypes.c_double), ctypes.c_size_t]
    for f in ("input", "output"):
        getattr(lib, f"dinoml_module_num_{f}s").argtypes = [ctypes.c_void_p]
        getattr(lib, f"dinoml_module_num_{f}s").restype = ctypes.c_size_t
        getattr(lib, f"dinoml_module_{f}_info").argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(TensorInfo)]
    _libs[real] = lib
    return lib


def _check(lib, status, what):
    if status != 0:
        raise DinoMLError(f"{what}: {lib.dinoml_status_name(status).decode()}: {lib.dinoml_last_error().decode()}")


class Module:
    def __init__(self, artifact_dir: str, rank: int = 0):
        self.lib = _lib(artifact_dir)
        self.h = ctypes.c_void_p()
        _check(self.lib, self.lib.dinoml_module_load_rank(artifact_dir.encode(), rank, ctypes.byref(self.h)),
               f"load {artifact_dir} rank {rank}")
        self.world_size = self.lib.dinoml_module_world_size(self.h)
        self.target = self.lib.dinoml_module_target(self.h).decode()

        def infos(kind):
            out = []
            for i in range(getattr(self.lib, f"dinoml_module_num_{kind}s")(self.h)):
                ti = TensorInfo()
                _check(self.lib, getattr(self.lib, f"dinoml_module_{kind}_info")(self.h, i, ctypes.byref(ti)), kind)
                out.append((ti.name.decode(), ti.dtype))
            return out
        self.inputs, self.outputs = infos("input"), infos("output")
        # The module's optional CUDA-graph entry points (src/lower/cuda/cuda_graphs.cpp): the same
        # module.so the runtime loaded (dlopen returns the loaded copy), or None (ROCm modules).
        so = ctypes.CDLL(os.path.join(os.path.realpath(artifact_dir), "module.so"))
        self._graphs_set = getattr(so, "dinoml_module_cuda_graphs_set", None)
        self._graph_stats = getattr(so, "dinoml_module_cuda_graph_stats", None)
        self._so = so

    def graphs(self, on=None):
        """CUDA-graph replay on/off for this module (None: query); returns the state."""
        if self._graphs_set is None:
            return False
        return bool(self._graphs_set(ctypes.c_int(-1 if on is None else int(bool(on)))))

    def graph_stats(self):
        """(captured, replayed, uncapturable) runs since load, or None without graph support."""
        if self._graph_stats is None:
            return None
        v = [ctypes.c_longlong() for _ in range(3)]
        self._graph_stats(*[ctypes.byref(x) for x in v])
        return tuple(x.value for x in v)

    def session(self):
        return Session(self)

    def __del__(self):
        if getattr(self, "h", None):
            self.lib.dinoml_module_free(self.h)


class Session:
    def __init__(self, module: Module):
        self.m = module
        self.h = ctypes.c_void_p()
        _check(module.lib, module.lib.dinoml_session_create(module.h, ctypes.byref(self.h)), "session_create")

    def set_stream(self, stream_ptr: int):
        _check(self.m.lib, self.m.lib.dinoml_session_set_stream(self.h, ctypes.c_void_p(stream_ptr)), "set_stream")

    def synchronize(self):
        _check(self.m.lib, self.m.lib.dinoml_session_synchronize(self.h), "synchronize")

    @staticmethod
    def _tensor(name, t, dtype_code):
        x = Tensor()
        x.name = name.encode()
        x.data = t.data_ptr()
        x.nbytes = t.numel() * t.element_size()
        x.dtype = dtype_code
        x.ndim = t.dim()
        for i, s in enumerate(t.shape):
            x.shape[i] = s
        x.device = DEVICE_CUDA if t.is_cuda else DEVICE_HOST
        return x

    def prepare(self, inputs: dict, outputs: dict):
        """ctypes arrays for run(): inputs/outputs are name -> contiguous torch tensors (CUDA or
        CPU); outputs are written in place."""
        codes = dict(self.m.inputs)
        ins = (Tensor * len(inputs))(*[self._tensor(n, t, codes[n]) for n, t in inputs.items()])
        ocodes = dict(self.m.outputs)
        outs = (Tensor * len(outputs))(*[self._tensor(n, t, ocodes[n]) for n, t in outputs.items()])
        return ins, outs

    def run_prepared(self, ins, outs):
        _check(self.m.lib, self.m.lib.dinoml_session_run(self.h, ins, len(ins), outs, len(outs)), "run")

    def run(self, inputs: dict, outputs: dict):
        ins, outs = self.prepare(inputs, outputs)
        self.run_prepared(ins, outs)
        return outs

    def run_timed(self, inputs: dict, outputs: dict, runs: int = 1):
        """dinoml_session_run_timed `runs` times: the seconds per graph node, summed over the runs."""
        lib = self.m.lib
        n = lib.dinoml_module_num_nodes(self.m.h)
        sec = (ctypes.c_double * max(n, 1))()
        ins, outs = self.prepare(inputs, outputs)
        for _ in range(runs):
            _check(lib, lib.dinoml_session_run_timed(self.h, ins, len(ins), outs, len(outs), sec, n), "run_timed")
        return list(sec)[:n]

    def __del__(self):
        if getattr(self, "h", None):
            self.m.lib.dinoml_session_free(self.h)
