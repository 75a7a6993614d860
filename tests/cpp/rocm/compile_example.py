"""Compiles one of the example models for target rocm (tests/cpp/rocm drives it):

    PYTHONPATH=python DINOML_BUILD_DIR=build python3 tests/cpp/rocm/compile_example.py transformer_block|resnet18 ARCH OUT
"""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import dinoml as dml  # noqa: E402


def main(name: str, arch: str, out: str) -> int:
    path = os.path.join(ROOT, "examples", name + ".py")
    spec_ = importlib.util.spec_from_file_location("example_" + name, path)
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    if name == "resnet18":
        spec = mod.build_spec(mod.torch_model().state_dict())
    else:
        spec = mod.build_spec()
    art = dml.compile(spec, target="rocm", arch=arch, out=out, progress=False)
    print(f"compiled {name} for rocm/{arch} -> {art.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
