#!/usr/bin/env bash
# The DeepSearch and RL-from-base GPU runs in one background pipeline on one H200: the DeepSearch recipe (SFT, stratified
# select, GRPO with validation, the trajectory- vs turn-credit arms) and GRPO from the base model on
# arithmetic, side by side on the one GPU. A 0.5B model leaves most of an H200 idle, and a session has 30
# minutes of device time, so the two tracks and the phases that do not depend on each other share the GPU
# (each vLLM takes a small, fixed share of its memory; training takes small micro-batches, with the same
# completions per step as the one-at-a-time recipes) instead of running one after the other. Memory seen
# on 2026-12-01: 99 GB at most with three trainers and one evaluation at once; the next run has four
# trainers, so each trainer's vLLM takes 0.08 of the GPU (an evaluation's 0.08-0.1) and the arithmetic
# micro-batch is 4 (it reported 37 GiB at 8). Every training process gets its own MASTER_PORT: ms-swift's
# colocated trainer binds torch.distributed's store there, and two on the default 29500 kill the second at
# start-up (seen on 2026-12-01).
#
# On the GPU machine, from the repository root, after the kit of benchmarks/README.md ("The kit in 10 calls") is installed:
#   cp -a . /tmp/repo && cd /tmp/repo && setsid nohup bash benchmarks/gpu_pipeline/pipeline.sh /tmp/pipeline \
#     > /tmp/pipeline.log 2>&1 < /dev/null &
#   bash benchmarks/gpu_pipeline/pipeline.sh --status /tmp/pipeline       # phases, GPU memory, last log lines
# (setsid: a device command's processes end with it, a new session's do not; the copy in /tmp keeps the
# runs away from the working tree, which the next command re-syncs.)
#
#   deepsearch: prepare -> sft -> select -----> train (trajectory credit) + validate beside it -> eval-trained
#                             \-> eval-sft  |--> train RUN_NAME=ds-lr (LR=DS_LR2) + validate ----> eval-trained
#                                           \--> credit-train turn ----------------------------------> credit-eval turn
#                                                 credit-eval trajectory: train's checkpoint at the turn arm's last step
#   arithmetic: eval-base -> train (200 steps) + eval-checkpoints beside it -> the rest of the checkpoints
#
# DEADLINE (s, default 1440) bounds the whole pipeline: the GRPO runs stop early (TRAIN_TIMEOUT) so that the
# evaluations after them still fit. TRACKS ("deepsearch arithmetic"): which tracks run. DS_STEPS (80): GRPO
# steps of each DeepSearch arm; DS_LR (empty: train.sh's 2e-5): the ds arm's learning rate; DS_LR2 (5e-5,
# empty: no such arm): the learning rate of a second arm, ds-lr; DS_CREDIT (turn; empty: no such arm): the
# credit-comparison arm. Fewer arms and tracks leave more of the GPU and of the deadline to the rest, e.g.
# TRACKS=deepsearch DS_CREDIT= DS_STEPS=160 DS_LR=5e-5 DS_LR2=1e-4 for two longer DeepSearch runs.
# DS_RECHECK (0): sft.sh's RECHECK, the share of two-hop demonstrations that search a wrong name first.
# DS_DYNAMIC and AR_DYNAMIC (0): 1 gives that track's GRPO runs train.sh's DYNAMIC_SAMPLE (groups whose
# samples all scored alike are regenerated: on 2026-12-01b they were half of DeepSearch's groups from step
# 40 on and three quarters of arithmetic's). AR_STRIDE (50): the arithmetic checkpoints scored.
# AR_ENV (examples/arithmetic/env_hint.yaml): the arithmetic track's environment (the rl_from_base h200.sh's
# ENV_FILE); AR_ENV2 (empty: none): a second arithmetic arm beside it in another environment, the same data,
# steps and seed, its results in R/ar-<its file's name> (e.g. env_python.yaml's programs against the
# calculator in one run). AR_MAX_TOKENS (192) and AR_MAX_TOKENS2 (AR_MAX_TOKENS): h200.sh's MAX_TOKENS,
# what one turn may write, in training and evaluation, of each arm (a program takes more than an expression).
# AR_PROBE (empty: none): environments, comma-separated, to probe the base model in before the arithmetic
# arms start (h200.sh probe: greedy, the first 200 training problems, side by side, in R/probe-<name>); the
# arms then train in the best of them (pick_env.py: those whose base model calls the tool, by EM). With
# AR_PROBE_ARMS=1 (default) the best replaces AR_ENV2, beside AR_ENV; with AR_PROBE_ARMS=2 the two best
# replace AR_ENV and AR_ENV2, each arm in R/ar-<its file's name>. Each probe, and each arm in a probed
# environment, writes AR_MAX_TOKENS2 a turn.
# DS_SFT_ROWS (1000): h200.sh's SFT_ROWS, the train questions the SFT demonstrations come from (200 on
# 2026-12-01d: that SFT model never searched twice, nor did GRPO teach it to). DS_SFT_SINGLE (empty: all):
# sft.sh's SINGLE_HOP, of those questions demonstrate only the first N single-hop ones and every two-hop one,
# so the warm start teaches the two-search protocol in full and leaves single-hop queries to GRPO.
# DS_STRATIFY (hops,family) and DS_PER_STRATUM (60): h200.sh select's STRATIFY and PER_STRATUM, the columns
# GRPO's questions are balanced over and how many each cell keeps. On 2026-12-01e the six (hops, family)
# cells made two thirds of the questions single-hop, where a second search costs reward, and GRPO dropped
# the second search everywhere; DS_STRATIFY=hops DS_PER_STRATUM=180 keeps as many two-hop questions as
# single-hop ones (fewer if the pool has fewer mixed ones).
# DS_BETA (empty: h200.sh's 0.04): the KL coefficient to the SFT policy of every DeepSearch GRPO arm, and of
# none of arithmetic's (its train.sh reads the same BETA). On 2026-12-01e, at 0.04, the arm dropped the
# second search within 6 steps, on two-hop questions too.
# DS_ARM_CREDIT (empty: trajectory): the credit mode of the validated arms ds and ds-lr (h200.sh train's
# CREDIT). On 2026-12-02b turn credit kept two searches on two-hop questions where trajectory credit lost
# them, but as the credit-comparison arm it was scored at its last checkpoint only; DS_ARM_CREDIT=turn makes
# it validated. It needs DS_CREDIT= : the comparison arm measures turn credit against a trajectory-credit ds.
# SCORE_RESERVE (330 s): when the ds arm's training stops before DEADLINE, and when validation beside
# training (every VALIDATE_EVERY, 30 s) stops starting checkpoints, so the evaluation on test is never cut.
# Each phase's output goes to R/<phase>.out and its start, end, exit status and seconds to R/phases.tsv;
# R/gpu.csv samples GPU memory every 10 s; the h200.sh scripts write their logs, eval-*.json and
# trajectories-*.jsonl.gz into R/ds and R/ar. A failed phase is retried once while time allows (the
# training phases resume from their last checkpoint).
set -uo pipefail
if [ "${1:-}" = --status ]; then
  r=${2:?results dir}
  cat "$r/phases.tsv" 2>/dev/null; tail -n 2 "$r/gpu.csv" 2>/dev/null  # (the GPU image has no `column`)
  for f in "$r"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -n 3 "$f"; }; done
  exit 0
fi
R=${1:?results dir}
T0=$(date +%s) DEADLINE=${DEADLINE:-1440} TRACKS=${TRACKS:-deepsearch arithmetic} DS_STEPS=${DS_STEPS:-80}
DS_LR=${DS_LR:-} DS_LR2=${DS_LR2-5e-5} DS_CREDIT=${DS_CREDIT-turn} DS_RECHECK=${DS_RECHECK:-0} STAGGER=${STAGGER:-40}
DS_DYNAMIC=${DS_DYNAMIC:-0} AR_DYNAMIC=${AR_DYNAMIC:-0} AR_STRIDE=${AR_STRIDE:-50} DS_SFT_ROWS=${DS_SFT_ROWS:-1000}
AR_ENV=${AR_ENV:-examples/arithmetic/env_hint.yaml} AR_ENV2=${AR_ENV2:-} AR_MAX_TOKENS=${AR_MAX_TOKENS:-192}
AR_MAX_TOKENS2=${AR_MAX_TOKENS2:-$AR_MAX_TOKENS} AR_PROBE=${AR_PROBE:-} AR_PROBE_ARMS=${AR_PROBE_ARMS:-1}
DS_SFT_SINGLE=${DS_SFT_SINGLE:-} DS_BETA=${DS_BETA:-} DS_ARM_CREDIT=${DS_ARM_CREDIT:-} DS_STRATIFY=${DS_STRATIFY:-hops,family} DS_PER_STRATUM=${DS_PER_STRATUM:-60}
if [ -n "$DS_ARM_CREDIT" ] && [ -n "$DS_CREDIT" ]; then
  echo "DS_ARM_CREDIT=$DS_ARM_CREDIT needs DS_CREDIT= (the credit-comparison arm compares against a trajectory-credit ds arm)" >&2
  exit 2
fi
mkdir -p "$R/ds" "$R/ar"
RUNS=${RUNS:-/tmp}  # where the h200.sh scripts keep their runs
RETRY_PAUSE=${RETRY_PAUSE:-20} POLL=${POLL:-5}  # seconds; tests run the pipeline with stub phases and 0
DS=${DS:-"bash benchmarks/deepsearch/h200.sh"} AR=${AR:-"bash benchmarks/rl_from_base/h200.sh"}
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # less fragmentation, so the shares stay small
source "$(dirname "${BASH_SOURCE[0]}")/phases.sh"  # elapsed, left, phase, beside, train_timeout; R/gpu.csv

# Validation beside training stops starting checkpoints once fewer than SCORE_RESERVE seconds are left: the
# time the ds arm's training leaves for what follows it (validate_and_score: the last checkpoints, then the
# evaluation on test, holdout and OOD). On 2026-12-01d it had no limit, went on with both arms' last
# checkpoints for 300 s after training, and eval-trained started 26 s before DEADLINE: no test numbers.
SCORE_RESERVE=${SCORE_RESERVE:-330} VALIDATE_EVERY=${VALIDATE_EVERY:-30}
validate_arms() {  # every trajectory-credit GRPO run on the validation split (h200.sh validate)
  local -x EVAL_BUDGET=$(( $(left) - SCORE_RESERVE ))  # h200.sh validate starts no checkpoint past it
  [ "$EVAL_BUDGET" -gt 0 ] || return 0
  $DS validate "$R/ds"
  EVAL_BUDGET=$(( $(left) - SCORE_RESERVE ))
  [ -z "$DS_LR2" ] || [ "$EVAL_BUDGET" -le 0 ] || RUN_NAME=ds-lr $DS validate "$R/ds"
}

# After training, each trajectory-credit arm (RUN_NAME: empty for ds, else ds-lr) scores the checkpoints
# validation has not seen yet, as many as EVAL_BUDGET allows before the deadline, and then evaluates the
# one it chose. The arms and the credit evaluations run side by side: on 2026-12-01b the validation of one
# arm after the other, with the credit evaluations queued behind it, took the pipeline 142 s past DEADLINE.
validate_and_score() {  # SUFFIX: empty for the ds arm, -lr for ds-lr
  local sfx=$1; [ -z "$sfx" ] || local -x RUN_NAME=ds$sfx
  GPU_UTIL=0.08 EVAL_BUDGET=$(( $(left) - 150 )) phase "ds-validate$sfx" $DS validate "$R/ds"
  GPU_UTIL=0.1 phase "ds-eval-trained$sfx" $DS eval-trained "$R/ds"
}
credit_evals() {  # both credit arms at the DS_CREDIT arm's last step: the same steps even when a time limit cut one short
  GPU_UTIL=0.1 phase "ds-credit-eval-$DS_CREDIT" $DS credit-eval "$R/ds" "$DS_CREDIT" &
  sleep "$(( STAGGER / 4 ))"
  local last; last=$(ls -d "$RUNS/ds-credit-$DS_CREDIT"/v*/checkpoint-* 2>/dev/null | sort -V | tail -1)
  CHECKPOINT=$(ls -d "$RUNS"/ds/v*/checkpoint-"${last##*-}" 2>/dev/null | tail -1) GPU_UTIL=0.1 \
    phase ds-credit-eval-trajectory $DS credit-eval "$R/ds" trajectory
  wait
}

deepsearch() {
  SFT_ROWS=$DS_SFT_ROWS phase ds-prepare $DS prepare "$R/ds" || return
  RECHECK=$DS_RECHECK SINGLE_HOP=$DS_SFT_SINGLE MASTER_PORT=29514 MICRO_BATCH=8 GRAD_ACC=2 phase ds-sft $DS sft "$R/ds" || return
  GPU_UTIL=0.1 phase ds-eval-sft $DS eval-sft "$R/ds" &
  sleep "$STAGGER"  # vLLM start-ups one after another: each measures the GPU's free memory while it starts
  STRATIFY=$DS_STRATIFY PER_STRATUM=$DS_PER_STRATUM GPU_UTIL=0.1 phase ds-select $DS select "$R/ds" || return
  # The arms, each 4 x 8 = 32 completions a step (train.sh's 8 x 4), STEPS and seed 42 alike: ds (env_grpo.yaml,
  # trajectory credit, train.sh's LR), credit-turn (the same with turn credit) and, unless DS_LR2 is empty,
  # ds-lr (ds at learning rate DS_LR2).
  local trainers=()
  local -x DYNAMIC_SAMPLE=$DS_DYNAMIC  # the GRPO arms' train.sh (the SFT above ran without it)
  [ -z "$DS_BETA" ] || local -x BETA=$DS_BETA
  ( [ -z "$DS_LR" ] || export LR=$DS_LR
    CREDIT=$DS_ARM_CREDIT MASTER_PORT=29511 VLLM_UTIL=0.08 MICRO_BATCH=4 GRAD_ACC=8 STEPS=$DS_STEPS TRAIN_TIMEOUT="$(train_timeout "$SCORE_RESERVE")" \
      phase ds-train $DS train "$R/ds" ) & trainers+=($!)
  if [ -n "$DS_CREDIT" ]; then
    sleep "$STAGGER"
    MASTER_PORT=29512 VLLM_UTIL=0.08 MICRO_BATCH=4 GRAD_ACC=8 STEPS=$DS_STEPS TRAIN_TIMEOUT="$(train_timeout 290)" \
      phase "ds-credit-$DS_CREDIT" $DS credit-train "$R/ds" "$DS_CREDIT" & trainers+=($!)
  fi
  if [ -n "$DS_LR2" ]; then
    sleep "$STAGGER"
    CREDIT=$DS_ARM_CREDIT MASTER_PORT=29515 RUN_NAME=ds-lr LR=$DS_LR2 VLLM_UTIL=0.08 MICRO_BATCH=4 GRAD_ACC=8 STEPS=$DS_STEPS \
      TRAIN_TIMEOUT="$(train_timeout 300)" phase ds-train-lr $DS train "$R/ds" & trainers+=($!)
  fi
  GPU_UTIL=0.08 beside "${trainers[0]}" "$VALIDATE_EVERY" validate_arms >> "$R/ds-validate.out" 2>&1
  wait "${trainers[@]}"
  # The trainers end within seconds of each other; the evaluations after them start a little apart, since
  # vLLM engines that start in the same second count each other's memory (2026-12-02b: four at once, and
  # one validation found no memory for its KV cache twice)
  [ -z "$DS_CREDIT" ] || { credit_evals & sleep "$(( STAGGER / 4 ))"; }
  validate_and_score "" &
  [ -z "$DS_LR2" ] || { sleep "$(( STAGGER / 4 ))"; validate_and_score -lr & }
  wait
}

arithmetic() {  # ENV NAME PORT TOKENS: one arm of GRPO from base in the environment ENV, results in R/NAME
  # AR_TRAIN_DATA: the training file (default the 24-family mix; data/train.jsonl is the 8-template set of
  # 2026-12-01's run, data/train_chain.jsonl the mix with a third of chains). Every arithmetic phase must
  # see the same one: it names the run and evals folders.
  local -x ENV_FILE=$1 MAX_TOKENS=$4; local name=$2 port=$3
  local -x TRAIN_DATA=${AR_TRAIN_DATA:-examples/arithmetic/data/train_mix.jsonl}
  local -x DYNAMIC_SAMPLE=$AR_DYNAMIC STRIDE=$AR_STRIDE  # the run's folders carry DYNAMIC_SAMPLE too
  # The base model's evaluation comes first, and not beside training: on 2026-12-01e the trainer started
  # beside it, during DeepSearch's SFT, and its colocated vLLM lost the start-up memory race twice ("No
  # available memory for the cache blocks", then "Error in memory profiling": the SFT's memory moved while
  # vLLM measured it). Its 155 s are about the SFT's, so running it first costs the trainer nothing.
  EVAL_UTIL=0.1 phase "$name-eval-base" $AR eval-base "$R/$name"
  MASTER_PORT=$port VLLM_UTIL=0.08 MICRO_BATCH=4 GRAD_ACC=8 TRAIN_TIMEOUT="$(train_timeout 150)" phase "$name-train" $AR train "$R/$name" & local train=$!
  EVAL_UTIL=0.08 EVAL_BUDGET=100000 beside "$train" 30 $AR eval-checkpoints "$R/$name" >> "$R/$name-evals.out" 2>&1
  EVAL_UTIL=0.1 EVAL_BUDGET=$(( $(left) - 20 )) phase "$name-eval-checkpoints" $AR eval-checkpoints "$R/$name"
  phase "$name-curve" $AR curve "$R/$name"
}
probe_envs() {  # the AR_PROBE environments, best first (pick_env.py), one a line; R/probe.out says why
  local envs env name picks=(); IFS=, read -ra envs <<< "$AR_PROBE"
  for env in "${envs[@]}"; do
    name=$(basename "$env" .yaml); picks+=("$env=$R/probe-$name/eval-probe.json")
    ENV_FILE=$env MAX_TOKENS=$AR_MAX_TOKENS2 TRAIN_DATA=${AR_TRAIN_DATA:-examples/arithmetic/data/train_mix.jsonl} \
      EVAL_UTIL=0.08 phase "probe-$name" $AR probe "$R/probe-$name" &
    sleep "$(( STAGGER / 4 ))"
  done
  wait
  python3 benchmarks/gpu_pipeline/pick_env.py "${picks[@]}" 2>> "$R/probe.out"
}
arithmetic_arms() {  # AR_ENV in R/ar and, unless AR_ENV2 is empty, AR_ENV2 beside it (vLLM start-ups apart)
  local env1=$AR_ENV env2=$AR_ENV2 name1=ar tokens1=$AR_MAX_TOKENS ranked=()
  if [ -n "$AR_PROBE" ]; then
    mapfile -t ranked < <(probe_envs)
    if [ "$AR_PROBE_ARMS" = 2 ]; then
      env1=${ranked[0]} env2=${ranked[1]:-} name1=ar-$(basename "${ranked[0]}" .yaml) tokens1=$AR_MAX_TOKENS2
    else
      env2=${ranked[0]}
    fi
    printf 'arms: %s %s\n' "$env1" "$env2" >> "$R/probe.out"
  fi
  arithmetic "$env1" "$name1" 29513 "$tokens1" & local arms=($!)
  if [ -n "$env2" ]; then
    sleep "$STAGGER"; arithmetic "$env2" "ar-$(basename "$env2" .yaml)" 29516 "$AR_MAX_TOKENS2" & arms+=($!)
  fi
  wait "${arms[@]}"
}

# The arithmetic mix and chain splits are built, not committed (build_data.py, seed 0: the same bytes), once
# here before the arms that read them start side by side.
case " $TRACKS " in *" arithmetic "*)
  for f in train_mix heldout_mix train_chain heldout_chain; do
    [ -f "examples/arithmetic/data/$f.jsonl" ] || python3 examples/arithmetic/build_data.py --ood 0 > /dev/null
  done ;;
esac
tracks=()
case " $TRACKS " in *" deepsearch "*) deepsearch & tracks+=($!) ;; esac
sleep "$(( STAGGER < 5 ? STAGGER : 5 ))"
case " $TRACKS " in *" arithmetic "*) arithmetic_arms & tracks+=($!) ;; esac
wait "${tracks[@]}"
kill "$monitor" 2>/dev/null
printf 'pipeline\tend\t%s\n' "$(elapsed)" >> "$R/phases.tsv"
