#!/usr/bin/env bash
# cmake/quickstart.sh — the README's quick start, from the root of a parscan checkout:
#
#   bash cmake/quickstart.sh demo   configure (Release), build and run docs/examples/recurrence_demo
#                                   (on the GPU when one is visible; else on the CPU, built without
#                                   the CUDA backend in build/quickstart-host)
#   bash cmake/quickstart.sh test   make sure Catch2 is installed, build everything and run the
#                                   host tests (without a GPU the kernels compile to PTX alone);
#                                   with a GPU (nvidia-smi -L works) also build and
#                                   run the GPU tests; then build the Python package (host backend)
#                                   into a virtual environment and run test/python (NumPy and
#                                   JAX-on-CPU; the PyTorch tests where torch is importable)
#
# Works on a machine with no GPU and no CUDA toolkit too: the CUDA backend is then left out.
# Both commands share the build directory build/quickstart (the demo without a GPU uses
# build/quickstart-host). Optional environment:
#   PARSCAN_BUILD_DIR   build directory (default build/quickstart; build/quickstart-host for the
#                       demo without a GPU)
#   PARSCAN_JOBS        parallel build jobs (default: the number of cores)
#   PARSCAN_GPU_TEST_JOBS  GPU test shards run at once (default 8; Catch2 v3 splits the suite)
#   PARSCAN_CMAKE_ARGS  extra arguments for the configure step (split on spaces)
#   PARSCAN_PYTHON      the Python that builds the package (default python3); PARSCAN_PYTHON=none
#                       skips the Python part of `test`
#   PARSCAN_PYTHON_CUDA 1 or 0: build the Python package with or without the CUDA backend
#                       (default: with it where a GPU is visible, so its tests run there; host
#                       only elsewhere, where compiling the kernels again would test nothing)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  echo "usage: bash cmake/quickstart.sh demo|test" >&2
  exit 2
}
[[ $# -eq 1 ]] || usage
mode=$1
[[ $mode == demo || $mode == test ]] || usage

build_dir=${PARSCAN_BUILD_DIR:-build/quickstart}
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  have_gpu=1
fi
# The demo without a GPU runs on the CPU: it builds the host backend alone, in its own folder,
# so that it compiles no CUDA kernel it would not run (minutes on a small machine).
host_only_demo=0
if [[ $mode == demo && $have_gpu -eq 0 ]]; then
  host_only_demo=1
  build_dir=${PARSCAN_BUILD_DIR:-build/quickstart-host}
fi
jobs=${PARSCAN_JOBS:-$(nproc 2>/dev/null || echo 2)}
export CMAKE_BUILD_PARALLEL_LEVEL=$jobs  # also used by the nested consumer builds

say() { echo "quickstart: $*"; }

command -v cmake >/dev/null 2>&1 || { echo "quickstart: cmake (3.25 or newer) is required: install cmake" >&2; exit 1; }

# --- generator: keep the one an existing build directory was made with, else Ninja if present.
generator=""
if [[ -f $build_dir/CMakeCache.txt ]]; then
  generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build_dir/CMakeCache.txt")
fi
if [[ -z $generator ]]; then
  if command -v ninja >/dev/null 2>&1; then generator=Ninja; else generator="Unix Makefiles"; fi
fi

# --- CUDA: nvcc on PATH, or the toolkit's usual home; its lib/cmake dirs hold CCCL's package.
cuda_root=""
for d in "${CUDA_PATH:-}" "${CUDA_HOME:-}" /usr/local/cuda; do
  if [[ -n $d && -d $d/include ]]; then cuda_root=$d; break; fi
done
if ! command -v nvcc >/dev/null 2>&1 && [[ -z ${CUDACXX:-} && -n $cuda_root && -x $cuda_root/bin/nvcc ]]; then
  export CUDACXX=$cuda_root/bin/nvcc
fi
prefix_path=""
if [[ -n $cuda_root ]]; then
  for d in "$cuda_root/lib64/cmake" "$cuda_root/lib/cmake" "$cuda_root/targets/$(uname -m)-linux/lib/cmake" \
           "$cuda_root/targets/sbsa-linux/lib/cmake"; do
    if [[ -d $d ]]; then
      case ";$prefix_path;" in *";$(cd "$d" && pwd -P);"*) ;; *) prefix_path=${prefix_path:+$prefix_path;}$(cd "$d" && pwd -P) ;; esac
    fi
  done
fi

# --- Catch2 (tests only): present, or installed from the distribution's packages.
catch2_present() {
  local d
  for d in /usr/include /usr/local/include; do
    [[ -f $d/catch2/catch_all.hpp || -f $d/catch2/catch.hpp ]] && return 0
  done
  local IFS=':;'
  for d in ${CMAKE_PREFIX_PATH:-} ${Catch2_DIR:-}; do
    [[ -n $d ]] || continue
    [[ -f $d/include/catch2/catch_all.hpp || -f $d/include/catch2/catch.hpp ]] && return 0
    compgen -G "$d/lib*/cmake/Catch2/Catch2Config.cmake" >/dev/null && return 0
    compgen -G "$d/Catch2Config.cmake" >/dev/null && return 0
  done
  compgen -G "/usr/lib/cmake/Catch2/Catch2Config.cmake" >/dev/null && return 0
  compgen -G "/usr/lib/*/cmake/Catch2/Catch2Config.cmake" >/dev/null && return 0
  compgen -G "/usr/local/lib*/cmake/Catch2/Catch2Config.cmake" >/dev/null && return 0
  compgen -G "/usr/share/cmake/Catch2/Catch2Config.cmake" >/dev/null && return 0
  return 1
}

install_catch2() {
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else return 1; fi
  fi
  command -v apt-get >/dev/null 2>&1 || return 1
  say "installing Catch2 (apt-get install -y catch2)"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq catch2 >/dev/null 2>&1 && return 0
  $sudo apt-get update -qq >/dev/null 2>&1 && $sudo apt-get install -y -qq catch2 >/dev/null 2>&1
}

if [[ $mode == test ]] && ! catch2_present; then
  if ! install_catch2 || ! catch2_present; then
    echo "quickstart: the tests need Catch2 (v2 or v3): install it (Debian/Ubuntu: sudo apt-get install catch2) or add its prefix to CMAKE_PREFIX_PATH, then run this again" >&2
    exit 1
  fi
fi

# --- configure and build.
cmake_args=(-S . -B "$build_dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release)
[[ -n $prefix_path ]] && cmake_args+=("-DCMAKE_PREFIX_PATH=$prefix_path")
if [[ $mode == demo ]]; then
  cmake_args+=(-DPARSCAN_BUILD_EXAMPLES=ON -DPARSCAN_BUILD_TESTS=OFF -DPARSCAN_GPU_TESTS=OFF
               -DPARSCAN_BUILD_BENCHMARKS=OFF)
  [[ $host_only_demo -eq 1 ]] && cmake_args+=(-DPARSCAN_ENABLE_CUDA=OFF)
else
  # Without a GPU the GPU benchmarks could not run: they are not built (the library's kernels
  # still are, so the CUDA backend is compile-checked).
  gpu_tests=OFF
  [[ $have_gpu -eq 1 ]] && gpu_tests=ON
  cmake_args+=(-DPARSCAN_BUILD_EXAMPLES=ON -DPARSCAN_BUILD_TESTS=ON "-DPARSCAN_GPU_TESTS=$gpu_tests"
               "-DPARSCAN_BUILD_GPU_BENCHMARKS=$gpu_tests")
  # Without a GPU nothing runs the kernels' machine code, so they are compiled to PTX alone
  # (compute_90, no sm_90): the same compile check without the assembler, about 40% less time
  # an object on two cores. An architecture the user names (CUDAARCHS or PARSCAN_CMAKE_ARGS) wins.
  if [[ $have_gpu -eq 0 && -z ${CUDAARCHS:-} && ${PARSCAN_CMAKE_ARGS:-} != *CMAKE_CUDA_ARCHITECTURES* ]]; then
    cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES=90-virtual)
  fi
fi
if [[ -n ${PARSCAN_CMAKE_ARGS:-} ]]; then
  read -r -a extra <<<"$PARSCAN_CMAKE_ARGS"
  cmake_args+=("${extra[@]}")
fi

if [[ $mode == demo || $have_gpu -eq 0 ]]; then
  # GPU tests need nvcc; without a GPU they stay off, so a missing nvcc is not an error.
  :
elif ! command -v nvcc >/dev/null 2>&1 && [[ -z ${CUDACXX:-} ]]; then
  echo "quickstart: a GPU is visible but nvcc was not found: install the CUDA toolkit or set CUDACXX" >&2
  exit 1
fi

say "configuring $build_dir ($generator)"
cmake "${cmake_args[@]}"

if [[ $mode == demo ]]; then
  say "building recurrence_demo"
  cmake --build "$build_dir" --target recurrence_demo --parallel "$jobs"
  demo=$build_dir/docs/examples/recurrence_demo
  [[ -x $demo ]] || demo=$build_dir/docs/examples/Release/recurrence_demo
  say "running $demo"
  exec "$demo"
fi

say "building everything"
cmake --build "$build_dir" --parallel "$jobs"

say "running the host tests"
failed=""
ctest --test-dir "$build_dir" -C Release --output-on-failure -L host -j "$jobs" || failed="host"

if [[ $have_gpu -eq 1 ]]; then
  say "GPU found: running the GPU tests"
  # The suite's shards (Catch2 v3; test/CMakeLists.txt) side by side, on one GPU.
  ctest --test-dir "$build_dir" -C Release --output-on-failure -L gpu -j "${PARSCAN_GPU_TEST_JOBS:-8}" ||
    failed="${failed:+$failed and }gpu"
fi

# --- the Python package: built by pip (scikit-build-core drives this CMake project) into a
# virtual environment under the build directory, which sees the system's packages, so a machine
# without network access uses what is installed; only what is missing is fetched.
run_python_tests() {
  local python=${PARSCAN_PYTHON:-python3}
  command -v "$python" >/dev/null 2>&1 || { echo "quickstart: $python not found (PARSCAN_PYTHON=none skips the Python tests)" >&2; return 1; }
  local venv
  venv=$(cd "$build_dir" && pwd)/python-venv
  if [[ ! -x $venv/bin/python ]]; then
    say "creating $venv"
    "$python" -m venv --system-site-packages "$venv" || return 1
  fi
  local py=$venv/bin/python
  if ! "$py" -c "import numpy, nanobind, scikit_build_core, pytest" 2>/dev/null; then
    say "installing the build and test requirements (numpy nanobind scikit-build-core pytest)"
    "$py" -m pip install -q numpy nanobind scikit-build-core pytest || return 1
  fi
  if ! "$py" -c "import jax, ml_dtypes" 2>/dev/null; then
    say "installing jax[cpu] for the JAX tests"
    "$py" -m pip install -q "jax[cpu]" || say "jax[cpu] could not be installed: the JAX tests will be skipped"
  fi
  local cuda=OFF
  [[ ${PARSCAN_PYTHON_CUDA:-$have_gpu} == 1 ]] && cuda=ON
  say "building and installing the Python package (PARSCAN_ENABLE_CUDA=$cuda)"
  "$py" -m pip install -q --no-build-isolation --no-deps \
      -C "cmake.define.PARSCAN_ENABLE_CUDA=$cuda" -C "build-dir=$build_dir/python-build" ./ || return 1
  say "running test/python"
  "$py" -m pytest -q -p no:cacheprovider test/python
}
if [[ ${PARSCAN_PYTHON:-} != none ]]; then
  run_python_tests || failed="${failed:+$failed and }Python"
fi
if [[ -n $failed ]]; then
  echo "quickstart: the $failed tests FAILED" >&2
  exit 1
fi
say "all tests passed"
