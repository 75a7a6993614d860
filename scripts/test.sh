#!/usr/bin/env bash
# Command 2: install what is missing, build, and run the whole test suite (C++ + Python).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/venv.sh
scripts/build.sh
BUILD_DIR=${DINOML_BUILD_DIR:-build}
export DINOML_CACHE_DIR=${DINOML_CACHE_DIR:-$(mktemp -d /tmp/dinoml-test-cache.XXXXXX)}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"
# ASan+UBSan over the C++ suite and TSan over the concurrency tests, on every change
# (docs/reliability.md; ~7 min on 2 cores). DINOML_SKIP_SANITIZERS=1 skips them locally.
if [[ "${DINOML_SKIP_SANITIZERS:-0}" != 1 ]]; then
  scripts/sanitize asan
  scripts/sanitize tsan
fi
