# Sourced by the runNN.sh scripts (one lent-H200 call each): the environment every H200 run here used, the
# results folder $R=$OUT/$1, and step(). $OUT only brings back 8 files, so step() tars $R after every step.
export CXX=/usr/bin/g++ CC=/usr/bin/gcc TORCH_EXTENSIONS_DIR=/tmp/jx JITLOAD_TEST_EXTENSIONS_DIR=/tmp/jx
export MAX_JOBS=16 PYTHONPATH=$PWD TORCH_CUDA_ARCH_LIST=9.0
R=$OUT/$1
mkdir -p "$R/ab"
T0=$SECONDS
step() {  # step NAME LIMIT_S CMD...: output to NAME.txt (after the date and the GPU's state), time to steps.txt
  local name=$1 lim=$2; shift 2; local s=$SECONDS
  { date -u '+%F %H:%M UTC'; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; } > "$R/$name.txt"
  timeout "$lim" "$@" >> "$R/$name.txt" 2>&1
  echo "$name rc=$? $((SECONDS - s))s (at $((SECONDS - T0))s)" >> "$R/steps.txt"
  tar czf "$R.tgz" -C "$OUT" "$(basename "$R")"
}
