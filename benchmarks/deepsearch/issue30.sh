#!/usr/bin/env bash
# Issue 30's DeepSearch run on one H200 or H100, in the background within DEADLINE, from h200.sh's phases:
# the strongest SFT-only agent from 1,000 train questions (every demonstration, both hops in their natural
# share), then GRPO from it with the needless-call reward and turn credit (env_needless.yaml) on a pool
# half reworded (reword.py: wordings the robustness check never uses), two seeds side by side (the second
# started once the first's vLLM is up), each seed's checkpoint chosen on val by its worst phrasing shift
# among its checkpoints and the SFT model itself, every model scored on test, holdout and OOD and on
# every shift of test, the trained ones against the SFT model's files (the alarms of eval --reference).
#
# On the GPU machine, from the repository root, after the kit of benchmarks/README.md is installed:
#   rm -rf /tmp/repo && cp -a . /tmp/repo && cd /tmp/repo && \
#     (DEADLINE=1320 setsid nohup bash benchmarks/deepsearch/issue30.sh /tmp/i30 > /tmp/i30.log 2>&1 < /dev/null &)
#   bash benchmarks/gpu_pipeline/pipeline.sh --status /tmp/i30        # phases, GPU memory, last log lines
#
#   prepare (+ reword the pool) -> sft -> eval-sft + shifts-sft (test, val) beside select
#     -> train s1, then train s2 once s1's engine is up (validate-shifts beside each)
#     -> choose on val (worst shift, the SFT model among the candidates) -> eval-chosen
#
# Expected device time per phase (pipeline seconds, from benchmarks/gpu_pipeline/RESULTS.md: 2026-12-01b for
# the 1,000-question SFT and its select, 2026-12-03 for two trainers side by side):
#   prepare + reword          0 -   25   (16-18 s measured; reword.py < 2 s)
#   sft                      25 -  225   (196 s, 976 episodes)
#   eval-sft (900 q)        225 -  335   beside select (102-165 s)
#   shifts-sft (test, val)  265 -  425   two engines: 7 x 300 and 7 x 200 episodes
#   select (1,000 x 4)      245 -  450   (202 s) on the reworded pool
#   train s1, s2            450 -  990   to DEADLINE - SCORE_RESERVE: ~60 steps at 7.5-8.4 s a step eager (two
#                                        trainers), more with train.sh's CUDA graphs; saves every SAVE_STEPS (20);
#                                        s2 starts once s1 has logged its first step
#   validate-shifts beside  every VALIDATE_EVERY s while training: each new checkpoint, 7 x 200 episodes
#   choose (CHOOSE=1)       990 - 1090   one engine a seed; only the checkpoints not scored yet run
#   eval-chosen            1090 - 1290   two engines a seed (900 q; 7 x 300 test)
# Knobs: DEADLINE (1320), SEEDS ("1 2": a run ds-s<seed> each), STEPS (100; the deadline stops them first),
# LR (3e-5), BETA (empty: h200.sh's 0.04), SFT_ROWS (1000), POOL_SHARE (0.5: share of the pool reworded),
# STRATIFY (hops,family), PER_STRATUM (60), SAVE_STEPS (20), SHIFTS (all), SHIFT_MARGIN (eval's 0.05),
# SCORE_RESERVE (330 s: kept after training for choose and eval-chosen), VALIDATE_EVERY (30 s).
# Results in R (h200.sh's OUT is R/ds): eval-sft.json, eval-sft-shifts.json (+ one file a shift),
# val-sft-shifts.json, chosen-ds-s<seed>.json, eval-chosen-ds-s<seed>.json, eval-chosen-ds-s<seed>-shifts.json,
# the episodes of each (trajectories-*.jsonl.gz), logs; R/phases.tsv and R/gpu.csv as pipeline.sh writes them.
# The report, on the CPU machine (benchmarks/deepsearch/RESULTS.md, "Issue 30"):
#   python -m swift_rlfactory.eval.compare sft=ds/eval-sft.json s1=ds/eval-chosen-ds-s1.json s2=ds/eval-chosen-ds-s2.json \
#     --shifts sft=ds/eval-sft-shifts.json s1=ds/eval-chosen-ds-s1-shifts.json s2=ds/eval-chosen-ds-s2-shifts.json --out ds
set -uo pipefail
R=${1:?results dir}
T0=$(date +%s) DEADLINE=${DEADLINE:-1320} SEEDS=${SEEDS:-1 2} STEPS=${STEPS:-100} LR=${LR:-3e-5} BETA=${BETA:-}
SFT_ROWS=${SFT_ROWS:-1000} POOL_SHARE=${POOL_SHARE:-0.5} STRATIFY=${STRATIFY:-hops,family} PER_STRATUM=${PER_STRATUM:-60}
SAVE_STEPS=${SAVE_STEPS:-20} SCORE_RESERVE=${SCORE_RESERVE:-330} VALIDATE_EVERY=${VALIDATE_EVERY:-30} STAGGER=${STAGGER:-40}
RETRY_PAUSE=${RETRY_PAUSE:-20} POLL=${POLL:-5}  # seconds; tests run it with stub phases and 0
DS=${DS:-"bash benchmarks/deepsearch/h200.sh"}
export SHIFTS=${SHIFTS:-all} PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
[ -z "${SHIFT_MARGIN:-}" ] || export SHIFT_MARGIN
mkdir -p "$R/ds"
source benchmarks/gpu_pipeline/phases.sh  # elapsed, left, phase, beside, train_timeout; R/gpu.csv
trap 'kill "$monitor" 2>/dev/null' EXIT  # a run stopped early leaves no sampler behind

arm() {  # SEED PORT: GRPO run ds-s<SEED> with validation beside it, then its choice on val and its scores
  local -x RUN_NAME=ds-s$1 SEED=$1 GPU_UTIL=0.08; local trainer
  # Two trainers side by side: SLEEP_LEVEL=0 and fixed_kv_flags (benchmarks/gpu_pipeline/phases.sh says why;
  # seed 1 died at its engine's start here on 2026-12-06 without them).
  ( [ -z "$BETA" ] || export BETA
    TRAIN_FLAGS="$(fixed_kv_flags)" \
    ENV_FILE=examples/deepsearch/env_needless.yaml LR=$LR STEPS=$STEPS SAVE_STEPS=$SAVE_STEPS MASTER_PORT=$2 SLEEP_LEVEL=0 \
      VLLM_UTIL=0.08 MICRO_BATCH=4 GRAD_ACC=8 TRAIN_TIMEOUT="$(train_timeout "$SCORE_RESERVE")" \
      phase "train-s$1" $DS train "$R/ds" ) & trainer=$!
  validate() { [ "$(left)" -gt "$SCORE_RESERVE" ] || return 0; $DS validate-shifts "$R/ds"; }
  beside "$trainer" "$VALIDATE_EVERY" validate >> "$R/validate-s$1.out" 2>&1
  wait "$trainer"
  CHOOSE=1 phase "choose-s$1" $DS validate-shifts "$R/ds"
  GPU_UTIL=0.1 phase "eval-chosen-s$1" $DS eval-chosen "$R/ds"
}

POOL=${POOL:-/tmp/pool-reworded.jsonl}  # the reworded pool, which prepare copies for select
python3 examples/deepsearch/reword.py examples/deepsearch/data/pool.jsonl "$POOL" --share "$POOL_SHARE" --seed 0 \
  > "$R/reword.out" 2>&1 || exit 1
POOL_FILE=$POOL SFT_ROWS=$SFT_ROWS phase prepare $DS prepare "$R/ds" || exit 1
MASTER_PORT=29514 MICRO_BATCH=8 GRAD_ACC=2 phase sft $DS sft "$R/ds" || exit 1
GPU_UTIL=0.1 phase eval-sft $DS eval-sft "$R/ds" & evals=($!)
sleep "$(( STAGGER / 2 ))"  # vLLM start-ups one after another: each measures the GPU's free memory while it starts
STRATIFY=$STRATIFY PER_STRATUM=$PER_STRATUM GPU_UTIL=0.1 phase select $DS select "$R/ds" & selector=$!
sleep "$(( STAGGER / 2 ))"
phase shifts-sft $DS shifts-sft "$R/ds" & evals+=($!)
wait "$selector" || exit 1
# No vLLM may start while another starts or exits (it measures the GPU's free memory while it profiles):
# the trainers start after the SFT model's eval engines have exited, and each seed's trainer after the one
# before it has logged its first step (its engine is up) or ended. 2026-12-06 started seed 2 40 s after
# seed 1 and seed 1 failed at start-up twice (benchmarks/deepsearch/RESULTS.md, "Issue 30").
wait "${evals[@]}"
started() {  # SEED: its trainer logged a step (h200.sh copies logging.jsonl every 15 s) or its phase ended
  compgen -G "$R/ds/logging-ds-s$1-*.jsonl" > /dev/null || grep -q "^train-s$1"$'\t'end "$R/phases.tsv"
}
arms=() port=29521 previous=
for seed in $SEEDS; do
  [ -z "$previous" ] || until started "$previous"; do sleep "$POLL"; done
  arm "$seed" "$port" & arms+=($!)
  port=$(( port + 1 )) previous=$seed
done
wait "${arms[@]}"
printf 'pipeline\tend\t%s\n' "$(elapsed)" >> "$R/phases.tsv"
