"""What the benchmark scripts record about the machine and the code: the CPU (model name, x86
family/model, the ISA levels DinoML dispatches on) and the commit. One place for bench/llama/bench.py,
bench/models/run.py and bench/serve/load.py."""
from __future__ import annotations

import os
import platform
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The ISA features DinoML's CPU kernels choose between (kernels/cpu: avx2, avx512, avx512_lowp, AMX).
_ISA = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


def cpu_description() -> str:
    """e.g. "AMD EPYC (family 25 model 17; avx2 avx512f avx512_vnni avx512_bf16)"."""
    name, family, model, flags = "", "", "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and not name:
                    name = value
                elif key == "cpu family" and not family:
                    family = value
                elif key == "model" and not model:
                    model = value
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        return platform.processor() or platform.machine()
    isa = " ".join(f for f in _ISA if f in flags)
    where = f"family {family} model {model}; " if family else ""
    return f"{name or platform.machine()} ({where}{isa})"


def commit() -> str:
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "?"
    except OSError:
        return "?"
