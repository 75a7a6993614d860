"""Loads the compiled `_dinoml` extension with an actionable message when it is missing."""
from __future__ import annotations

try:
    from . import _dinoml as ext  # noqa: F401  (re-exported)
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "dinoml: the C++ extension `_dinoml` is not built or cannot be loaded "
        f"({e}). Build it with `cmake -S . -B build -G Ninja && cmake --build build --target _dinoml`; "
        "it is written into python/dinoml/."
    ) from e

__all__ = ["ext"]
