"""`dinoml serve DIR... --port P`: one inference server process, two protocols.

* Open Inference Protocol (KServe v2) over HTTP for stateless artifacts: /v2/health/{live,ready},
  /v2, /v2/models/{name}[/versions/{v}][/ready|/infer], JSON and binary tensor data.
* OpenAI API for decoder (LLM) artifacts: /v1/models, /v1/completions, /v1/chat/completions
  (streaming or not), /health.
* /metrics in Prometheus text format.

uvicorn + Starlette carry HTTP; the hot path is Session.run in C++ with the GIL released, on a
pool of threads with one session each. Needs the `serve` extra (`pip install dinoml[serve]`).
"""
from __future__ import annotations

from .app import ServeConfig, make_app, serve  # noqa: F401
from .cli import main  # noqa: F401

__all__ = ["ServeConfig", "make_app", "serve", "main"]
