#!/usr/bin/env bash
# Command 2: install what is missing, build, and run the whole test suite (C++ + Python).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
BUILD_DIR=${DINOML_BUILD_DIR:-build}
export DINOML_CACHE_DIR=${DINOML_CACHE_DIR:-$(mktemp -d /tmp/dinoml-test-cache.XXXXXX)}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"
