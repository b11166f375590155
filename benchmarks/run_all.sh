#!/usr/bin/env bash
# Everything that needs a GPU, in one go: doctor, the whole test suite (cuda-marked tests included), the
# kernels' check and timing, and the reload benchmark. Outputs go to $OUT (default benchmarks/results/latest, not
# committed). With WRITE_RESULTS=1 the bench, backward, variants parts also write their sections of this machine's
# page in benchmarks/results/ (benchmarks/results_page.py), stamped with the command, date, commit and machine.
# Usage: bash benchmarks/run_all.sh [PART ...]   (default: tests kernels reload)
#   prebuild     build every kernel, in parallel processes (one compiler each)
#   tests        the whole test suite;  kerneltests  the kernel, stream and install tests only
#   kernels      jitload bench --all --compiled (float32 and bfloat16) with a report and plots
#   bench-NAME   the same for one kernel;  backward  benchmarks/backward.py
#   variants     benchmarks/variants.py $VARIANTS_ARGS: a kernel's launch knobs swept, e.g.
#                VARIANTS_ARGS="bias_gelu -D BIAS_GELU_BLOCK=128,256,512"
#   resources    registers, shared memory and spills of every kernel ("$CUOBJDUMP" --dump-resource-usage)
#   reload       benchmarks/reload.py
#   notebooks    execute $NOTEBOOKS (default all) and keep their outputs (benchmarks/run_notebooks.py --write),
#                then regenerate notebooks/README.md's run table (--readme);
#                with $NOTEBOOKS_TAR set, notebooks/ is tarred there after each one (a timeout keeps what ran)
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
WRITE=(); [ "${WRITE_RESULTS:-}" = 1 ] && WRITE=(--write-results)
# $1: the section's key, $2: the command that wrote the report, $3: the report, then results_page.py's options
stamp() { [ "${WRITE_RESULTS:-}" != 1 ] || [ ! -f "$3" ] || $PY benchmarks/results_page.py "$@" || status=1; }
for part in "${parts[@]}"; do
  case $part in
    prebuild)
      for k in $($PY -c 'from jitload import kernels; print(" ".join(kernels.discover()))'); do
        $PY -m jitload build "$k" > "$OUT/build-$k.txt" 2>&1 &
      done
      wait; cat "$OUT"/build-*.txt; rm -f "$OUT"/build-*.txt ;;
    tests)   $PY -m pytest -q -rs 2>&1 | tee "$OUT/tests.txt" || status=1 ;;
    kerneltests)
      $PY -m pytest -q -rs tests/test_kernels.py tests/test_streams.py tests/test_kernel_install.py \
        tests/test_checker.py tests/test_benchmark.py 2>&1 | tee "$OUT/kerneltests.txt" || status=1 ;;
    kernels) $PY -m jitload bench --all --compiled --dtype float32 bfloat16 --report "$OUT/report" 2>&1 \
               | tee "$OUT/kernels.txt" || status=1 ;;
    bench-*) $PY -m jitload bench "${part#bench-}" --compiled --dtype float32 bfloat16 --report "$OUT/report-${part#bench-}" 2>&1 \
               | tee "$OUT/kernels-${part#bench-}.txt" || status=1
             stamp "$part" "python -m jitload bench ${part#bench-} --compiled --dtype float32 bfloat16" \
               "$OUT/report-${part#bench-}/report.md" --title "${part#bench-} (\`jitload bench ${part#bench-}\`)" ;;
    variants)
      if [ -z "${VARIANTS_ARGS:-}" ]; then
        echo "variants: set VARIANTS_ARGS, e.g. 'bias_gelu -D BIAS_GELU_BLOCK=128,256'" >&2; status=2
      else
        # shellcheck disable=SC2086  # VARIANTS_ARGS is a list of arguments
        $PY benchmarks/variants.py $VARIANTS_ARGS --out "$OUT/variants.md" "${WRITE[@]}" 2>&1 | tee "$OUT/variants.txt" || status=1
      fi ;;
    backward) $PY benchmarks/backward.py --out "$OUT/backward" "${WRITE[@]}" 2>&1 | tee "$OUT/backward.txt" || status=1 ;;
    resources)
      # cuobjdump: the toolkit's, else the copy Triton ships (CPU-only boxes may have no full toolkit)
      CUOBJDUMP=$(command -v cuobjdump || ls "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump" 2>/dev/null || \
        $PY -c 'import os, triton; print(os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump"))')
      for o in $(find "${TORCH_EXTENSIONS_DIR:-$HOME/.cache/torch_extensions}" -name '*_kernel.cuda.o'); do
        echo "== $(basename "$o")"; "$CUOBJDUMP" --dump-resource-usage "$o" | grep -E 'Function|REG' \
          | sed -E 's/^ +//' | paste - - | sed -E 's/Resource usage://'
      done 2>&1 | tee "$OUT/resources.txt" ;;
    notebooks)
      for nb in ${NOTEBOOKS:-notebooks/*.ipynb}; do
        $PY benchmarks/run_notebooks.py "$nb" --write --log "$OUT/notebooks.log" || status=1
        if [ -n "${NOTEBOOKS_TAR:-}" ]; then tar czf "$NOTEBOOKS_TAR" notebooks/*.ipynb; fi
      done
      $PY benchmarks/run_notebooks.py --readme || status=1 ;;  # notebooks/README.md's table, from the metadata
    reload)  $PY benchmarks/reload.py --out "$OUT/reload.md" || status=1 ;;
    *) echo "unknown part: $part" >&2; status=2 ;;
  esac
done
exit $status
