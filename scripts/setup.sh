#!/usr/bin/env bash
# Command 1: install what is missing (Debian packages, the project venv .venv/), build, compile the
# bundled example model and run it.
set -euo pipefail
cd "$(dirname "$0")/.."
DINOML_WITH_CHROMIUM=${DINOML_WITH_CHROMIUM:-0} scripts/deps.sh
scripts/venv.sh
scripts/build.sh
.venv/bin/python examples/linear.py out/linear
