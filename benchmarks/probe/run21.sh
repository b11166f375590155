#!/bin/bash
# Run 21 on the lent H200 (one device call): build, every cuda test, then ab_gelu.py at 2^26 and 2^28.
. benchmarks/probe/device_env.sh run21-ab
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
