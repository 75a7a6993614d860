"""Runs `dinoml serve` for tests: in this process on a thread (uvicorn.Server, stopped by the
context manager) or as a subprocess (for signals). Loopback only, free ports chosen by the OS."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_live(port: int, timeout: float = 30.0, proc=None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/live", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"server on port {port} did not come up in {timeout} s")


@contextlib.contextmanager
def server_thread(models, codecs=None, **config):
    """Yields the port of a server running `models` on a thread of this process."""
    import uvicorn

    from dinoml.serve import ServeConfig, make_app
    port = free_port()
    cfg = ServeConfig(port=port, **config)
    app = make_app(models, cfg, codecs)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    try:
        wait_live(port)
        yield port
    finally:
        server.should_exit = True
        t.join(30)


@contextlib.contextmanager
def server_process(args):
    """Yields (Popen, port) of `python -m dinoml.cli serve ARGS --port P`; killed if still running."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "dinoml.cli", "serve", *args, "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_live(port, proc=proc)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
