"""Exception types of dinoml. Messages come unchanged from the C++ core that raised them."""
from __future__ import annotations

from ._ext import ext

#: An op was used wrongly while tracing: arity, attribute, dtype or shape rule (a ValueError).
ShapeError = ext.ShapeError
#: Malformed IR: an invalid Dim, unknown dtype, duplicate tensor name ... (a ValueError).
IrError = ext.IrError
#: dinoml.compile failed (a RuntimeError).
CompileError = ext.CompileError
#: Base of the runtime's errors; `.status` holds the C ABI status name.
DinoMLRuntimeError = ext.DinoMLRuntimeError
#: Bad input name / dtype / rank / dim value (also a ValueError).
InvalidArgumentError = ext.InvalidArgumentError
#: Artifact, file or named tensor not found (also a ValueError).
NotFoundError = ext.NotFoundError
#: Tampered / malformed artifact, or built for another ABI or CPU.
ArtifactError = ext.ArtifactError


class TraceError(RuntimeError):
    """Misuse of the tracing API itself (e.g. dml.state() outside of dml.trace)."""


__all__ = ["ShapeError", "IrError", "CompileError", "DinoMLRuntimeError", "InvalidArgumentError",
           "NotFoundError", "ArtifactError", "TraceError"]
