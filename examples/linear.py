"""The seed example: one Linear layer (y = x·W + b) with a dynamic batch.

    python examples/linear.py [OUT_DIR]     # compiles to ./out/linear by default, runs, checks
    python -m dinoml.cli compile examples/linear.py --target cpu --out out/linear
"""
import os
import sys

try:
    import dinoml as dml
except ImportError:  # running from a source checkout: the package lives in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    import dinoml as dml
import numpy as np  # noqa: E402
from dinoml.testing import deterministic, median_latency_ms  # noqa: E402

# Deterministic weights so every run (and the compile cache) sees the same model.
constants = {
    "weight": deterministic([8, 6], seed=1),
    "bias": deterministic([6], seed=2),
}


class Linear(dml.Module):
    def __init__(self):
        self.weight = dml.Parameter([8, 6], dtype="float32")
        self.bias = dml.Parameter([6], dtype="float32")
    def forward(self, x):
        y = dml.ops.gemm_rrr_bias(x, self.weight, self.bias)
        return dml.ops.output(y, "y")
batch = dml.Dim("batch", min=1, max=4, typical=3, buckets=(1, 3, 4))
spec = dml.trace(Linear(), inputs={"x": dml.TensorSpec([batch, 8], "float32")}, constants=constants, name="linear")


def build_spec():
    return spec


def main(out_dir: str) -> int:
    art = dml.compile(build_spec(), target="cpu", out=out_dir)
    print(f"compiled {spec.name!r} -> {art.path}")
    module = dml.runtime.load(art.path)
    session = module.create_session()
    ok = True
    for b in batch.buckets:
        x = deterministic([b, 8], seed=100 + b)
        y = session.run_numpy({"x": x})["y"]
        want = x @ constants["weight"] + constants["bias"]
        err = float(np.max(np.abs(y - want)))
        ok &= err <= 1e-5
        ms = median_latency_ms(session, {"x": x})
        print(f"batch={b}: y{list(y.shape)} max|err|={err:.2e} median session.run {ms * 1e3:.1f} us")
        print(np.array2string(y, precision=4, suppress_small=True))
    print("OK" if ok else "MISMATCH against numpy")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("out", "linear")))
