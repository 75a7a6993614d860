# Sourced by the bench/cuda/*_device_run.sh scripts on the GPU machine (Python unbuffered, so a log
# cut off by a timeout keeps what was printed).
#   device_setup FILE  the GPU's name, driver, clocks and power, printed and written to FILE (its
#                      folder made), and cuBLASLt on LD_LIBRARY_PATH (the system's, else the one
#                      PyTorch's wheels carry; harness libraries link it but do not ship it); sets LT
export PYTHONUNBUFFERED=1
device_setup() {
  mkdir -p "$(dirname "$1")"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee "$1"
  LT=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda/lib64/libcublasLt.so 2>/dev/null | head -1)
  if [ -z "$LT" ]; then
    LT=$(python3 -c "import glob, site; print(sorted(glob.glob(site.getsitepackages()[0] + '/nvidia/**/libcublasLt.so*', recursive=True))[0])")
  fi
  export LD_LIBRARY_PATH=$(dirname "$LT")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}
