"""A 2-layer MLP (Linear -> GELU -> Linear) from dml.nn on [batch, seq, features] inputs with
dynamic batch (1..8, buckets 1,4,8) and seq (1..64, buckets 16,64).

    python examples/mlp.py [OUT_DIR]        # compiles to ./out/mlp, runs every bucket boundary
    python -m dinoml.cli compile examples/mlp.py --target cpu --out out/mlp

Parameter names match torch.nn.Sequential(Linear, GELU, Linear): "0.weight", "2.bias", ...
"""
import os
import sys

try:
    import dinoml as dml
except ImportError:  # running from a source checkout: the package lives in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    import dinoml as dml
import numpy as np  # noqa: E402
from dinoml.testing import deterministic, dim_grid, median_latency_ms  # noqa: E402

IN_FEATURES, HIDDEN, OUT_FEATURES = 32, 64, 16

batch = dml.Dim("batch", min=1, max=8, typical=4, buckets=(1, 4, 8))
seq = dml.Dim("seq", min=1, max=64, typical=16, buckets=(16, 64))


def build_model():
    return dml.nn.Sequential(
        dml.nn.Linear(IN_FEATURES, HIDDEN),
        dml.nn.GELU(),
        dml.nn.Linear(HIDDEN, OUT_FEATURES),
    )


def make_constants(seed: int = 0):
    """Deterministic weights by PyTorch name (scaled like PyTorch's default init)."""
    consts = {}
    for i, (name, (shape, _)) in enumerate(sorted(build_model().state_dict_shapes().items())):
        fan_in = shape[-1] if len(shape) > 1 else shape[0]
        consts[name] = deterministic(shape, seed + i, scale=1.0 / np.sqrt(fan_in))
    return consts


def build_spec(constants=None):
    return dml.trace(build_model(), inputs={"x": dml.TensorSpec([batch, seq, IN_FEATURES], "float32")},
                     constants=constants if constants is not None else make_constants(), name="mlp")


def main(out_dir: str) -> int:
    spec = build_spec()
    print(spec)
    art = dml.compile(spec, target="cpu", out=out_dir)
    print(f"compiled -> {art.path}")
    session = dml.runtime.load(art.path).create_session()
    worst = 0.0
    for i, dims in enumerate(dim_grid(batch, seq)):
        x = deterministic([dims["batch"], dims["seq"], IN_FEATURES], seed=1000 + i)
        y = session.run_numpy({"x": x})["output"]
        want = dml.reference(spec, {"x": x})["output"]
        err = float(np.max(np.abs(y - want)))
        worst = max(worst, err)
        print(f"batch={dims['batch']:<2} seq={dims['seq']:<3} y{list(y.shape)} max|err vs reference|={err:.2e}")
    x = deterministic([batch.typical, seq.typical, IN_FEATURES], seed=7)
    print(f"median session.run at batch={batch.typical}, seq={seq.typical}: "
          f"{median_latency_ms(session, {'x': x}):.3f} ms")
    ok = worst <= 1e-4
    print("OK" if ok else f"MISMATCH: worst error {worst:.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("out", "mlp")))
