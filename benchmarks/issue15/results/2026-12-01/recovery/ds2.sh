# As run on the H200 at pipeline t~620 s, after ds-train and ds-credit-turn had died at start-up on
# MASTER_PORT 29500 (held by the arithmetic trainer). STEPS 60 instead of 80 to fit the device time left.
# (ds2's turn arm then crashed at step 1 on the CPU-tensor bug fixed in swift_credit.py; ds2 was stopped
# and ds3 took over the turn arm.)
R=/tmp/i15; DS="bash benchmarks/deepsearch/h200.sh"
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
rm -rf /tmp/ds /tmp/ds-credit-turn /tmp/val /tmp/ds-best.txt
K="VLLM_UTIL=0.1 MICRO_BATCH=4 GRAD_ACC=8 STEPS=60 SAVE_STEPS=20"
env MASTER_PORT=29511 $K TRAIN_TIMEOUT=560 $DS train $R/ds > $R/ds2-train.out 2>&1 & t=$!
sleep 30
env MASTER_PORT=29512 $K TRAIN_TIMEOUT=540 $DS credit-train $R/ds turn > $R/ds2-turn.out 2>&1 & u=$!
while kill -0 $t 2>/dev/null; do sleep 30; GPU_UTIL=0.08 EVAL_BUDGET=100000 $DS validate $R/ds >> $R/ds2-validate.out 2>&1; done
GPU_UTIL=0.08 EVAL_BUDGET=100000 $DS validate $R/ds >> $R/ds2-validate.out 2>&1
GPU_UTIL=0.1 $DS eval-trained $R/ds > $R/ds2-eval-trained.out 2>&1 &
wait $u; sleep 15
GPU_UTIL=0.1 $DS credit-eval $R/ds turn > $R/ds2-eval-turn.out 2>&1 &
best=$(cat /tmp/ds-best.txt); last=$(ls -d /tmp/ds/v*/checkpoint-* | sort -V | tail -1)
[ "$best" != "$last" ] && { sleep 15; GPU_UTIL=0.1 $DS credit-eval $R/ds trajectory > $R/ds2-eval-traj.out 2>&1; }
wait
echo done > $R/ds2.done
