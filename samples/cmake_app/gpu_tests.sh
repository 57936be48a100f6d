#!/usr/bin/env bash
# The CMake sample's GPU tests, in two steps on two machines (run from the repository root):
#
#   bash samples/cmake_app/gpu_tests.sh prepare [PREFIX]   # build machine: tl_aot, TileLang, nvcc
#   bash samples/cmake_app/gpu_tests.sh run [PREFIX]       # GPU machine: cmake, g++, ninja, CUDA
#
# `prepare` configures the top-level project for sm_80 and sm_90a (TL_AOT_ARCHS overrides),
# builds the kernels and installs them with their package config into PREFIX (default
# .gpubuild/cmake, git-ignored). `run` builds samples/cmake_app against that prefix
# (-DTL_AOT_APP_PREBUILT=ON: no tl_aot or TileLang needed, only apache-tvm-ffi, installed from
# the wheels in .whl/ when python3 lacks it) and runs every ctest test, CPU and GPU, with
# TL_AOT_REQUIRE_GPU=1 so a missing device fails instead of skipping.
set -euo pipefail

step=${1:-}
prefix=${2:-.gpubuild/cmake}
case "$step" in
  prepare)
    build=${BUILD_DIR:-build/cmake-gpu}
    cmake -S . -B "$build" -G Ninja -DTL_AOT_ARCHS="${TL_AOT_ARCHS:-80;90a}"
    cmake --build "$build"
    rm -rf "$prefix"
    cmake --install "$build" --prefix "$prefix"
    ;;
  run)
    build=${BUILD_DIR:-/tmp/tl_aot_cmake_app}
    python=$(command -v python3)
    if ! "$python" -m tvm_ffi.config --cmakedir >/dev/null 2>&1; then
      "$python" -m pip install -q --no-index --no-deps --target /tmp/tl_aot_site .whl/apache_tvm_ffi-*.whl
      export PYTHONPATH=/tmp/tl_aot_site${PYTHONPATH:+:$PYTHONPATH}
    fi
    prefix=$(cd "$prefix" && pwd)
    cmake -S samples/cmake_app -B "$build" -G Ninja -DTL_AOT_APP_PREBUILT=ON \
      -DCMAKE_PREFIX_PATH="$prefix" -DPython_EXECUTABLE="$python"
    cmake --build "$build"
    ctest --test-dir "$build" --output-on-failure -LE gpu
    TL_AOT_REQUIRE_GPU=1 ctest --test-dir "$build" --output-on-failure -L gpu --verbose
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
