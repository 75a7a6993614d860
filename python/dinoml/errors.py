"""Exception types of dinoml. Messages come unchanged from the C++ core that raised them."""
from __future__ import annotations

from ._ext import ext, rt_ext

if ext is not None:
    #: An op was used wrongly while tracing: arity, attribute, dtype or shape rule (a ValueError).
    ShapeError = ext.ShapeError
    #: Malformed IR: an invalid Dim, unknown dtype, duplicate tensor name ... (a ValueError).
    IrError = ext.IrError
    #: dinoml.compile failed (a RuntimeError).
    CompileError = ext.CompileError
else:  # runtime-only install: nothing raises these, but `except dml.CompileError` must still work
    class ShapeError(ValueError):
        """(compiler not installed)"""

    class IrError(ValueError):
        """(compiler not installed)"""

    class CompileError(RuntimeError):
        """(compiler not installed)"""
#: Base of the runtime's errors; `.status` holds the C ABI status name.
DinoMLRuntimeError = rt_ext.DinoMLRuntimeError
#: Bad input name / dtype / rank / dim value / buffer (also a ValueError).
InvalidArgumentError = rt_ext.InvalidArgumentError
#: Artifact, file or named tensor not found (also a ValueError).
NotFoundError = rt_ext.NotFoundError
#: Tampered / malformed artifact, built for another ABI or CPU, or no usable GPU.
ArtifactError = rt_ext.ArtifactError


class TraceError(RuntimeError):
    """Misuse of the tracing API itself (e.g. dml.state() outside of dml.trace)."""


__all__ = ["ShapeError", "IrError", "CompileError", "DinoMLRuntimeError", "InvalidArgumentError",
           "NotFoundError", "ArtifactError", "TraceError"]
