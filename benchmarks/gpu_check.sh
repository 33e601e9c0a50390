#!/usr/bin/env bash
# Run on a machine with an NVIDIA GPU (e.g. through the device tool: one call, timeout ~400 s).
# The H200 image has torch, transformers, nvidia-ml-py; polars travels as a wheel in .whl/
# (see /work/.library/device/README.md for fetching it), installed here into /tmp/site.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import polars" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,uuid,power.limit,temperature.gpu --format=csv
export HF_HUB_DISABLE_PROGRESS_BARS=1 PYTHONUNBUFFERED=1
python3 benchmarks/gpu_check.py --out "${OUT:-.}" --steps "${STEPS:-2000}"
