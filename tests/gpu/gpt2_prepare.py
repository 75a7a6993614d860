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
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from profile_prepare import ROOT, compiler_bundle  # noqa: E402

# The scripts the GPU machine runs: gpt2_run.py imports the graph writer (profile_prepare.Graph),
# the compiler environment (profile_run: cuBLASLt search, DINOML_HOME / DINOML_LIB_DIR) and the
# ctypes binding of the runtime C ABI.
# (dml_ctypes.py and the IR writer ir_json.py are looked up in tests/gpu/ and python/dinoml/tools/,
# wherever this checkout has them.)
SCRIPTS = ("gpt2_run.py", "profile_prepare.py", "profile_run.py", "dml_ctypes.py", "ir_json.py")
SEARCH = (HERE, os.path.join(ROOT, "python", "dinoml", "tools"))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu-gpt2"
    build = os.environ.get("DINOML_BUILD_DIR", os.path.join(ROOT, "build"))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    libs = compiler_bundle(out, build)
    # Debug symbols are most of the binaries' size and the carried tree is limited (64 MiB a call).
    for d in ("bin", "lib", "syslib"):
        p = os.path.join(out, d)
        for f in sorted(os.listdir(p)) if os.path.isdir(p) else []:
            subprocess.run(["strip", "--strip-debug", os.path.join(p, f)], check=False)
    for f in SCRIPTS:
        src = next((os.path.join(d, f) for d in SEARCH if os.path.exists(os.path.join(d, f))), None)
        if src:
            shutil.copy2(src, os.path.join(out, f))
        elif f != "ir_json.py":  # the graph writer lives in profile_prepare.py where ir_json.py does not exist
            raise SystemExit(f"gpt2_prepare: {f} not found in {SEARCH}")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print(f"bundle {out}: {size / 2**20:.1f} MiB; system libraries carried: {' '.join(libs)}")


if __name__ == "__main__":
    main()
