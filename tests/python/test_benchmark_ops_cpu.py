"""`dinoml benchmark-ops cpu`: every op of the sweep still traces with the current dml.ops API
(a renamed argument once broke the max_pool2d entry unnoticed), and one small op runs end to end."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import dinoml as dml
from dinoml.tools import benchmark_ops

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DINOML_BUILD_DIR", ROOT / "build"))


@pytest.mark.parametrize("entry", benchmark_ops._sweep(True), ids=lambda e: e["op"])
def test_sweep_entry_traces(entry):
    shape = entry["shapes"][0]
    specs = entry["inputs"](shape)
    consts = {n: np.zeros(specs[n], np.float32) for n in entry.get("const", ())}
    names = [n for n in specs if n not in consts]

    class _Op(dml.Module):
        def __init__(self):
            for n, v in consts.items():
                setattr(self, n, dml.Parameter(list(v.shape), "float32"))

        def forward(self, *args):
            t = dict(zip(names, args))
            for n in consts:
                t[n] = getattr(self, n)
            return entry["build"](dml.ops, t, shape)

    dml.trace(_Op(), inputs={n: dml.TensorSpec(list(specs[n]), "float32") for n in names}, constants=consts,
              name=entry["op"])


def test_cli_runs_one_op():
    exe = BUILD / "dinoml"
    if not exe.exists():
        pytest.skip(f"{exe} is not built (scripts/build.sh builds it; scripts/test.sh always does)")
    p = subprocess.run([str(exe), "benchmark-ops", "cpu", "--quick", "--only", "gelu", "--seconds", "0.05"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [l for l in p.stdout.splitlines() if l.strip().startswith("gelu")]
    assert rows, p.stdout
