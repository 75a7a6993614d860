"""Loads the compiled extensions with an actionable message when one is missing:
`_dinoml_rt` (the runtime C ABI: load and run artifacts) and `_dinoml` (IR, builder, compiler).
A runtime-only install has just `_dinoml_rt`: `dinoml.runtime` works, compiling does not."""
from __future__ import annotations

import importlib.util

_BUILD = ("Build it with `cmake -S . -B build -G Ninja && cmake --build build --target {t}`; "
          "it is written into python/dinoml/.")

try:
    from . import _dinoml_rt as rt_ext  # noqa: F401  (re-exported)
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(f"dinoml: the runtime extension `_dinoml_rt` is not built or cannot be loaded ({e}). "
                      + _BUILD.format(t="_dinoml_rt")) from e

ext = None
compiler_missing = None
if importlib.util.find_spec(__name__.rsplit(".", 1)[0] + "._dinoml") is None:
    compiler_missing = ImportError(
        "dinoml: the compiler extension `_dinoml` is not installed (a runtime-only install: only "
        "dinoml.runtime is available). " + _BUILD.format(t="_dinoml"))
else:
    try:
        from . import _dinoml as ext  # noqa: F401  (re-exported)
    except ImportError as e:  # pragma: no cover - depends on the build
        compiler_missing = ImportError(
            f"dinoml: the compiler extension `_dinoml` cannot be loaded ({e}); only dinoml.runtime is "
            "available. " + _BUILD.format(t="_dinoml"))


def require_compiler():
    """The compiler extension, or the ImportError saying why it is missing."""
    if ext is None:
        raise compiler_missing
    return ext


__all__ = ["ext", "rt_ext", "require_compiler"]
