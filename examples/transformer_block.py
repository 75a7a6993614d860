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
import numpy as np  # noqa: E402
from dinoml.testing import deterministic, dim_grid, median_latency_ms  # noqa: E402

D_MODEL, NHEAD, DIM_FF = 32, 4, 64

batch = dml.Dim("batch", min=1, max=8, typical=4, buckets=(1, 4, 8))
seq = dml.Dim("seq", min=1, max=64, typical=16, buckets=(16, 64))


def build_model():
    return dml.nn.TransformerEncoderLayer(D_MODEL, NHEAD, dim_feedforward=DIM_FF, activation="gelu",
                                          layer_norm_eps=1e-5, batch_first=True, norm_first=False)


def make_constants(seed: int = 0):
    """Deterministic weights by PyTorch name; norms start near (1, 0) like PyTorch's init."""
    consts = {}
    for i, (name, (shape, _)) in enumerate(sorted(build_model().state_dict_shapes().items())):
        if name.startswith("norm"):
            base = 1.0 if name.endswith("weight") else 0.0
            consts[name] = (base + deterministic(shape, seed + i, scale=0.1)).astype(np.float32)
        else:
            fan_in = shape[-1] if len(shape) > 1 else shape[0]
            consts[name] = deterministic(shape, seed + i, scale=1.0 / np.sqrt(fan_in))
    return consts


def build_spec(constants=None):
    return dml.trace(build_model(), inputs={"x": dml.TensorSpec([batch, seq, D_MODEL], "float32")},
                     constants=constants if constants is not None else make_constants(), name="transformer_block")


def main(out_dir: str) -> int:
    spec = build_spec()
    print(spec)
    art = dml.compile(spec, target="cpu", out=out_dir)
    print(f"compiled -> {art.path}")
    session = dml.runtime.load(art.path).create_session()
    worst = 0.0
    for i, dims in enumerate(dim_grid(batch, seq)):
        x = deterministic([dims["batch"], dims["seq"], D_MODEL], seed=1000 + i)
        y = session.run_numpy({"x": x})["output"]
        want = dml.reference(spec, {"x": x})["output"]
        err = float(np.max(np.abs(y - want)))
        worst = max(worst, err)
        print(f"batch={dims['batch']:<2} seq={dims['seq']:<3} y{list(y.shape)} max|err vs reference|={err:.2e}")
    x = deterministic([batch.typical, seq.typical, D_MODEL], seed=7)
    print(f"median session.run at batch={batch.typical}, seq={seq.typical}: "
          f"{median_latency_ms(session, {'x': x}):.3f} ms")
    ok = worst <= 1e-4
    print("OK" if ok else f"MISMATCH: worst error {worst:.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("out", "transformer_block")))
