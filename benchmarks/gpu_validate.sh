#!/usr/bin/env bash
# Validate a first GPU before its first study: about ten minutes, one line per check with its figure and its pass
# band, then GPU VALIDATION PASSED or FAILED (benchmarks/gpu_validate.py lists the checks; the README's "Validate a
# first GPU" says what to do with each figure). It writes gpu_validate.json to $OUT (default: here).
#   bash benchmarks/gpu_validate.sh [CONFIG]      the study to validate (default config/paper.yaml)
#   FAKE=1 bash benchmarks/gpu_validate.sh        on a CPU against the suite's fake NVML: the script's own test
#     (FAKE_PERIOD_S: the update period the meter assumes for the fake counter, whose own is 0.01 s; 0.03 plays a
#     CPU 3x faster, 0.0033 one 3x slower)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=${PYTHON:-.venv/bin/python}
export HF_HUB_DISABLE_PROGRESS_BARS=1 PYTHONUNBUFFERED=1
CONFIG=${1:-config/paper.yaml}
if [ -n "${FAKE:-}" ]; then
  # 3-s closure windows: the fake sensor's power lags its load by one update, longer when a loaded machine delays the
  # reads; over 1-s windows that lag alone put the matmul window's ratio at 1.025 in a suite run (band 0.98-1.02)
  exec "$PY" benchmarks/gpu_validate.py --config "$CONFIG" --fake-nvml --steps 60 --settle-s 0.2 --window-s 3 \
    --idle-s 0.5 ${FAKE_PERIOD_S:+--fake-period-s "$FAKE_PERIOD_S"} --out "${OUT:-.}"
fi
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,power.limit,temperature.gpu,mig.mode.current \
  --format=csv
exec "$PY" benchmarks/gpu_validate.py --config "$CONFIG" --out "${OUT:-.}"
