"""The server: one Starlette app with both protocols, run by uvicorn.

Shutdown (SIGTERM / SIGINT, handled by uvicorn): the listening socket closes, readiness turns
false, requests in flight (streams included) finish, then the lifespan's exit closes every
model's pool (waiting for its threads) and the process exits 0. `--graceful-timeout-s` bounds how
long in-flight requests may take before uvicorn drops them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from typing import Dict, List, Optional, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .kserve import KServeRoutes
from .metrics import Metrics
from .models import ModelSpec, Repository
from .openai_api import OpenAIRoutes


@dataclasses.dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    threads: int = 0            # sessions per model; 0: the runtime's thread budget (CPUs)
    max_queue: int = 64         # requests waiting per model beyond the running ones
    timeout_ms: int = 0         # per-request deadline, queue wait included; 0: none
    max_body_bytes: int = 64 << 20
    graceful_timeout_s: float = 30.0
    log_level: str = "warning"


class ServerState:
    def __init__(self, repo: Repository, metrics: Metrics, config: ServeConfig):
        self.repo, self.metrics, self.config = repo, metrics, config
        self.ready = True


def default_threads() -> int:
    n = os.environ.get("DINOML_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    if n and n.split(",")[0].isdigit() and int(n.split(",")[0]) > 0:
        return int(n.split(",")[0])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def make_app(models: Sequence[str], config: ServeConfig, codecs: Optional[Dict[str, object]] = None) -> Starlette:
    """The ASGI app serving `models` (DIR or NAME=DIR each); loads every artifact now, so a bad
    one fails before the server listens."""
    if not models:
        raise ValueError("dinoml serve needs at least one artifact directory (DIR or NAME=DIR)")
    if config.threads < 0:
        raise ValueError(f"--threads must be >= 0, got {config.threads}")
    threads = config.threads or default_threads()
    metrics = Metrics()
    repo = Repository([ModelSpec.parse(m) for m in models], threads, config.max_queue, metrics, codecs)
    state = ServerState(repo, metrics, config)

    async def metrics_route(request: Request):
        for name, m in repo.models.items():
            metrics.queue_depth.labels(model=name).set(m.pool.queued)
            metrics.running.labels(model=name).set(m.pool.running)
        return Response(metrics.render(), media_type=metrics.content_type)

    async def not_found(request: Request, exc):
        what = "no route" if exc.status_code == 404 else "method not allowed:"
        return JSONResponse({"error": f"{what} {request.method} {request.url.path}"}, status_code=exc.status_code)

    async def internal_error(request: Request, exc: Exception):
        # A bug, not a bad request: still answered in the protocol's shape (and logged by uvicorn).
        msg = f"internal error while serving {request.url.path}: {type(exc).__name__}: {exc}"
        if request.url.path.startswith("/v1/"):
            return JSONResponse({"error": {"message": msg, "type": "server_error", "param": None, "code": None}},
                                status_code=500)
        return JSONResponse({"error": msg}, status_code=500)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        state.ready = False
        repo.close()

    routes: List[Route] = KServeRoutes(state).routes() + OpenAIRoutes(state).routes()
    routes.append(Route("/metrics", metrics_route, methods=["GET"]))
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found, Exception: internal_error})
    app.state.dinoml = state
    return app


def serve(models: Sequence[str], config: ServeConfig, codecs: Optional[Dict[str, object]] = None) -> int:
    """Runs the server until SIGTERM / SIGINT; returns the exit status."""
    import uvicorn
    if config.threads:
        # The runtime's CPU thread budget is shared by every run of the process: concurrent runs
        # split it instead of oversubscribing the cores (runtime/thread_budget.cpp reads it once,
        # at the first run, which comes after this).
        os.environ["DINOML_NUM_THREADS"] = str(config.threads)
    app = make_app(models, config, codecs)
    state: ServerState = app.state.dinoml

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            # uvicorn's own handler also re-raises the signal once it has drained, so the process
            # would die of it; a server stopped on request exits 0 instead. A second SIGINT forces.
            state.ready = False  # /v2/health/ready and /health turn 503 while in-flight work drains
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.should_exit = True

    server = Server(uvicorn.Config(app, host=config.host, port=config.port, log_level=config.log_level,
                                   timeout_graceful_shutdown=config.graceful_timeout_s, access_log=False))
    names = ", ".join(f"{n} ({m.kind})" for n, m in state.repo.models.items())
    print(f"dinoml serve: {names} on http://{config.host}:{config.port} "
          f"(KServe v2 at /v2, OpenAI at /v1, metrics at /metrics)", flush=True)
    server.run()
    print("dinoml serve: stopped", flush=True)
    return 0
