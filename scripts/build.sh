#!/usr/bin/env bash
# Configures and builds DinoML into ./build (Release), with the project venv's Python (.venv/,
# made by scripts/venv.sh from Debian's /usr/bin/python3) for the extensions and the Python tests.
# ccache, where installed, caches compilations across build directories and worktrees.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${DINOML_BUILD_DIR:-build}
PY=${DINOML_PYTHON:-$PWD/.venv/bin/python}
[[ -x "$PY" ]] || { echo "build.sh: $PY is missing: run scripts/venv.sh first (scripts/setup.sh does)" >&2; exit 1; }
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$PWD")} CCACHE_NOHASHDIR=1
fi
# pybind11 from the venv (PyPI's release knows numpy 2's array layout; Debian 12's 2.10 does not).
pybind11_dir=$("$PY" -m pybind11 --cmakedir)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PY" -Dpybind11_DIR="$pybind11_dir" \
  "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
