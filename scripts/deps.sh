#!/usr/bin/env bash
# Installs the Debian 12 packages DinoML needs (idempotent; skips apt when all are present).
set -euo pipefail
# The Python packages (numpy, pytest, torch, onnx, onnxruntime, ...) go into the project venv
# (scripts/venv.sh), not the system: Debian gives the interpreter, its headers and venv.
PKGS=(g++ cmake ninja-build pkg-config ccache libgtest-dev nlohmann-json3-dev libcli11-dev libfmt-dev libssl-dev
      libsqlite3-dev pybind11-dev python3-dev python3-venv python3-pybind11)
# scripts/fuzz (libFuzzer + sanitizer runtimes); opt-in so the normal set-up stays lean.
if [[ "${DINOML_WITH_FUZZ:-0}" == 1 ]]; then PKGS+=(clang-14 libclang-rt-14-dev llvm-14 libomp-14-dev); fi
# GEMM provider candidates (kernels/cpu/providers) and bench/ops/gemm_bench: oneDNN, OpenBLAS.
PKGS+=(libdnnl-dev libopenblas-dev)
# GGUF tests: scripts/fetch-ggml-ref installs llama.cpp's libraries (the oracle) with npm;
# scripts/fetch-ort installs ONNX Runtime for bench/models. A Node.js that already ships npm
# (e.g. NodeSource's nodejs) conflicts with Debian's npm package, so npm is only asked for when
# the command is missing.
command -v npm >/dev/null 2>&1 || PKGS+=(nodejs npm)
# Tokenizers (src/tokenizer): PCRE2 runs the BPE pre-tokenizer regexes, ICU gives Unicode classes.
PKGS+=(libpcre2-dev libicu-dev tmux)
# ONNX import (src/import/onnx, cmake/onnx.cmake) and its conformance data (dinoml onnx-conformance).
PKGS+=(libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata)
# Headless Chromium renders `dinoml inspect --html` pages in tests/python/test_trust.py (the test
# skips with a message when it is absent). DINOML_WITH_CHROMIUM=0 leaves it out (it is large).
if [[ "${DINOML_WITH_CHROMIUM:-1}" == 1 ]]; then PKGS+=(chromium); fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing: ${missing[*]}"
  SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# ROCm target (issue 7): Debian 12's HIP compiler (ROCm 5.2.3). Optional: where the packages are
# not available the set-up goes on, and the ROCm library and tests say they were skipped.
ROCM_PKGS=(hipcc libamdhip64-dev)
if [[ "${DINOML_WITH_ROCM:-1}" == 1 ]] && ! dpkg-query -W -f='${Status}' hipcc 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${ROCM_PKGS[@]}" >/dev/null ||
    echo "[deps] warning: ${ROCM_PKGS[*]} could not be installed: the ROCm target will be unavailable"
fi
