#!/usr/bin/env bash
# llama.cpp for ENLACE's GGUF checks (python -m enlace.export ... --format gguf, tests/test_gguf.py,
# scripts/check_gguf.py, scripts/bench_decode.py): llama-cpp-python built from source with this machine's compiler
# (CPU only, AVX2/FMA/F16C: any x86-64 of the last decade), once: the wheel is kept in ~/.cache/enlace/wheels and
# reinstalled from there into .venv. Never fails the caller: without a compiler it says so and the tests skip.
source "$(dirname "$0")/_venv.sh"
VERSION="0.3.36"
WHEELS="${ENLACE_WHEELS:-$HOME/.cache/enlace/wheels}"
if python -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$VERSION')" 2>/dev/null; then
  echo "[llama.cpp] llama-cpp-python $VERSION is installed"; exit 0
fi
mkdir -p "$WHEELS"
wheel="$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -1 || true)"
if [ -z "$wheel" ]; then
  echo "[llama.cpp] building llama-cpp-python $VERSION from source into $WHEELS (a few minutes, once)"
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BLAS=OFF -DLLAMA_CURL=OFF"
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  if ! timeout "${LLAMA_BUILD_TIMEOUT:-1800}" python -m pip wheel -q --no-deps "llama-cpp-python==$VERSION" -w "$WHEELS" \
       > "$WHEELS/build-$VERSION.log" 2>&1; then
    echo "[llama.cpp] could not build llama-cpp-python (log: $WHEELS/build-$VERSION.log); the llama.cpp tests skip" >&2
    exit 0
  fi
  wheel="$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl | head -1)"
fi
python -m pip install -q "$wheel" && echo "[llama.cpp] installed $(basename "$wheel")" \
  || echo "[llama.cpp] could not install $wheel; the llama.cpp tests skip" >&2
