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
from dinoml.testing import compile_and_check, init_constants  # noqa: E402

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
    return init_constants(build_model(), seed)


def build_spec(constants=None):
    return dml.trace(build_model(), inputs={"x": dml.TensorSpec([batch, seq, IN_FEATURES], "float32")},
                     constants=constants if constants is not None else make_constants(), name="mlp")


def main(out_dir: str) -> int:
    return compile_and_check(build_spec(), out_dir, [batch, seq], IN_FEATURES)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("out", "mlp")))
