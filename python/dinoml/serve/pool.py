"""A pool of workers per model with a bounded admission queue and per-request deadlines.

Contract: `await pool.submit(fn, deadline)` runs `fn(worker)` on a thread holding one worker (a
runtime Session, or a decoder slot of an LLM) and returns its result. All bookkeeping happens on the
server's event loop (one thread), so the counters need no lock; only `fn` runs on the pool's
threads, where Session.run releases the GIL and sessions of one module run in parallel.

* At most `len(workers)` calls run at once; at most `max_queue` more wait for a worker. A request
  that finds the queue full fails at once with QueueFull (HTTP 503), so overload costs nothing.
* A request whose deadline passes while it waits leaves the queue with DeadlineExceeded and is never
  run. One whose deadline passes while it runs also gets DeadlineExceeded; its worker finishes the
  run on its thread (a session cannot be interrupted) and only then serves the next request.
* `close()` stops admitting (ServerClosing), lets queued and running calls finish and joins threads.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import time
from typing import Any, Callable, Deque, List, Optional


class QueueFull(Exception):
    pass


class DeadlineExceeded(Exception):
    pass


class ServerClosing(Exception):
    pass


class WorkerPool:
    def __init__(self, name: str, workers: List[Any], max_queue: int, on_depth: Optional[Callable[[int], None]] = None):
        if not workers:
            raise ValueError(f"model '{name}': a pool needs at least one worker")
        if max_queue < 0:
            raise ValueError(f"--max-queue must be >= 0, got {max_queue}")
        self.name = name
        self.max_queue = max_queue
        self._free: List[Any] = list(workers)
        self._waiters: Deque[asyncio.Future] = collections.deque()
        self._threads = concurrent.futures.ThreadPoolExecutor(len(workers), thread_name_prefix=f"dinoml-{name}")
        self._on_depth = on_depth or (lambda n: None)
        self._closing = False
        self.size = len(workers)
        self.running = 0

    @property
    def queued(self) -> int:
        return len(self._waiters)

    async def _acquire(self, deadline: Optional[float]):
        if self._closing:
            raise ServerClosing(f"model '{self.name}' is shutting down")
        if self._free and not self._waiters:
            return self._free.pop()
        if len(self._waiters) >= self.max_queue:
            raise QueueFull(f"model '{self.name}' is busy: {self.running} request(s) running and "
                            f"{len(self._waiters)} queued (the limit, --max-queue {self.max_queue}); retry later")
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._on_depth(len(self._waiters))
        try:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except BaseException as e:  # deadline, or the client went away (cancelled)
            if fut.done() and not fut.cancelled():  # handed a worker just as the wait ended: give it back
                self._release(fut.result())
            fut.cancel()
            if isinstance(e, asyncio.TimeoutError):
                raise DeadlineExceeded(f"model '{self.name}': the request's deadline passed while it waited in "
                                       f"the queue ({self.running} running, {len(self._waiters)} queued)") from None
            raise
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)
            self._on_depth(len(self._waiters))

    def _release(self, worker) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(worker)
                self._on_depth(len(self._waiters))
                return
        self._free.append(worker)
        self._on_depth(0)

    async def submit(self, fn: Callable[[Any], Any], deadline: Optional[float] = None):
        worker = await self._acquire(deadline)
        loop = asyncio.get_running_loop()
        self.running += 1

        def done(_):
            self.running -= 1
            self._release(worker)

        try:
            job = loop.run_in_executor(self._threads, fn, worker)
        except BaseException:
            self.running -= 1
            self._release(worker)
            raise
        job.add_done_callback(done)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return await asyncio.wait_for(asyncio.shield(job), timeout)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(f"model '{self.name}': the request's deadline passed while it ran "
                                   "(the result is discarded)")

    def close(self) -> None:
        """Stops admitting; waits for running calls (queued ones were admitted and still run)."""
        self._closing = True
        self._threads.shutdown(wait=True)
