#!/usr/bin/env bash
# Creates (or updates) the project's virtual environment .venv/ inside the checkout and installs
# the Python packages of the extras named in $DINOML_EXTRAS (default "test") from pyproject.toml.
# The venv is made from Debian's /usr/bin/python3 (3.11), the interpreter the extensions are built
# for; nothing is installed outside .venv/. Idempotent: a stamp of the requirement list skips pip
# when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${DINOML_VENV:-.venv}
EXTRAS=${DINOML_EXTRAS:-test}
if [[ ! -x "$VENV/bin/python" ]]; then
  /usr/bin/python3 -m venv "$VENV"
fi
# The requirement list: the named extras of pyproject.toml (one source of truth), plus, where nvcc
# exists but the CUDA toolkit lacks cuBLASLt, NVIDIA's cuBLAS wheel (headers + libcublasLt.so.13),
# which cmake/cuda.cmake then links the CUDA kernel library against.
reqs=$("$VENV/bin/python" - "$EXTRAS" <<'PY'
import sys, tomllib
proj = tomllib.load(open("pyproject.toml", "rb"))["project"]
out = list(proj.get("dependencies", []))
# The build requirements too (pybind11's CMake package is taken from the venv by scripts/build.sh).
out += tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]
for extra in filter(None, sys.argv[1].replace(",", " ").split()):
    out += proj["optional-dependencies"][extra]
print("\n".join(dict.fromkeys(out)))
PY
)
nvcc=$(command -v nvcc || true); [[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
if [[ -n "$nvcc" ]]; then
  cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  if ! ls "$cuda_root"/lib64/libcublasLt.so* "$cuda_root"/targets/*/lib/libcublasLt.so* >/dev/null 2>&1; then
    reqs+=$'\n'"nvidia-cublas>=13,<14"
  fi
fi
stamp="$VENV/.dinoml-reqs"
if [[ ! -f "$stamp" ]] || [[ "$(cat "$stamp")" != "$reqs" ]]; then
  echo "[venv] installing into $VENV: $(echo "$reqs" | tr '\n' ' ')"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q $(echo "$reqs")
  echo "$reqs" > "$stamp"
fi
# The source tree's python/ on the venv's path (an editable view of the package; `pip install .`
# is the installed form): `import dinoml` then works from any directory with no PYTHONPATH.
site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$PWD/python" > "$site/dinoml-src.pth"
