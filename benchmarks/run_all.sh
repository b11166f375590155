#!/usr/bin/env bash
# Everything that needs a GPU, in one go: doctor, the whole test suite (cuda-marked tests included), the
# kernels' check and timing, and the reload benchmark. Outputs go to $OUT (default benchmarks/results/latest).
# Usage: bash benchmarks/run_all.sh [tests|kernels|reload ...]   (default: all three)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/results/latest}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(tests kernels reload)
{
  date -u +"%Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  $PY -c 'import torch, sys; print("torch", torch.__version__, "CUDA", torch.version.cuda, "Python", sys.version.split()[0])'
  nproc | sed 's/^/cores: /'
  $PY -m jitload doctor
} 2>&1 | tee "$OUT/environment.txt"
status=0
for part in "${parts[@]}"; do
  case $part in
    tests)   $PY -m pytest -q -rs 2>&1 | tee "$OUT/tests.txt" || status=1 ;;
    kernels) $PY -m jitload bench --all --compiled --report "$OUT/report" 2>&1 | tee "$OUT/kernels.txt" || status=1 ;;
    reload)  $PY benchmarks/reload.py --out "$OUT/reload.md" || status=1 ;;
    *) echo "unknown part: $part" >&2; status=2 ;;
  esac
done
exit $status
