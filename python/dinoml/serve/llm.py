"""LLM models behind the OpenAI endpoints: decoder slots, sampling, and the text codec interface.

The endpoints (openai_api.py) see only this small interface:

* `LlmModel.generate(prompt_ids, params, deadline)` -> async iterator of token ids (a slot of the
  pool runs prefill and decode on its thread; ids cross to the event loop one by one);
* a `TextCodec` (`tokenize`, `detokenize`, `apply_chat_template` -> prompt ids, `eos_ids`) when the model has a
  tokenizer (`dinoml serve --tokenizer NAME=FILE.gguf`, read from the GGUF file by
  `dinoml.tokenizer`); without one, /v1/completions takes token-id prompts only and returns ids.

A decoder compiled without slots: a slot is one runtime Session of the artifact (its KV cache is
the session's states), one sequence at a time per slot, `--threads` slots per model, so that many
sequences decode at once (each run reads all weights for one token). A decoder compiled with
`--model-arg slots=S`: one session holds S sequences' caches and a scheduler thread runs them
together, continuous batching (batching.py): S sequences at once, one weight read per step.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import threading
import time
from typing import AsyncIterator, List, Optional, Protocol, Sequence, Set

import numpy as np

from .. import runtime
from ..tools.generate import BatchDecoder, decoder_layout
from .batching import BatchedSequence, BatchScheduler
from .pool import DeadlineExceeded, WorkerPool


class TextCodec(Protocol):
    eos_ids: Set[int]

    def tokenize(self, text: str, add_special: bool = True) -> List[int]: ...

    def detokenize(self, ids: Sequence[int]) -> str: ...

    def apply_chat_template(self, messages: List[dict], add_generation_prompt: bool = True) -> List[int]: ...


@dataclasses.dataclass
class SamplingParams:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: Optional[int] = None


class ServerSampler:
    """The next-token choice of one request: dinoml.llm.Sampler, the C++ sampler `dinoml generate`
    and `dinoml chat` use (repetition, frequency and presence penalties over the last 64 ids, top-k,
    top-p and min-p at temperature 1, temperature, a mt19937_64 draw seeded by `seed`; temperature
    0 is greedy). A positive temperature below float32's normal range is greedy here (the C++
    parameter is a float). No seed: a random one."""

    def __init__(self, p: SamplingParams, prompt: Sequence[int]):
        from .. import llm
        t = p.temperature if p.temperature >= float(np.finfo(np.float32).tiny) else 0.0
        seed = p.seed if p.seed is not None else secrets.randbits(64)
        self._s = llm.Sampler(temperature=t, top_k=p.top_k, top_p=p.top_p, min_p=p.min_p,
                              repeat_penalty=p.repetition_penalty, repeat_last_n=64, seed=seed,
                              frequency_penalty=p.frequency_penalty, presence_penalty=p.presence_penalty)
        self._s.accept(list(prompt))

    def sample(self, logits: np.ndarray) -> int:
        return self._s.sample(logits)


class DecoderSlot:
    """One session of a decoder artifact and its position counter (prefill in chunks of max_seq)."""

    def __init__(self, module: runtime.Module, max_seq: int, ctx: int):
        self.session = module.create_session()
        self.max_seq = max_seq
        self.ctx = ctx
        self.pos = 0

    def reset(self) -> None:
        self.session.reset_states()
        self.pos = 0

    def feed(self, tokens: Sequence[int]) -> np.ndarray:
        logits = None
        for i in range(0, len(tokens), self.max_seq):
            chunk = np.asarray(tokens[i:i + self.max_seq], dtype=np.int64)
            pos = np.arange(self.pos, self.pos + len(chunk), dtype=np.int64)
            logits = self.session.run_numpy({"tokens": chunk, "positions": pos})["logits"]
            self.pos += len(chunk)
        return logits[0]


class GenerationCancelled(Exception):
    pass


class LlmModel:
    kind = "llm"

    def __init__(self, name: str, path: str, module: runtime.Module, slots: int, max_queue: int, metrics,
                 codec: Optional[TextCodec] = None):
        self.name = name
        self.module = module
        self.metrics = metrics
        try:
            from .. import llm  # noqa: F401  (the sampler; checked now, not at the first request)
        except ImportError as e:
            raise ValueError(f"model '{name}' is an LLM artifact, which needs the LLM extension: {e}") from None
        lay = decoder_layout(module, path)
        self.max_seq, self.ctx, self.vocab = lay["max_seq"], lay["ctx"], lay["vocab"]
        self.codec = codec
        self.created = int(os.path.getmtime(os.path.join(path, "manifest.json")))
        depth = lambda n: metrics.queue_depth.labels(model=name).set(n)  # noqa: E731
        self.batched = lay["slots"] > 1
        if self.batched:  # one session, S sequences per run (`slots` is then only the CPU thread budget)
            self.pool = BatchScheduler(name, BatchDecoder(path, module), max_queue, on_depth=depth)
        else:
            self.pool = WorkerPool(name, [DecoderSlot(module, self.max_seq, self.ctx) for _ in range(slots)],
                                   max_queue, on_depth=depth)
        metrics.queue_depth.labels(model=name).set(0)

    def eos_ids(self) -> Set[int]:
        return set(self.codec.eos_ids) if self.codec is not None else set()

    def _run(self, slot: DecoderSlot, prompt: List[int], p: SamplingParams, emit, cancel: threading.Event) -> str:
        """On a pool thread: prefill, then sample/decode until max_tokens, EOS or cancel. Returns the
        finish reason ("length" or "stop"); every id goes through emit() as soon as it is chosen."""
        slot.reset()
        sampler = ServerSampler(p, prompt)
        eos = self.eos_ids()
        logits = slot.feed(prompt)
        for i in range(p.max_tokens):
            if cancel.is_set():
                return "cancelled"
            tok = sampler.sample(logits)
            if tok in eos:
                return "stop"
            emit(tok)
            if i + 1 < p.max_tokens:
                logits = slot.feed([tok])
        return "length"

    async def generate(self, prompt: List[int], p: SamplingParams, deadline: Optional[float],
                       cancel: threading.Event) -> AsyncIterator[object]:
        """Yields token ids, then one final str: the finish reason. Queue full / deadline errors come
        from the pool before the first id. Setting `cancel` (stop string found, client gone) stops
        the slot after its current step."""
        if self.batched:
            async for item in self._generate_batched(prompt, p, deadline, cancel):
                yield item
            return
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()

        def emit(tok: int) -> None:
            loop.call_soon_threadsafe(q.put_nowait, tok)

        def job(slot):
            try:
                return self._run(slot, prompt, p, emit, cancel)
            finally:
                loop.call_soon_threadsafe(q.put_nowait, None)

        task = asyncio.ensure_future(self.pool.submit(job, deadline))
        self.metrics.prompt_tokens.labels(model=self.name).inc(len(prompt))
        try:
            while True:
                getter = asyncio.ensure_future(q.get())
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                done, _ = await asyncio.wait({getter, task} if not task.done() else {getter}, timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    getter.cancel()
                    cancel.set()
                    raise DeadlineExceeded(f"model '{self.name}': the request's deadline passed")
                if getter not in done:  # the pool refused (queue full / closing) or the job failed early
                    getter.cancel()
                    if task.exception() is not None:
                        raise task.exception()
                    continue
                item = getter.result()
                if item is None:  # the job ended: its result is the finish reason
                    yield await task
                    return
                self.metrics.tokens.labels(model=self.name).inc()
                yield item
        finally:
            cancel.set()

    async def _generate_batched(self, prompt: List[int], p: SamplingParams, deadline: Optional[float],
                                cancel: threading.Event) -> AsyncIterator[object]:
        """generate() on the batch scheduler: the sequence joins the running batch (or waits for a
        slot); items arrive from the scheduler thread through this loop's queue."""
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        seq = BatchedSequence(prompt, p.max_tokens, ServerSampler(p, prompt), self.eos_ids(),
                              lambda item: loop.call_soon_threadsafe(q.put_nowait, item), cancel)
        self.pool.admit(seq)
        self.metrics.prompt_tokens.labels(model=self.name).inc(len(prompt))
        try:
            while True:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    item = await asyncio.wait_for(q.get(), timeout)
                except asyncio.TimeoutError:
                    cancel.set()
                    where = "waited in the queue" if self.pool.withdraw(seq) else "ran"
                    raise DeadlineExceeded(f"model '{self.name}': the request's deadline passed while it {where}")
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, str):  # the finish reason
                    yield item
                    return
                self.metrics.tokens.labels(model=self.name).inc()
                yield item
        finally:
            cancel.set()
            self.pool.withdraw(seq)
