"""DinoML: an ahead-of-time ML compiler. Python is a thin front end over the C++ core.

    import dinoml as dml
    batch = dml.Dim("batch", min=1, max=4, buckets=(1, 3, 4))
    spec = dml.trace(model, inputs={"x": dml.TensorSpec([batch, 8])}, constants=weights)
    art = dml.compile(spec, target="cpu", out="out/model")
    outputs = dml.runtime.load(art.path).create_session().run_numpy({"x": x})
"""
from . import dtypes, gguf, nn, ops, runtime  # noqa: F401
from .gguf import gguf_constant
from .compiler import Artifact, compile  # noqa: A004
from .dims import Dim, SymDim, TensorSpec
from .errors import (ArtifactError, CompileError, DinoMLRuntimeError, InvalidArgumentError, IrError, NotFoundError,
                     ShapeError, TraceError)
from .module import Module, Parameter
from .reference import reference
from .spec import Spec
from .tensor import Tensor
from .tracer import state, trace
from .onnx import OnnxImportError, from_onnx  # noqa: E402

__version__ = "0.1.0"

__all__ = ["Dim", "SymDim", "TensorSpec", "Module", "Parameter", "Tensor", "Spec", "trace", "state", "ops", "nn",
           "compile", "Artifact", "runtime", "reference", "ShapeError", "IrError", "CompileError",
           "DinoMLRuntimeError", "InvalidArgumentError", "NotFoundError", "ArtifactError", "TraceError", "dtypes",
           "gguf", "gguf_constant",
           "from_onnx", "OnnxImportError"]
