"""Builds the bundle for the GPT-2-medium end-to-end benchmark (issue 4, "End to end, bf16, static
shapes") where the compiler is built (no GPU needed). The ~700 MB of bf16 weights cannot travel to
the GPU machine, so the bundle carries no model: it is the relocatable compiler of
tests/gpu/profile_prepare.py (bin/dinoml, lib/, syslib/, home/ with the kernel headers; that file's
`compiler_bundle`, not a copy) plus the scripts. tests/gpu/gpt2_run.py writes the graph with its
deterministic weights on the GPU machine, compiles it there with the carried compiler and times it
against PyTorch eager and torch.compile in one process.

    DINOML_BUILD_DIR=build python3 tests/gpu/gpt2_prepare.py OUT_DIR
    python3 OUT_DIR/gpt2_run.py OUT_DIR [RESULT_DIR]        # on the GPU machine
"""
from __future__ import annotations

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from profile_prepare import ROOT, compiler_bundle  # noqa: E402

# The scripts the GPU machine runs: gpt2_run.py with the compiler environment of profile_run.py
# (cuBLASLt search, DINOML_HOME / DINOML_LIB_DIR); the IR writer, the ctypes binding of the runtime
# C ABI and the timing helpers come from python/dinoml/tools.
SCRIPTS = [os.path.join(HERE, f) for f in ("gpt2_run.py", "profile_prepare.py", "profile_run.py")] + \
    [os.path.join(ROOT, "python", "dinoml", "tools", f) for f in ("dml_ctypes.py", "ir_json.py", "cuda_timing.py")]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu-gpt2"
    build = os.environ.get("DINOML_BUILD_DIR", os.path.join(ROOT, "build"))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    libs = compiler_bundle(out, build)
    for f in SCRIPTS:
        shutil.copy2(f, os.path.join(out, os.path.basename(f)))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print(f"bundle {out}: {size / 2**20:.1f} MiB; system libraries carried: {' '.join(libs)}")


if __name__ == "__main__":
    main()
