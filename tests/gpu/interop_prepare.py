"""Builds the bundle for the zero-copy PyTorch interop check (issue 4, "session.run_torch / DLPack
(zero-copy device tensors in and out)") where the compiler is built (nvcc, no GPU needed):

* a CUDA artifact (sm_90a unless DINOML_CUDA_ARCH): y = gelu(x·wᵀ + b) (bfloat16, exact GELU)
  and z = layer_norm(y) in float32, with a dynamic batch Dim of three buckets;
* the runtime extension's sources (python/src/rt + numpy_convert + the dtype table) and the
  Python package without any compiled extension. The GPU machine's Python differs from this
  one's, so tests/gpu/interop_run.py builds `_dinoml_rt` there with its own Python headers and
  pybind11 (build_runtime_extension below, also exercised here by the CI test) — the package then
  runs as a runtime-only install.

    DINOML_BUILD_DIR=build python3 tests/gpu/interop_prepare.py OUT_DIR
    python3 OUT_DIR/interop_run.py OUT_DIR [RESULT_DIR]        # on the GPU machine
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
D_IN, D_OUT = 256, 384
SEED = 7


def weights():
    import numpy as np
    rng = np.random.default_rng(SEED)
    return {"w": (rng.standard_normal((D_OUT, D_IN)) / np.sqrt(D_IN)).astype(np.float32),
            "b": (0.1 * rng.standard_normal(D_OUT)).astype(np.float32),
            "g": (1 + 0.1 * rng.standard_normal(D_OUT)).astype(np.float32),
            "beta": (0.1 * rng.standard_normal(D_OUT)).astype(np.float32)}


def build_artifact(out_dir, arch):
    import dinoml as dml

    class Net(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([D_OUT, D_IN], "bfloat16")
            self.b = dml.Parameter([D_OUT], "bfloat16")
            self.g = dml.Parameter([D_OUT])
            self.beta = dml.Parameter([D_OUT])

        def forward(self, x):
            y = dml.ops.gemm_rcr_bias_gelu(x, self.w, self.b)
            z = dml.ops.layer_norm(dml.ops.cast(y, "float32"), self.g, self.beta, eps=1e-5)
            return {"y": y, "z": z}

    W = weights()
    batch = dml.Dim("batch", min=1, max=512, buckets=(8, 64, 512))
    spec = dml.trace(Net(), inputs={"x": dml.TensorSpec([batch, D_IN], "bfloat16")}, name="interop",
                     constants=W)  # bfloat16 parameters take float32 (rounded)
    return dml.compile(spec, target="cuda", arch=arch, out=out_dir)


RT_SOURCES = ["python/src/rt/*.cpp", "python/src/rt/*.h", "python/src/bindings.h", "python/src/numpy_convert.cpp",
              "src/ir/dtype.cpp", "src/ir/dtype.h", "src/ir/error.h", "kernels/common/dinoml/half.h",
              "include/dinoml/runtime.h"]


def copy_sources(root, dest):
    for pattern in RT_SOURCES:
        for f in glob.glob(os.path.join(root, pattern)):
            rel = os.path.relpath(f, root)
            os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(f, os.path.join(dest, rel))


def copy_package(root, dest):
    shutil.copytree(os.path.join(root, "python", "dinoml"), os.path.join(dest, "dinoml"),
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))


def pybind11_include():
    """pybind11's headers: the pybind11 package of this Python (the project venv: PyPI's release knows
    numpy 2), else the copy PyTorch's wheels carry (the GPU machine), else the system's."""
    try:
        import pybind11
        return pybind11.get_include()
    except ImportError:
        pass
    for d in [os.path.join(p, "torch", "include") for p in sys.path if p] + ["/usr/include"]:
        if os.path.exists(os.path.join(d, "pybind11", "pybind11.h")):
            return d
    raise SystemExit("pybind11 headers not found (apt-get install pybind11-dev, or a PyTorch wheel)")


def build_runtime_extension(src, runtime_lib_dir, package_dir):
    """Compiles `_dinoml_rt` for this Python from the copied sources into package_dir/dinoml,
    linked against runtime_lib_dir/libdinoml_runtime.so (rpath set). Returns the .so path."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = os.path.join(package_dir, "dinoml", "_dinoml_rt" + suffix)
    cpp = sorted(glob.glob(os.path.join(src, "python/src/rt/*.cpp"))) + [
        os.path.join(src, "python/src/numpy_convert.cpp"), os.path.join(src, "src/ir/dtype.cpp")]
    cmd = [os.environ.get("CXX", "g++"), "-O2", "-std=c++20", "-shared", "-fPIC", "-fvisibility=hidden",
           "-I" + sysconfig.get_paths()["include"], "-I" + pybind11_include(), "-I" + os.path.join(src, "include"),
           "-I" + os.path.join(src, "src"), "-I" + os.path.join(src, "kernels", "common"), *cpp, "-o", out,
           "-L" + runtime_lib_dir, "-ldinoml_runtime", "-Wl,-rpath," + os.path.abspath(runtime_lib_dir)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("building _dinoml_rt failed:\n" + " ".join(cmd) + "\n" + r.stderr[-4000:])
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu-interop"
    arch = os.environ.get("DINOML_CUDA_ARCH", "sm_90a")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    build_artifact(os.path.join(out, "artifact"), arch)
    copy_sources(ROOT, os.path.join(out, "src"))
    copy_package(ROOT, os.path.join(out, "pkg"))
    for f in ("interop_run.py", "interop_prepare.py"):
        shutil.copy2(os.path.join(HERE, f), os.path.join(out, f))
    for f in ("dml_ctypes.py", "cuda_timing.py"):
        shutil.copy2(os.path.join(ROOT, "python", "dinoml", "tools", f), os.path.join(out, f))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print(f"bundle {out}: {size / 2**20:.1f} MiB (artifact for {arch})")


if __name__ == "__main__":
    main()
