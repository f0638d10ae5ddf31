# As run at pipeline t~800 s with swift_credit.py fixed (advantages written on the batch's device): the
# turn arm again, 40 steps (what the device time left allowed), beside ds2's still-running trajectory arm.
R=/tmp/i15; DS="bash benchmarks/deepsearch/h200.sh"; cd /tmp/repo
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
rm -rf /tmp/ds-credit-turn
env MASTER_PORT=29513 VLLM_UTIL=0.1 MICRO_BATCH=4 GRAD_ACC=8 STEPS=40 SAVE_STEPS=20 TRAIN_TIMEOUT=470 $DS credit-train $R/ds turn > $R/ds3-turn.out 2>&1 & u=$!
while pgrep -f "output_dir /tmp/ds --dataloader" >/dev/null; do sleep 30; GPU_UTIL=0.08 EVAL_BUDGET=100000 $DS validate $R/ds >> $R/ds3-validate.out 2>&1; done
GPU_UTIL=0.08 EVAL_BUDGET=100000 $DS validate $R/ds >> $R/ds3-validate.out 2>&1
GPU_UTIL=0.1 $DS eval-trained $R/ds > $R/ds3-eval-trained.out 2>&1 &
wait $u; sleep 10
GPU_UTIL=0.1 $DS credit-eval $R/ds turn > $R/ds3-eval-turn.out 2>&1 &
sleep 15
c=$(ls -d /tmp/ds/v*/checkpoint-40 | tail -1)
CHECKPOINT=$c GPU_UTIL=0.1 $DS credit-eval $R/ds trajectory > $R/ds3-eval-traj.out 2>&1
wait
echo done > $R/ds3.done
