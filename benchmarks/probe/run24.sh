#!/bin/bash
# Run 24 on the lent H200 (one device call): add_relu v3's differences from Inductor's kernel, one knob each,
# timed in turn beside v3 and torch.compile (ab_gelu.py --kernel add_relu --variants).
. benchmarks/probe/device_env.sh run24-add-relu-knobs
python -c 'import sys; sys.path.insert(0, "benchmarks/probe"); import variants; variants.build_add_relu()' > $R/build-knobs.txt 2>&1 &
step build 150 python -m jitload build add_relu
wait
AB="python benchmarks/probe/ab_gelu.py --kernel add_relu --variants --out $R/ab"
step ab-f32-28 90 $AB --size 268435456 --rounds 10 --cycles 60
step ab-f32-26 60 $AB --size 67108864 --rounds 8 --cycles 150
step ab-bf16-28 60 $AB --dtype bfloat16 --size 268435456 --rounds 8 --cycles 60
step ab-bf16-26 60 $AB --dtype bfloat16 --size 67108864 --rounds 8 --cycles 200
cat $R/steps.txt
