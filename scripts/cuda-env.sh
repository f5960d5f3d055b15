# Source this (`source scripts/cuda-env.sh`) to put the CUDA compilers that
# scripts/cuda-toolchain.sh installed in .cuda/ on the library path and PATH.
_dlc_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_dlc_cuda="$_dlc_root/.cuda/python/nvidia"
export LD_LIBRARY_PATH="$_dlc_cuda/cuda_nvrtc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$_dlc_cuda/cuda_nvcc/bin:$PATH"
export PTXAS="$_dlc_cuda/cuda_nvcc/bin/ptxas"
unset _dlc_root _dlc_cuda
