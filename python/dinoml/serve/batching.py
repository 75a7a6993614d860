"""Continuous batching for a decoder artifact compiled with slots=S (dinoml.models.decoder): one
scheduler thread per model owns one session (dinoml.tools.generate.BatchDecoder) and runs steps.

Each step takes the next token of every sequence that is decoding (one each) and prefill chunks of
sequences that have joined, oldest first, up to the artifact's `seq` maximum of tokens in all, runs
them in one session.run, and samples the next id of every sequence whose prompt is complete
(each with its own ServerSampler). Ids cross to the event loop with `call_soon_threadsafe`. A
sequence that ends (EOS, max_tokens, cancelled: stop string, client gone, deadline) frees its slot
before the next step, where a waiting request takes it: requests join and leave the running batch
between steps.

Admission (`admit`) runs on the event loop; the scheduler thread and the loop share the request
lists under one lock. At most S sequences run; at most `max_queue` more wait for a slot, others get
QueueFull (HTTP 503) at once. `close()` stops admitting, lets running and waiting sequences finish
and joins the thread.
"""
from __future__ import annotations

import collections
import threading
from typing import Callable, Deque, List, Optional, Sequence

from .pool import QueueFull, ServerClosing


class BatchedSequence:
    """One request: its prompt, sampler and the emit callback (called on the scheduler thread with
    an int id, then a str finish reason, or an Exception)."""

    def __init__(self, prompt: Sequence[int], max_tokens: int, sampler, eos, emit: Callable[[object], None],
                 cancel: threading.Event):
        self.prompt = list(prompt)
        self.max_tokens = max_tokens
        self.sampler = sampler
        self.eos = eos
        self.emit = emit
        self.cancel = cancel
        self.slot: Optional[int] = None
        self.fed = 0            # prompt tokens in the cache
        self.generated = 0
        self.next_token: Optional[int] = None
        self.finished = False


class BatchScheduler:
    def __init__(self, name: str, decoder, max_queue: int, on_depth: Optional[Callable[[int], None]] = None):
        if max_queue < 0:
            raise ValueError(f"--max-queue must be >= 0, got {max_queue}")
        self.name = name
        self.dec = decoder
        self.size = decoder.slots
        self.max_queue = max_queue
        self._on_depth = on_depth or (lambda n: None)
        self._cond = threading.Condition()
        self._waiting: Deque[BatchedSequence] = collections.deque()
        self._active: List[BatchedSequence] = []
        self._free = list(range(self.size - 1, -1, -1))
        self._closing = False
        self.steps = 0           # runs so far (tests, metrics)
        self._thread = threading.Thread(target=self._loop, name=f"dinoml-{name}-batch", daemon=True)
        self._thread.start()

    @property
    def running(self) -> int:
        return len(self._active)

    @property
    def queued(self) -> int:
        return len(self._waiting)

    # ---- event loop side ---------------------------------------------------------------------
    def admit(self, seq: BatchedSequence) -> None:
        if not seq.prompt:
            raise ValueError("a sequence needs at least one prompt token")
        if len(seq.prompt) + seq.max_tokens - 1 > self.dec.ctx:
            raise ValueError(f"a prompt of {len(seq.prompt)} tokens and {seq.max_tokens} new ones do not fit the "
                             f"{self.dec.ctx} positions of a slot")
        with self._cond:
            if self._closing:
                raise ServerClosing(f"model '{self.name}' is shutting down")
            if len(self._active) + len(self._waiting) >= self.size + self.max_queue:
                raise QueueFull(f"model '{self.name}' is busy: {len(self._active)} request(s) running and "
                                f"{len(self._waiting)} queued (the limit, --max-queue {self.max_queue}); retry later")
            self._waiting.append(seq)
            self._on_depth(len(self._waiting))
            self._cond.notify()

    def withdraw(self, seq: BatchedSequence) -> bool:
        """Removes a sequence that still waits for a slot (deadline, client gone); True if it did."""
        with self._cond:
            if seq in self._waiting:
                self._waiting.remove(seq)
                seq.finished = True
                self._on_depth(len(self._waiting))
                return True
        return False

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()

    # ---- scheduler thread ----------------------------------------------------------------------
    def _finish(self, seq: BatchedSequence, result: object) -> None:
        """Ends a running sequence (caller holds the lock) and frees its slot."""
        if seq.finished:
            return
        seq.finished = True
        if seq in self._active:
            self._active.remove(seq)
        if seq.slot is not None:
            self._free.append(seq.slot)
            seq.slot = None
        seq.emit(result)

    def _next_batch(self) -> Optional[List[BatchedSequence]]:
        """Under the lock: drops cancelled sequences, seats waiting ones in free slots and picks
        this step's sequences; None when the scheduler should stop."""
        with self._cond:
            while True:
                for seq in [s for s in self._active if s.cancel.is_set()]:
                    self._finish(seq, "cancelled")
                for seq in [s for s in self._waiting if s.cancel.is_set()]:
                    self._waiting.remove(seq)
                    seq.finished = True
                while self._waiting and self._free:
                    seq = self._waiting.popleft()
                    seq.slot = self._free.pop()
                    self.dec.reset(seq.slot)
                    self._active.append(seq)
                self._on_depth(len(self._waiting))
                if self._active:
                    return list(self._active)
                if self._closing and not self._waiting:
                    return None
                self._cond.wait()

    def _loop(self) -> None:
        budget = self.dec.max_seq
        while True:
            active = self._next_batch()
            if active is None:
                return
            # Decode tokens first (one per sequence), then prompt chunks oldest first in what is left.
            plan = [(s, [s.next_token]) for s in active if s.next_token is not None]
            room = budget - len(plan)
            for s in active:
                if s.next_token is None and room > 0:
                    chunk = s.prompt[s.fed:s.fed + room]
                    plan.append((s, chunk))
                    room -= len(chunk)
            try:
                logits = self.dec.step([(s.slot, toks) for s, toks in plan])
            except Exception as e:  # the run failed: every sequence of the step ends with the error
                with self._cond:
                    for s, _ in plan:
                        self._finish(s, e)
                continue
            self.steps += 1
            ended = []
            for row, (s, toks) in enumerate(plan):
                if s.next_token is None:
                    s.fed += len(toks)
                    if s.fed < len(s.prompt):
                        continue  # more prompt to come
                try:
                    tok = s.sampler.sample(logits[row])
                except Exception as e:
                    ended.append((s, e))
                    continue
                if tok in s.eos:
                    ended.append((s, "stop"))
                    continue
                s.emit(tok)
                s.generated += 1
                if s.generated >= s.max_tokens:
                    ended.append((s, "length"))
                else:
                    s.next_token = tok
            if ended:
                with self._cond:
                    for s, result in ended:
                        self._finish(s, result)
