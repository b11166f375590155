#!/bin/bash
# Run 25 on the lent H200 (one device call): add_relu v3 in blocks of 128 threads, one vector a thread. The
# kernel and stream cuda tests, the knobs of run 24 timed in turn beside it, and its jitload bench table.
. benchmarks/probe/device_env.sh run25-add-relu-128
python -c 'import sys; sys.path.insert(0, "benchmarks/probe"); import variants; variants.build_add_relu()' > $R/build-knobs.txt 2>&1 &
step prebuild 120 env OUT=$R/pre bash benchmarks/run_all.sh prebuild
wait
step cudatests 120 python -m pytest -q -rs -m cuda tests/test_kernels.py tests/test_streams.py
AB="python benchmarks/probe/ab_gelu.py --kernel add_relu --variants --out $R/ab"
step ab-f32-28 60 $AB --size 268435456 --rounds 10 --cycles 60
step ab-f32-26 45 $AB --size 67108864 --rounds 8 --cycles 150
step ab-bf16-28 45 $AB --dtype bfloat16 --size 268435456 --rounds 8 --cycles 60
step ab-bf16-26 45 $AB --dtype bfloat16 --size 67108864 --rounds 8 --cycles 200
step bench 60 python -m jitload bench add_relu --compiled --dtype float32 bfloat16 --sizes 67108864 268435456 --report $R/report
cat $R/steps.txt
