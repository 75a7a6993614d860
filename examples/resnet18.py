"""ResNet-18 (torchvision's architecture and parameter names) built from dml.nn, loaded with a
torchvision resnet18(weights=None) state_dict (random init; BatchNorm statistics randomised so
batch-norm folding is exercised), compiled for CPU with a dynamic batch (1..8, buckets 1 and 8)
and checked against torchvision at batch 1 and 8.

    python examples/resnet18.py [OUT_DIR] [--bench] [--threads N] [--cpu-time]

--bench also times session.run against torch (eval, no_grad, same thread count, default 2) at
batch 1 and 8 (median of repeats). --cpu-time measures process CPU time / threads instead of wall
time (with OMP_WAIT_POLICY=passive so idle threads do not spin): on a loaded shared machine wall
time mostly measures time spent descheduled.
"""
import os
import sys
import time

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
CPU_TIME = "--cpu-time" in sys.argv
# libgomp reads these when it loads (torch and the DinoML kernels share it): set them first.
os.environ["OMP_NUM_THREADS"] = str(THREADS)
if CPU_TIME:
    os.environ["OMP_WAIT_POLICY"] = "passive"

import numpy as np  # noqa: E402

try:
    import dinoml as dml
except ImportError:  # running from a source checkout: the package lives in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    import dinoml as dml
from dinoml import nn  # noqa: E402

batch = dml.Dim("batch", min=1, max=8, typical=1, buckets=(1, 8))


class BasicBlock(dml.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(dml.Module):
    def __init__(self, layers=(2, 2, 2, 2), num_classes=1000):
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False),
                                       nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = dml.ops.flatten(self.avgpool(x), start_dim=1)
        return self.fc(x)


def torch_model(seed: int = 0):
    """torchvision resnet18(weights=None) in eval mode with randomised BatchNorm statistics."""
    import torch
    import torchvision
    torch.manual_seed(seed)
    m = torchvision.models.resnet18(weights=None)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                c = mod.num_features
                mod.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(c, generator=g) * 0.4 + 0.8)
                mod.bias.copy_(torch.randn(c, generator=g) * 0.1)
    return m.eval()


def build_spec(state_dict):
    consts = {k: v.detach().numpy() for k, v in state_dict.items()}
    return dml.trace(ResNet(), inputs={"x": dml.TensorSpec([batch, 3, 224, 224], "float32")}, constants=consts,
                     name="resnet18")


def median_ms(fn, runs):
    """Median wall time of `runs` runs; with --cpu-time the process CPU time / threads averaged over
    back-to-back runs of at least 1 s (CPU time is accounted in scheduler ticks)."""
    fn()
    if CPU_TIME:
        t0 = time.perf_counter()
        fn()
        n = max(runs, int(1.0 / max(time.perf_counter() - t0, 1e-6)))
        c0 = time.process_time()
        for _ in range(n):
            fn()
        return (time.process_time() - c0) / THREADS / n * 1e3
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def main(out_dir: str, bench: bool) -> int:
    import torch
    torch.set_num_threads(THREADS)
    tm = torch_model()
    spec = build_spec(tm.state_dict())
    t0 = time.perf_counter()
    art = dml.compile(spec, target="cpu", out=out_dir)
    print(f"compiled -> {art.path} in {time.perf_counter() - t0:.1f} s")
    session = dml.runtime.load(art.path).create_session()
    ok = True
    rng = np.random.default_rng(0)
    for n in (1, 8):
        x = rng.standard_normal((n, 3, 224, 224)).astype(np.float32)
        y = session.run_numpy({"x": x})["output"]
        with torch.no_grad():
            want = tm(torch.from_numpy(x)).numpy()
        err = float(np.max(np.abs(y - want)))
        close = bool(np.allclose(y, want, rtol=1e-4, atol=1e-4))
        ok &= close
        print(f"batch {n}: y{list(y.shape)} max|y - torch| = {err:.2e} (max|torch| = {np.max(np.abs(want)):.2f}) "
              f"{'OK' if close else 'MISMATCH'} (rtol=atol=1e-4)")
        if bench:
            runs = 20 if n == 1 else 8
            d_ms = median_ms(lambda: session.run_numpy({"x": x}), runs)
            xt = torch.from_numpy(x)
            with torch.no_grad():
                t_ms = median_ms(lambda: tm(xt), runs)
            how = "mean CPU time / threads" if CPU_TIME else "median wall time"
            print(f"batch {n}: DinoML session.run {d_ms:.1f} ms, torch {torch.__version__} {t_ms:.1f} ms "
                  f"-> {t_ms / d_ms:.2f}x ({THREADS} threads, {how})")
    return 0 if ok else 1


if __name__ == "__main__":
    args = [a for i, a in enumerate(sys.argv[1:], 1) if not a.startswith("--") and sys.argv[i - 1] != "--threads"]
    sys.exit(main(args[0] if args else os.path.join("out", "resnet18"), "--bench" in sys.argv))
