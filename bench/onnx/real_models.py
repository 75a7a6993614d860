#!/usr/bin/env python3
"""Real architectures through the ONNX importer: export with Debian's PyTorch (random weights,
torch.onnx.export with a dynamic batch axis), import with dml.from_onnx, compile for the CPU, run
every batch bucket bound and compare with PyTorch (fp32, max |err| <= 1e-4; relative to max |y|
when the outputs are smaller than 1).

    PYTHONPATH=python DINOML_BUILD_DIR=$PWD/build /usr/bin/python3 bench/onnx/real_models.py [names...]

Models: bert (nn.TransformerEncoder, relu), bert_gelu (same with GELU), lstm, gru (2 layers each),
resnet18, mobilenet_v2 (torchvision). tests/python/test_onnx_real_models.py runs the same checks.
Exit status 0 only if every selected model imports, compiles and matches.
"""
import os
import sys
import tempfile
import time

import numpy as np
import torch

import dinoml as dml

TOL = 1e-4
BATCH = (1, 8, [2, 8])  # min, max, buckets


class LstmHead(torch.nn.Module):
    def __init__(self, cell="lstm"):
        super().__init__()
        rnn = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
        self.rnn = rnn(input_size=16, hidden_size=32, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


class Encoder(torch.nn.Module):
    def __init__(self, activation="relu"):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                                 activation=activation, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(self.enc(x))


worst_error = {}
ops_after = {}  # name -> sorted DinoML ops of the optimised graph


def build(name):
    torch.manual_seed(0)
    if name == "bert":
        return Encoder().eval(), (16, 64)
    if name == "bert_gelu":  # erf-form GELU in the export: recognised and fused into gemm_*_bias_gelu
        return Encoder("gelu").eval(), (16, 64)
    if name in ("lstm", "gru"):
        return LstmHead(name).eval(), (12, 16)
    import torchvision
    if name == "resnet18":
        return trained_like(torchvision.models.resnet18(weights=None)).eval(), (3, 64, 64)
    if name == "mobilenet_v2":
        return trained_like(torchvision.models.mobilenet_v2(weights=None)).eval(), (3, 64, 64)
    raise SystemExit(f"unknown model {name}")


def trained_like(model):
    """Random but non-trivial BatchNorm statistics and affine parameters: with the freshly
    initialised ones (mean 0, var 1, gamma 1, beta 0) MobileNetV2's outputs shrink to ~1e-9, which
    would make an absolute tolerance meaningless."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.5)
            with torch.no_grad():
                m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.copy_(torch.randn(c, generator=g) * 0.1)
    return model


def check(name, work, batches=(1, 2, 5, 8), opset=17):
    """Exports (at `opset`), imports, compiles and runs `name` at each batch size; returns True when
    the worst |err| vs PyTorch is within TOL (the worst error is in worst_error[name], the optimised
    graph's ops in ops_after[name]). Opsets < 17 write LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div,
    which the importer recognises."""
    model, feat = build(name)
    path = os.path.join(work, f"{name}.onnx")
    x0 = torch.randn(2, *feat)
    # Exported with autograd enabled: in eval mode under no_grad, PyTorch 1.13 routes
    # TransformerEncoderLayer through its fused fast path, which has no ONNX export.
    torch.onnx.export(model, (x0,), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=opset)
    t0 = time.time()
    spec = dml.from_onnx(path, dims={"batch": BATCH})
    art = dml.compile(spec, target="cpu", out=os.path.join(work, name))
    compile_s = time.time() - t0
    import json
    ops = sorted({n["op"] for n in json.load(open(os.path.join(art.path, "graph.dinoir.json")))["nodes"]})
    ops_after[name] = ops
    print(f"  {name}: ops after optimisation: {', '.join(ops)}")
    session = dml.runtime.load(art.path).create_session()
    worst = 0.0
    for b in batches:
        x = torch.randn(b, *feat)
        with torch.no_grad():
            want = model(x).numpy()
        got = session.run_numpy({"x": x.numpy()})["y"]
        assert got.shape == want.shape, (got.shape, want.shape)
        err = float(np.max(np.abs(got - want)))
        scale = float(np.max(np.abs(want)))
        # Absolute tolerance on outputs of order 1; relative to the output scale when it is small.
        label = "max|err|/max|y|" if scale < 1.0 else "max|err|"
        err = err / scale if scale < 1.0 else err
        worst = max(worst, err)
        print(f"  {name} batch={b}: {label} = {err:.2e} (max|y| = {scale:.2e})")
    ok = worst <= TOL
    worst_error[name] = worst
    print(f"{'OK  ' if ok else 'FAIL'} {name}: worst {worst:.2e} (tol {TOL}), import+compile {compile_s:.1f} s")
    return ok


def main(argv):
    names = argv or ["bert", "bert_gelu", "lstm", "gru", "resnet18", "mobilenet_v2"]
    results = {}
    with tempfile.TemporaryDirectory(prefix="dinoml-onnx-models-") as work:
        for n in names:
            try:
                results[n] = check(n, work)
            except dml.OnnxImportError as e:
                print(f"UNSUPPORTED {n}: {e}")
                results[n] = False
            except Exception as e:  # noqa: BLE001 - report and continue with the next model
                print(f"FAIL {n}: {type(e).__name__}: {e}")
                results[n] = False
    print("summary:", ", ".join(f"{k}={'ok' if v else 'no'}" for k, v in results.items()))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
