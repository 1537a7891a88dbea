#!/usr/bin/env bash
# Installs what `longctx bench --peer=pytorch` needs on Debian 12: the PyTorch
# reference (bench/torch_reference.py) runs on Debian's python3-torch (1.13,
# CPU, its own OpenBLAS and oneDNN) under /usr/bin/python3, not a pyenv or
# venv interpreter. Idempotent. Builds nothing: scripts/setup.sh does that.
# Usage: bash scripts/setup_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  echo "setup_bench: /usr/bin/python3 already imports torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
  exit 0
fi
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup_bench: installing python3-torch"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch >/dev/null
/usr/bin/python3 -c 'import torch; print("setup_bench: torch", torch.__version__)'
