#!/bin/bash
# Run 23 on the lent H200 (one device call): add_relu against torch.compile timed in turn (ab_gelu.py --kernel),
# its jitload bench beside it, and one bias_gelu process as a check that the --kernel rewrite changed nothing.
. benchmarks/probe/device_env.sh run23-add-relu
git log -1 --format='%H %s' > $R/commit.txt 2>/dev/null
python -m jitload build bias_gelu > $R/build-bias_gelu.txt 2>&1 &
step build 150 python -m jitload build add_relu
wait
AB="python benchmarks/probe/ab_gelu.py --kernel add_relu --out $R/ab"
for i in 1 2; do step ab-f32-28-$i 90 $AB --size 268435456 --rounds 12 --cycles 80 --seed $i; done
step ab-f32-26 60 $AB --size 67108864 --rounds 8 --cycles 200
step ab-bf16-28 60 $AB --dtype bfloat16 --size 268435456 --rounds 8 --cycles 80
step ab-bf16-26 60 $AB --dtype bfloat16 --size 67108864 --rounds 8 --cycles 300
step ab-bias_gelu-f32-26 60 python benchmarks/probe/ab_gelu.py --size 67108864 --rounds 4 --cycles 200 --out $R/ab
step bench 150 python -m jitload bench add_relu --compiled --dtype float32 bfloat16 --sizes 67108864 268435456 --report $R/report
cat $R/steps.txt
