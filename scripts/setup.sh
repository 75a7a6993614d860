#!/usr/bin/env bash
# Command 1: install what is missing, build, compile the bundled example model and run it.
set -euo pipefail
cd "$(dirname "$0")/.."
DINOML_WITH_TORCH=${DINOML_WITH_TORCH:-0} DINOML_WITH_CHROMIUM=${DINOML_WITH_CHROMIUM:-0} scripts/deps.sh
scripts/build.sh
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
/usr/bin/python3 examples/linear.py out/linear
