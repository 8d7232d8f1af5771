#!/bin/sh
# Every CUDA check of the timing part in one call on a lent GPU machine (docs/gpu-checks.md):
#   OUT=DIR sh gpu_checks/device_run.sh [--cpu-dry-run] [--steps a,b] [--total-s N]
# Needs only python3 with torch, pytest, hypothesis and numpy; PYTHON picks another interpreter.
cd "$(dirname "$0")/.." || exit 2
exec "${PYTHON:-python3}" gpu_checks/device_run.py "$@"
