#!/usr/bin/env bash
# Configures and builds DinoML into ./build (Release), with /usr/bin/python3 for the extension.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${DINOML_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
