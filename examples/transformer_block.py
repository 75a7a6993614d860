"""A transformer encoder block (dml.nn.TransformerEncoderLayer: self-attention + GELU MLP,
post-norm) on [batch, seq, d_model] with dynamic batch (1..8, buckets 1,4,8) and seq (1..64,
buckets 16,64).

    python examples/transformer_block.py [OUT_DIR]   # compiles to ./out/transformer_block
    python -m dinoml.cli compile examples/transformer_block.py --target cpu --out out/tb

Parameter names match torch.nn.TransformerEncoderLayer(batch_first=True): self_attn.in_proj_weight,
self_attn.out_proj.weight, linear1.*, linear2.*, norm1.*, norm2.*.
"""
import os
import sys

try:
    import dinoml as dml
except ImportError:  # running from a source checkout: the package lives in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    import dinoml as dml
from dinoml.testing import compile_and_check, init_constants  # noqa: E402

D_MODEL, NHEAD, DIM_FF = 32, 4, 64

batch = dml.Dim("batch", min=1, max=8, typical=4, buckets=(1, 4, 8))
seq = dml.Dim("seq", min=1, max=64, typical=16, buckets=(16, 64))


def build_model():
    return dml.nn.TransformerEncoderLayer(D_MODEL, NHEAD, dim_feedforward=DIM_FF, activation="gelu",
                                          layer_norm_eps=1e-5, batch_first=True, norm_first=False)


def make_constants(seed: int = 0):
    """Deterministic weights by PyTorch name; norms start near (1, 0) like PyTorch's init."""
    return init_constants(build_model(), seed, norm_prefixes=("norm",))


def build_spec(constants=None):
    return dml.trace(build_model(), inputs={"x": dml.TensorSpec([batch, seq, D_MODEL], "float32")},
                     constants=constants if constants is not None else make_constants(), name="transformer_block")


def main(out_dir: str) -> int:
    return compile_and_check(build_spec(), out_dir, [batch, seq], D_MODEL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("out", "transformer_block")))
