# Sourced by scripts/*.sh: creates .venv on first use and keeps it in step with pyproject.toml.
# Needs only python3. Without a CUDA device it installs the CPU build of torch (small and fast).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PY="${PYTHON:-python3}"

if [ ! -x .venv/bin/python ]; then
  echo "[enlace] creating .venv with $($PY --version 2>&1)"
  "$PY" -m venv .venv || { echo "[enlace] error: '$PY -m venv' failed; install python3-venv" >&2; exit 1; }
fi
VPY="$ROOT/.venv/bin/python"

stamp=".venv/.enlace-installed"
want="$(cat pyproject.toml scripts/_venv.sh | sha256sum | cut -c1-16)-$TORCH_VERSION"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if ! "$VPY" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
    extra=()
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      echo "[enlace] CUDA device found: installing torch==$TORCH_VERSION (CUDA build)"
    else
      # The CPU index is used when it answers; otherwise pip's own index (a CPU wheel on our dev machines).
      if command -v curl >/dev/null 2>&1 && curl -sfI --max-time 5 https://download.pytorch.org/whl/cpu/ >/dev/null 2>&1; then
        extra=(--extra-index-url https://download.pytorch.org/whl/cpu)
      fi
      echo "[enlace] no CUDA device: installing torch==$TORCH_VERSION (CPU build)"
    fi
    "$VPY" -m pip install -q "torch==$TORCH_VERSION" "${extra[@]}"
  fi
  echo "[enlace] installing enlace[dev] into .venv"
  "$VPY" -m pip install -q -e ".[dev]"
  echo "$want" > "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
