"""`dinoml.ops`: one function per op of the C++ registry, generated at import with the op's doc
and attribute schema (`help(dml.ops.softmax)`), plus hand-written wrappers where a signature
needs care (variadic concatenate, split -> tuple, reshape with symbolic extents, output, ...).

Every function takes tensors positionally and attributes by keyword; it is only valid while
tracing. Unknown attributes are passed through so the registry rejects them by name.
"""
from __future__ import annotations

from . import _core
from ._core import call  # noqa: F401

_DEFS = {d["name"]: d for d in _core.registry()}

for _name, _d in _DEFS.items():
    globals()[_name] = _core.make_op(_d)

from ._wrappers import *  # noqa: E402,F401,F403  (hand-written signatures override generated ones)
from ._wrappers import __all__ as _wrapped  # noqa: E402
from ._indexing import getitem, matmul  # noqa: E402,F401
from ._conv import *  # noqa: E402,F401,F403  (PyTorch-style conv / pooling signatures)
from ._conv import __all__ as _conv_wrapped  # noqa: E402

for _name in list(_wrapped) + list(_conv_wrapped):
    if _name in _DEFS:
        # Keep the registry's description on the hand-written signature.
        globals()[_name].__doc__ = (globals()[_name].__doc__ or "") + "\n\n" + _core.op_doc(_DEFS[_name])


def names():
    """Names of all registered ops."""
    return sorted(_DEFS)


def schema(name: str) -> dict:
    """The registry's schema of one op (name, family, doc, arity, attrs)."""
    return dict(_DEFS[name])


__all__ = sorted(set(_DEFS) | set(_wrapped) | set(_conv_wrapped) | {"getitem", "matmul", "names", "schema", "call"})
