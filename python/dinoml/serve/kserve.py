"""Open Inference Protocol (KServe v2) routes over Starlette.

Health, server and model metadata, readiness, infer (JSON and the binary tensor data extension)
and Triton's repository index (tritonclient's get_model_repository_index). Errors are
`{"error": "..."}` with 400 (bad request), 404 (unknown model or version), 413 (body over the
limit), 415 (unknown content encoding), 503 (queue full or shutting down), 504 (deadline passed).
"""
from __future__ import annotations

import time
import zlib
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import __version__
from ..errors import DinoMLRuntimeError, InvalidArgumentError
from .pool import DeadlineExceeded, QueueFull, ServerClosing
from .protocol import HEADER_LENGTH, ProtocolError, build_infer_response, parse_infer_request

EXTENSIONS = ["binary_tensor_data"]


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past `limit` bytes (checked against Content-Length first,
    then while streaming, and again after a gzip/deflate Content-Encoding is undone)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProtocolError(413, f"request body of {int(declared)} bytes exceeds the server's limit of {limit} "
                                 "bytes (raise it with --max-body-bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ProtocolError(413, f"request body exceeds the server's limit of {limit} bytes "
                                     "(raise it with --max-body-bytes)")
        chunks.append(chunk)
    body = b"".join(chunks)
    enc = request.headers.get("content-encoding", "identity").strip().lower()
    if enc in ("", "identity"):
        return body
    if enc not in ("gzip", "deflate"):
        raise ProtocolError(415, f"Content-Encoding '{enc}' is not supported (use gzip, deflate or none)")
    d = zlib.decompressobj(wbits=31 if enc == "gzip" else 15)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise ProtocolError(400, f"the {enc} body cannot be decompressed: {e}")
    if len(out) > limit or d.unconsumed_tail:
        raise ProtocolError(413, f"decompressed request body exceeds the server's limit of {limit} bytes")
    return out


class KServeRoutes:
    def __init__(self, state):
        self.s = state  # app.ServerState: repository, metrics, config, readiness

    def routes(self):
        return [
            Route("/v2/health/live", self.live, methods=["GET"]),
            Route("/v2/health/ready", self.ready, methods=["GET"]),
            Route("/v2", self.server_metadata, methods=["GET"]),
            Route("/v2/repository/index", self.repository_index, methods=["POST"]),
            Route("/v2/models/{name}", self.model_metadata, methods=["GET"]),
            Route("/v2/models/{name}/versions/{version}", self.model_metadata, methods=["GET"]),
            Route("/v2/models/{name}/ready", self.model_ready, methods=["GET"]),
            Route("/v2/models/{name}/versions/{version}/ready", self.model_ready, methods=["GET"]),
            Route("/v2/models/{name}/infer", self.infer, methods=["POST"]),
            Route("/v2/models/{name}/versions/{version}/infer", self.infer, methods=["POST"]),
        ]

    async def live(self, request: Request):
        return JSONResponse({"live": True})

    async def ready(self, request: Request):
        ok = self.s.ready
        return JSONResponse({"ready": ok}, status_code=200 if ok else 503)

    async def server_metadata(self, request: Request):
        return JSONResponse({"name": "dinoml", "version": __version__, "extensions": EXTENSIONS})

    async def repository_index(self, request: Request):
        return JSONResponse([{"name": n, "version": m.version, "state": "READY"}
                             for n, m in self.s.repo.tensor_models().items()])

    def _model(self, request: Request):
        name = request.path_params["name"]
        version = request.path_params.get("version")
        model = self.s.repo.tensor_models().get(name)
        if model is None:
            llm = self.s.repo.llm_models().get(name)
            if llm is not None:
                raise ProtocolError(404, f"model '{name}' is an LLM artifact: it is served by the OpenAI API "
                                         "(/v1/completions, /v1/chat/completions), not by /v2")
            known = ", ".join(sorted(self.s.repo.tensor_models())) or "none"
            raise ProtocolError(404, f"unknown model '{name}'; models served: {known}")
        if version is not None and version != model.version:
            raise ProtocolError(404, f"model '{name}' has no version '{version}'; versions: {model.version}")
        return model

    async def model_metadata(self, request: Request):
        try:
            return JSONResponse(self._model(request).metadata())
        except ProtocolError as e:
            return error(e.status, str(e))

    async def model_ready(self, request: Request):
        try:
            self._model(request)
        except ProtocolError as e:
            return error(e.status, str(e))
        ok = self.s.ready
        return JSONResponse({"name": request.path_params["name"], "ready": ok}, status_code=200 if ok else 503)

    async def infer(self, request: Request):
        t0 = time.perf_counter()
        name = request.path_params["name"]
        model = None
        try:
            model = self._model(request)
            status, resp = await self._infer(request, model, t0)
        except ProtocolError as e:
            status, resp = e.status, error(e.status, str(e))
        except ClientDisconnect:
            status, resp = 499, Response(status_code=400)
        self.s.metrics.observe(name if model is not None else "_unknown", "kserve", status, time.perf_counter() - t0)
        return resp

    async def _infer(self, request: Request, model, t0: float):
        body = await read_body(request, self.s.config.max_body_bytes)
        req = parse_infer_request(body, request.headers.get(HEADER_LENGTH), model.inputs, model.outputs, model.name)
        timeout_s = self.s.config.timeout_ms / 1e3 if self.s.config.timeout_ms else None
        if req.timeout_us:
            timeout_s = min(timeout_s, req.timeout_us / 1e6) if timeout_s else req.timeout_us / 1e6
        deadline = None if timeout_s is None else time.monotonic() - (time.perf_counter() - t0) + timeout_s
        feeds = req.inputs
        try:
            results = await model.pool.submit(lambda sess: sess.run_numpy(feeds), deadline)
        except QueueFull as e:
            raise ProtocolError(503, str(e))
        except ServerClosing as e:
            raise ProtocolError(503, str(e))
        except DeadlineExceeded as e:
            raise ProtocolError(504, str(e))
        except InvalidArgumentError as e:  # the runtime's own input validation (names the input)
            raise ProtocolError(400, f"model '{model.name}': {e}")
        except DinoMLRuntimeError as e:
            raise ProtocolError(500, f"model '{model.name}' failed to run: {e}")
        body, header_len = build_infer_response(model.name, model.version, req, results, model.outputs)
        if header_len is None:
            return 200, Response(body, media_type="application/json")
        return 200, Response(body, media_type="application/octet-stream",
                             headers={"Inference-Header-Content-Length": str(header_len)})

