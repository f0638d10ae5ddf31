# As run at pipeline t~1215 s: ds3 was stopped while it still validated (its evals would have come too
# late), leaving that validate call running; ds4 started the two credit evaluations at once (both arms at
# step 40) and scored the checkpoint validation chose once validation was done.
R=/tmp/i15; DS="bash benchmarks/deepsearch/h200.sh"; cd /tmp/repo
GPU_UTIL=0.1 $DS credit-eval $R/ds turn > $R/ds4-eval-turn.out 2>&1 &
sleep 8; CHECKPOINT=$(ls -d /tmp/ds/v*/checkpoint-40) GPU_UTIL=0.1 $DS credit-eval $R/ds trajectory > $R/ds4-eval-traj.out 2>&1 &
while pgrep -f "h200.sh validate" >/dev/null; do sleep 5; done
GPU_UTIL=0.1 EVAL_BUDGET=100000 $DS validate $R/ds >> $R/ds4-validate.out 2>&1
case "$(cat /tmp/ds-best.txt)" in *checkpoint-40) echo "best is 40: eval-credit-trajectory is its eval" > $R/ds4-eval-trained.out ;; *) GPU_UTIL=0.1 $DS eval-trained $R/ds > $R/ds4-eval-trained.out 2>&1 ;; esac
wait; echo done > $R/ds4.done
