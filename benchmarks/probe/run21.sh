#!/bin/bash
# Run 21 on the lent H200 (one device call): build, every cuda test, then ab_gelu.py at 2^26 and 2^28.
export CXX=/usr/bin/g++ CC=/usr/bin/gcc TORCH_EXTENSIONS_DIR=/tmp/jx JITLOAD_TEST_EXTENSIONS_DIR=/tmp/jx
export MAX_JOBS=16 PYTHONPATH=$PWD TORCH_CUDA_ARCH_LIST=9.0
R=$OUT/run21-ab
mkdir -p $R/ab
T0=$SECONDS
step() {  # step NAME LIMIT_S CMD...: output to NAME.txt, time to steps.txt, results tarred after each step
  local name=$1 lim=$2; shift 2; local s=$SECONDS
  { date -u '+%F %H:%M UTC'; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; } > $R/$name.txt
  timeout $lim "$@" >> $R/$name.txt 2>&1
  echo "$name rc=$? $((SECONDS - s))s (at $((SECONDS - T0))s)" >> $R/steps.txt
  tar czf $OUT/run21.tgz -C $OUT run21-ab
}
git log -1 --format='%H %s' > $R/commit.txt
step environment 60 python -m jitload doctor
step build 150 python -m jitload build --all
# test_magics.py and test_notebooks.py need IPython and nbformat, which the lent machine lacks
step cudatests 300 python -m pytest -q -rs -m cuda tests --ignore=tests/test_magics.py --ignore=tests/test_notebooks.py
for i in 1 2 3; do step ab-f32-28-$i 100 python benchmarks/probe/ab_gelu.py --variants --size 268435456 --rounds 12 --cycles 80 --seed $i --out $R/ab; done
step ab-bf16-28 60 python benchmarks/probe/ab_gelu.py --dtype bfloat16 --size 268435456 --rounds 8 --cycles 80 --out $R/ab
step ab-f32-26 60 python benchmarks/probe/ab_gelu.py --variants --size 67108864 --rounds 8 --cycles 200 --out $R/ab
step ab-bf16-26 60 python benchmarks/probe/ab_gelu.py --dtype bfloat16 --size 67108864 --rounds 8 --cycles 300 --out $R/ab
cat $R/steps.txt
