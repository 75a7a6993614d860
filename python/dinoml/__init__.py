"""DinoML: an ahead-of-time ML compiler. Python is a thin front end over the C++ core.

    import dinoml as dml
    batch = dml.Dim("batch", min=1, max=4, buckets=(1, 3, 4))
    spec = dml.trace(model, inputs={"x": dml.TensorSpec([batch, 8])}, constants=weights)
    art = dml.compile(spec, target="cpu", out="out/model")
    outputs = dml.runtime.load(art.path).create_session().run_numpy({"x": x})
"""
from . import runtime  # noqa: F401  (needs only the runtime extension `_dinoml_rt`)

from ._ext import ext as _compiler_ext
from .errors import (ArtifactError, CompileError, DinoMLRuntimeError, InvalidArgumentError, IrError, NotFoundError,
                     ShapeError, TraceError)

if _compiler_ext is not None:
    from . import dtypes, gguf, nn, ops  # noqa: F401
    from .gguf import gguf_constant
    from .compiler import Artifact, compile  # noqa: A004
    from .dims import Dim, SymDim, TensorSpec
    from .module import Module, Parameter
    from .reference import reference
    from .spec import Spec
    from .tensor import Tensor
    from .tracer import state, trace
    from .onnx import OnnxImportError, from_onnx  # noqa: E402

    def from_torch(*args, **kwargs):
        """PyTorch front end (imports torch): see dinoml.frontends.torch.from_torch."""
        from .frontends.torch import from_torch as f
        return f(*args, **kwargs)

    def from_exported_program(*args, **kwargs):
        """Converts a torch.export ExportedProgram: see dinoml.frontends.torch.from_exported_program."""
        from .frontends.torch import from_exported_program as f
        return f(*args, **kwargs)

    def compile_torch(*args, **kwargs):
        """Module + example inputs -> loaded artifact: see dinoml.frontends.torch.compile_torch."""
        from .frontends.torch import compile_torch as f
        return f(*args, **kwargs)

# The LLM text side loads on first use (extension `_dinoml_llm`); in a runtime-only install (no
# `_dinoml`) the front end's names say why they are missing.
def __getattr__(name):
    if name in ("llm", "Tokenizer", "Sampler", "SamplingParams"):
        import importlib
        llm = importlib.import_module(__name__ + ".llm")
        return llm if name == "llm" else getattr(llm, name)
    if _compiler_ext is None and not name.startswith("_"):
        from ._ext import require_compiler
        require_compiler()
    raise AttributeError(f"module 'dinoml' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = ["Dim", "SymDim", "TensorSpec", "Module", "Parameter", "Tensor", "Spec", "trace", "state", "ops", "nn",
           "compile", "Artifact", "runtime", "reference", "ShapeError", "IrError", "CompileError",
           "DinoMLRuntimeError", "InvalidArgumentError", "NotFoundError", "ArtifactError", "TraceError", "dtypes",
           "gguf", "gguf_constant",
           "from_onnx", "OnnxImportError", "from_torch", "from_exported_program", "compile_torch", "Tokenizer",
           "Sampler", "SamplingParams"]
