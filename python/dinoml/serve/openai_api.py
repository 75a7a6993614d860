"""OpenAI-style endpoints for LLM artifacts: /v1/models, /v1/completions, /v1/chat/completions
(streaming as server-sent events, or one JSON body), /health.

Errors have OpenAI's shape `{"error": {"message", "type", "param", "code"}}`: 400 for a bad
parameter (named in `param`), 404 for an unknown model, 413 past the body limit, 503 when the
model's queue is full or the server is stopping, 504 when the request's deadline passes. Sampling
extensions llama.cpp's and vLLM's servers also accept: top_k, min_p, repetition_penalty.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any, Dict, List, Optional

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from ..errors import DinoMLRuntimeError
from .kserve import read_body
from .llm import LlmModel, SamplingParams
from .pool import DeadlineExceeded, QueueFull, ServerClosing
from .protocol import ProtocolError


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.status, self.param, self.code = status, param, code

    def response(self) -> JSONResponse:
        kind = {400: "invalid_request_error", 404: "not_found_error", 413: "invalid_request_error",
                503: "server_overloaded", 504: "timeout"}.get(self.status, "server_error")
        return JSONResponse({"error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}},
                            status_code=self.status)


def _num(body: dict, key: str, default, lo: float, hi: float, integer: bool = False):
    v = body.get(key)
    if v is None:
        return default
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if not ok or isinstance(v, bool):
        raise ApiError(400, f"'{key}' must be {'an integer' if integer else 'a number'}, got {json.dumps(v)[:40]}",
                       key)
    if not lo <= v <= hi:
        raise ApiError(400, f"'{key}' is {v}; it must be between {lo} and {hi}", key)
    return v


def _top_p(body: dict) -> float:
    v = float(_num(body, "top_p", 1.0, 0.0, 1.0))
    if not float(np.float32(v)) > 0.0:  # the sampler's parameter is a float32
        raise ApiError(400, f"'top_p' is {v}; it must be greater than 0 (1 keeps every token)", "top_p")
    return v


def _stops(body: dict) -> List[str]:
    v = body.get("stop")
    if v is None:
        return []
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v) or len(v) > 4:
        raise ApiError(400, "'stop' must be a non-empty string or an array of up to 4 of them", "stop")
    return v


def _unsupported(body: dict, keys: Dict[str, Any]) -> None:
    for key, allowed in keys.items():
        v = body.get(key)
        if v is not None and v != allowed and v != {} and v != []:
            raise ApiError(400, f"'{key}' = {json.dumps(v)[:40]} is not supported by this server"
                                + (f" (only {json.dumps(allowed)})" if allowed is not None else ""), key)


class TextAssembler:
    """Token ids -> text deltas: holds back an incomplete UTF-8 sequence and any tail that could
    begin a stop string; `stopped` once a stop string appears (the text ends before it)."""

    def __init__(self, codec, stops: List[str]):
        self.codec, self.stops = codec, stops
        self.ids: List[int] = []
        self.emitted = 0
        self.stopped = False

    def push(self, tok: int) -> str:
        self.ids.append(tok)
        if self.codec is None or self.stopped:
            return ""
        text = self.codec.detokenize(self.ids)
        hits = [i for i in (text.find(s, max(0, self.emitted - len(s))) for s in self.stops) if i >= 0]
        if hits:
            self.stopped = True
            return self._take(text, min(hits))
        safe = len(text.rstrip("\ufffd"))
        for s in self.stops:
            for k in range(min(len(s) - 1, safe), 0, -1):
                if text[safe - k:safe] == s[:k]:
                    safe = min(safe, safe - k)
                    break
        return self._take(text, safe)

    def flush(self) -> str:
        if self.codec is None or self.stopped:
            return ""
        return self._take(self.codec.detokenize(self.ids), None)

    def _take(self, text: str, end: Optional[int]) -> str:
        end = len(text) if end is None else end
        if end <= self.emitted:
            return ""
        out = text[self.emitted:end]
        self.emitted = end
        return out


class OpenAIRoutes:
    def __init__(self, state):
        self.s = state

    def routes(self):
        return [Route("/health", self.health, methods=["GET"]),
                Route("/v1/models", self.list_models, methods=["GET"]),
                Route("/v1/models/{name}", self.get_model, methods=["GET"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"])]

    async def health(self, request: Request):
        ok = self.s.ready
        return JSONResponse({"status": "ok" if ok else "stopping"}, status_code=200 if ok else 503)

    def _card(self, name: str, m: LlmModel) -> dict:
        return {"id": name, "object": "model", "created": m.created, "owned_by": "dinoml",
                "context_length": m.ctx, "tokenizer": m.codec is not None}

    async def list_models(self, request: Request):
        return JSONResponse({"object": "list", "data": [self._card(n, m) for n, m in self.s.repo.llm_models().items()]})

    async def get_model(self, request: Request):
        try:
            name = request.path_params["name"]
            return JSONResponse(self._card(name, self._model({"model": name})))
        except ApiError as e:
            return e.response()

    def _model(self, body: dict) -> LlmModel:
        name = body.get("model")
        if not isinstance(name, str):
            raise ApiError(400, "'model' is required: the name of a served LLM (GET /v1/models lists them)", "model")
        m = self.s.repo.llm_models().get(name)
        if m is None:
            known = ", ".join(sorted(self.s.repo.llm_models())) or "none"
            hint = " (a tensor model: use /v2/models/%s/infer)" % name if name in self.s.repo.tensor_models() else ""
            raise ApiError(404, f"the model '{name}' does not exist{hint}; LLMs served: {known}", "model",
                           "model_not_found")
        return m

    async def _body(self, request: Request) -> dict:
        try:
            raw = await read_body(request, self.s.config.max_body_bytes)
        except ProtocolError as e:
            raise ApiError(e.status, str(e))
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise ApiError(400, f"malformed JSON in the request body: {e}")
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return body

    def _params(self, body: dict, m: LlmModel, n_prompt: int, default_max: Optional[int]) -> SamplingParams:
        if body.get("n") not in (None, 1):
            raise ApiError(400, f"'n' = {json.dumps(body.get('n'))[:20]}: this server returns one choice per "
                                "request (n=1); send several requests instead", "n")
        _unsupported(body, {"logprobs": False, "top_logprobs": None, "logit_bias": None, "best_of": 1,
                            "suffix": None, "tools": None, "functions": None, "response_format": None})
        if body.get("echo") not in (None, False):
            raise ApiError(400, "'echo' is not supported by this server", "echo")
        key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        room = m.ctx - n_prompt
        max_tokens = _num(body, key, default_max if default_max is not None else room, 1, 1 << 30, integer=True)
        if n_prompt + max_tokens > m.ctx:
            raise ApiError(400, f"This model's maximum context length is {m.ctx} tokens; the prompt has {n_prompt} "
                                f"and {key} asks for {max_tokens} more (at most {max(room, 0)})", key,
                           "context_length_exceeded")
        seed = body.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise ApiError(400, "'seed' must be an integer", "seed")
        return SamplingParams(
            max_tokens=max_tokens, temperature=float(_num(body, "temperature", 1.0, 0.0, 2.0)),
            top_p=_top_p(body), top_k=int(_num(body, "top_k", 0, 0, 1 << 30, True)),
            min_p=float(_num(body, "min_p", 0.0, 0.0, 1.0)),
            repetition_penalty=float(_num(body, "repetition_penalty", 1.0, 0.01, 100.0)),
            frequency_penalty=float(_num(body, "frequency_penalty", 0.0, -2.0, 2.0)),
            presence_penalty=float(_num(body, "presence_penalty", 0.0, -2.0, 2.0)),
            seed=None if seed is None else seed & 0xFFFFFFFFFFFFFFFF)

    def _check_ids(self, ids: List[int], m: LlmModel) -> List[int]:
        if not ids:
            raise ApiError(400, "the prompt is empty", "prompt")
        bad = [t for t in ids if not 0 <= t < (m.vocab or 1 << 62)]
        if bad:
            raise ApiError(400, f"prompt token id {bad[0]} is outside the vocabulary [0, {m.vocab})", "prompt")
        return ids

    def _prompt_ids(self, body: dict, m: LlmModel) -> List[int]:
        p = body.get("prompt")
        if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
            p = p[0]  # a batch of one
        if isinstance(p, str):
            if m.codec is None:
                raise ApiError(400, f"model '{m.name}' has no tokenizer: send 'prompt' as token ids, or serve it "
                                    "with --tokenizer NAME=FILE.gguf", "prompt")
            return self._check_ids(m.codec.tokenize(p, True), m)
        if isinstance(p, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
            return self._check_ids(list(p), m)
        if isinstance(p, list) and p and all(isinstance(x, (str, list)) for x in p):
            raise ApiError(400, "one prompt per request: 'prompt' holds several", "prompt")
        raise ApiError(400, "'prompt' must be a string, an array of token ids, or an array of one of these", "prompt")

    def _chat_ids(self, body: dict, m: LlmModel) -> List[int]:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise ApiError(400, "'messages' must be a non-empty array of {role, content}", "messages")
        clean = []
        for i, msg in enumerate(msgs):
            if not isinstance(msg, dict):
                raise ApiError(400, f"messages[{i}] must be an object", "messages")
            role, content = msg.get("role"), msg.get("content")
            if role not in ("system", "developer", "user", "assistant"):
                raise ApiError(400, f"messages[{i}].role must be system, developer, user or assistant, "
                                    f"got {json.dumps(role)[:40]}", "messages")
            if isinstance(content, list):
                parts = []
                for part in content:
                    if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                        raise ApiError(400, f"messages[{i}].content: only text parts are supported", "messages")
                    parts.append(part["text"])
                content = "".join(parts)
            if not isinstance(content, str):
                raise ApiError(400, f"messages[{i}].content must be a string or text parts", "messages")
            clean.append({"role": "system" if role == "developer" else role, "content": content})
        if m.codec is None:
            raise ApiError(400, f"model '{m.name}' has no tokenizer and chat template: serve it with "
                                "--tokenizer NAME=FILE.gguf", "model")
        try:
            ids = m.codec.apply_chat_template(clean, True)
        except ValueError as e:
            raise ApiError(400, f"model '{m.name}': {e}", "messages")
        return self._check_ids(list(ids), m)

    async def completions(self, request: Request):
        return await self._serve(request, chat=False)

    async def chat(self, request: Request):
        return await self._serve(request, chat=True)

    async def _serve(self, request: Request, chat: bool):
        t0 = time.perf_counter()
        name, status = "_unknown", 200
        try:
            body = await self._body(request)
            m = self._model(body)
            name = m.name
            ids = self._chat_ids(body, m) if chat else self._prompt_ids(body, m)
            params = self._params(body, m, len(ids), None if chat else 16)
            stops = _stops(body)
            if stops and m.codec is None:
                raise ApiError(400, f"'stop' strings need a tokenizer; model '{m.name}' has none", "stop")
            stream = body.get("stream", False)
            if not isinstance(stream, bool):
                raise ApiError(400, "'stream' must be true or false", "stream")
            opts = body.get("stream_options") or {}
            if not isinstance(opts, dict):
                raise ApiError(400, "'stream_options' must be an object", "stream_options")
            run = _Run(self.s, m, ids, params, stops, chat, t0)
            await run.start()
            if stream:
                return StreamingResponse(run.sse(bool(opts.get("include_usage"))), media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache"})
            resp = await run.collect()
            self.s.metrics.observe(name, "openai", 200, time.perf_counter() - t0)
            return JSONResponse(resp)
        except ApiError as e:
            status = e.status
            self.s.metrics.observe(name, "openai", status, time.perf_counter() - t0)
            return e.response()


def _mapped(e: BaseException) -> ApiError:
    if isinstance(e, ApiError):
        return e
    if isinstance(e, (QueueFull, ServerClosing)):
        return ApiError(503, str(e))
    if isinstance(e, DeadlineExceeded):
        return ApiError(504, str(e))
    if isinstance(e, DinoMLRuntimeError):
        return ApiError(500, f"the model failed to run: {e}")
    raise e


class _Run:
    """One generation: started (so a full queue is a 503 before any byte is sent), then either
    collected into one response or streamed as server-sent events."""

    def __init__(self, state, m: LlmModel, ids: List[int], params: SamplingParams, stops: List[str], chat: bool,
                 t0: float):
        self.s, self.m, self.ids, self.params, self.chat, self.t0 = state, m, ids, params, chat, t0
        self.text = TextAssembler(m.codec, stops)
        self.cancel = threading.Event()
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        timeout = state.config.timeout_ms
        self.deadline = None if not timeout else time.monotonic() + timeout / 1e3
        self.first: Optional[object] = None
        self.gen = None

    async def start(self) -> None:
        self.gen = self.m.generate(self.ids, self.params, self.deadline, self.cancel)
        try:
            self.first = await self.gen.__anext__()
        except StopAsyncIteration:
            self.first = "stop"
        except BaseException as e:
            raise _mapped(e)

    async def _items(self):
        yield self.first
        if isinstance(self.first, str):
            return
        async for item in self.gen:
            yield item

    async def _steps(self):
        """(text delta, token id or None, finish reason or None) per generated token."""
        async for item in self._items():
            if isinstance(item, str):
                reason = "stop" if self.text.stopped else ("length" if item == "length" else "stop")
                yield self.text.flush(), None, reason
                return
            delta = self.text.push(item)
            if self.text.stopped:
                self.cancel.set()
                yield delta, item, None
                yield "", None, "stop"
                return
            yield delta, item, None

    def _usage(self, n: int) -> dict:
        return {"prompt_tokens": len(self.ids), "completion_tokens": n, "total_tokens": len(self.ids) + n}

    def _choice(self, text: str, reason: Optional[str], ids: Optional[List[int]], delta: bool) -> dict:
        if self.chat:
            c: Dict[str, Any] = {"index": 0, "finish_reason": reason, "logprobs": None}
            if delta:
                c["delta"] = {"content": text} if text or reason is None else {}
            else:
                c["message"] = {"role": "assistant", "content": text}
        else:
            c = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        if ids is not None:
            c["token_ids"] = ids  # the generated ids (also the only output of a model without tokenizer)
        return c

    async def collect(self) -> dict:
        parts, ids, reason = [], [], "length"
        try:
            async for delta, tok, fin in self._steps():
                parts.append(delta)
                if tok is not None:
                    ids.append(tok)
                if fin is not None:
                    reason = fin
        except BaseException as e:
            raise _mapped(e)
        obj = "chat.completion" if self.chat else "text_completion"
        return {"id": self.id, "object": obj, "created": self.created, "model": self.m.name,
                "choices": [self._choice("".join(parts), reason, ids, False)], "usage": self._usage(len(ids))}

    async def sse(self, include_usage: bool):
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        head = {"id": self.id, "object": obj, "created": self.created, "model": self.m.name}

        def event(payload: dict) -> bytes:
            return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"

        n, status = 0, 200
        try:
            if self.chat:
                yield event({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                  "finish_reason": None, "logprobs": None}]})
            async for delta, tok, fin in self._steps():
                if tok is not None:
                    n += 1
                if delta or fin is not None or self.m.codec is None:
                    yield event({**head, "choices": [self._choice(delta, fin, [tok] if tok is not None else [],
                                                                  True)]})
            if include_usage:
                yield event({**head, "choices": [], "usage": self._usage(n)})
        except (QueueFull, ServerClosing, DeadlineExceeded, DinoMLRuntimeError) as e:
            err = _mapped(e)
            status = err.status
            yield event({"error": {"message": str(err), "type": "server_error", "code": err.status}})
        finally:
            self.cancel.set()
            self.s.metrics.observe(self.m.name, "openai", status, time.perf_counter() - self.t0)
        yield b"data: [DONE]\n\n"

