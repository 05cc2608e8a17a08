#!/usr/bin/env bash
# llama.cpp for ENLACE's GGUF checks (python -m enlace.export ... --format gguf, tests/test_gguf.py,
# scripts/check_gguf.py, scripts/bench_decode.py): llama-cpp-python built from source with this machine's compiler
# (CPU only, AVX2/FMA/F16C: any x86-64 of the last decade), once: the wheel is kept in ~/.cache/enlace/wheels and
# reinstalled from there into .venv. Never fails the caller: without a compiler it says so and the tests skip.
#   bash scripts/llama_cpp.sh            # llama-cpp-python into .venv
#   bash scripts/llama_cpp.sh --server   # also llama.cpp's own llama-server, from the same source (for
#                                        # scripts/check_gguf.py --server); prints its path
source "$(dirname "$0")/_venv.sh"
VERSION="0.3.36"
CACHE="${ENLACE_CACHE:-$HOME/.cache/enlace}"
WHEELS="$CACHE/wheels"
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BLAS=OFF -DLLAMA_CURL=OFF"
mkdir -p "$WHEELS"
if python -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$VERSION')" 2>/dev/null; then
  echo "[llama.cpp] llama-cpp-python $VERSION is installed"
else
  wheel="$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -1 || true)"
  if [ -z "$wheel" ]; then
    echo "[llama.cpp] building llama-cpp-python $VERSION from source into $WHEELS (a few minutes, once)"
    export CMAKE_ARGS="$FLAGS"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
    if ! timeout "${LLAMA_BUILD_TIMEOUT:-1800}" python -m pip wheel -q --no-deps "llama-cpp-python==$VERSION" \
         -w "$WHEELS" > "$WHEELS/build-$VERSION.log" 2>&1; then
      echo "[llama.cpp] could not build llama-cpp-python (log: $WHEELS/build-$VERSION.log); its tests skip" >&2
      exit 0
    fi
    wheel="$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl | head -1)"
  fi
  python -m pip install -q "$wheel" && echo "[llama.cpp] installed $(basename "$wheel")" \
    || echo "[llama.cpp] could not install $wheel; the llama.cpp tests skip" >&2
fi
[ "${1:-}" = "--server" ] || exit 0
src="$CACHE/llama.cpp-$VERSION"
server="$src/build/bin/llama-server"
if [ ! -x "$server" ]; then
  echo "[llama.cpp] building llama-server from llama-cpp-python $VERSION's llama.cpp into $src (minutes, once)"
  mkdir -p "$src"
  if ! { python -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$src" \
         && tar xzf "$src/llama_cpp_python-$VERSION.tar.gz" -C "$src" --strip-components=3 \
              "llama_cpp_python-$VERSION/vendor/llama.cpp" \
         && cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release $FLAGS -DLLAMA_BUILD_SERVER=ON \
              -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF \
         && cmake --build "$src/build" --target llama-server -j "$(nproc)"; } > "$src/build.log" 2>&1; then
    echo "[llama.cpp] could not build llama-server (log: $src/build.log)" >&2
    exit 0
  fi
fi
echo "[llama.cpp] llama-server: $server"
