#!/usr/bin/env bash
# GPU check: run this first on a new NVIDIA GPU machine, before a study.
#
# What it needs: an NVIDIA GPU with its driver (nvidia-smi), Python 3.11 with torch (CUDA
# build), transformers, nvidia-ml-py and polars; `make study` or
# `pip install -r requirements.txt` installs them. Where polars is missing and no index can
# be reached, put its wheel in .whl/ and this script installs it into /tmp/site.
#
# How to run it:   bash benchmarks/gpu_check.sh          (about 5 minutes on a data-centre GPU)
#   STEPS=N  training steps of each energy check (default 1000);  OUT=DIR  where gpu_check.json goes.
#
# What it prints: the GPU's name, UUID, power limit and temperature; then per precision (fp32,
# bf16-mixed, fp16-mixed): the device profile (CS_TFLOPS and its IQR), tokens/s, MFU, the
# trial's matmul checks against the profile, NVML's energy counter against the integral of the
# polled power (near 1 when both are right), RMS power, samples and failed reads, and whether the
# meter's GPU UUID is the one nvidia-smi reports. Then a table of steps/s and MFU per training
# stack (transformers' LlamaForCausalLM, the native model, the native model compiled; the
# compile's seconds apart) in fp32 and bf16, and whether the same seed gives the same loss curve
# bit for bit (eager and compiled). Last line: GPU CHECK PASSED or FAILED.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import polars" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,uuid,power.limit,temperature.gpu --format=csv
export HF_HUB_DISABLE_PROGRESS_BARS=1 PYTHONUNBUFFERED=1
python3 benchmarks/gpu_check.py --out "${OUT:-.}" --steps "${STEPS:-1000}"
