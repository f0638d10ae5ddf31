#!/usr/bin/env bash
# The customer-service GPU run (benchmarks/customer_service/h200.sh's phases) as one background pipeline within
# a DEADLINE, sized for ~19 minutes of one H100 (80 GB), as benchmarks/booking/pipeline.sh does for the booking
# world: the SFT run and the base model's evaluation share the GPU, then the SFT model's evaluation and two GRPO
# seeds side by side, then each seed's checkpoint choice on val and its evaluation on test and ood. One customer
# model (`swift deploy` of the 0.5B, 12 % of the GPU) serves every phase that needs it, both trainers included:
# started once after prepare, waited for before the trainers start, ended with its vLLM processes at the end.
# If it dies it is started once more (phases.tsv: `user retry`); a phase that needs it waits for it up to
# USER_WAIT s (120) and otherwise fails with a clear message, then is retried once like any phase.
#
# On the GPU machine, from the repository root, after the kit of benchmarks/README.md is installed:
#   cp -a . /tmp/repo && cd /tmp/repo && setsid nohup bash benchmarks/customer_service/pipeline.sh /tmp/cs-run \
#     > /tmp/cs-pipeline.log 2>&1 < /dev/null &
#   bash benchmarks/customer_service/pipeline.sh --status /tmp/cs-run     # phases, GPU memory, last log lines
#
#   prepare -> customer server for the whole run (user-wait before the trainers) --------------------\
#          \-> sft (demonstrations on the CPU first) -> eval-sft, 90 s later eval-sft-user ---------------->  summary
#          \-> 30 s later: eval-base -> sft 43 (a second SFT draw) -> eval-sft 43 || eval-sft-user 43 -------/
#                sft -> train seed 42 -> select 42 -> eval-trained 42 || eval-trained-user 42 --------------/
#                   \-> train seed 43 -> select 43 -> eval-trained 43 || eval-trained-user 43 -------------/
#
# The `-user` phases score the set with the model customer too, and select then chooses with both customers
# (EVAL_MODEL_USER=0: the scripted one only). SFT_DRAWS ("43"; "" none): seeds of more SFT models trained on the
# same demonstrations after eval-base and scored after eval-sft (each customer's after that customer's), so that
# the target is read against the strongest of several SFT draws, not one; GRPO starts from the first (sft).
# Knobs: DEADLINE (s, 1140), SEEDS ("42 43"; "": the baselines alone, no GRPO), STEPS (40 GRPO steps of
# each seed, saved every SAVE_STEPS, 10: select scores each on val with both customers; training stops early, at
# the deadline less SCORE_RESERVE, 420 s, what select and eval-trained take, the first seed STAGGER s sooner so
# that their engines start apart), STAGGER (30 s between
# vLLM start-ups: each measures the GPU's free memory as it starts), USER_PORT (8012), CS (the phase script;
# tests give a stub). Each phase's output goes to R/<phase>.out (the customer's to R/user.out), its start, end,
# exit status and seconds to R/phases.tsv; R/gpu.csv samples GPU memory every 10 s. A failed phase is retried
# once while more than 4 minutes are left. The last phase, summary, writes R/summary.md and R/curves.png
# (benchmarks/customer_service/summarize.py: per split and task type, each model, the target).
set -uo pipefail
if [ "${1:-}" = --status ]; then
  r=${2:?results dir}
  cat "$r/phases.tsv" 2>/dev/null; tail -n 2 "$r/gpu.csv" 2>/dev/null
  pid=$(cat "$r/user.pid" 2>/dev/null) && { kill -0 "$pid" 2>/dev/null && echo "customer up (pid $pid)" || echo "customer down"; }
  for f in "$r"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -n 3 "$f"; }; done
  exit 0
fi
R=${1:?results dir}
T0=$(date +%s) DEADLINE=${DEADLINE:-1140} SEEDS=${SEEDS-42 43} STEPS=${STEPS:-40} STAGGER=${STAGGER:-30}
SFT_DRAWS=${SFT_DRAWS-43}
SCORE_RESERVE=${SCORE_RESERVE:-420} RETRY_PAUSE=${RETRY_PAUSE:-20} POLL=${POLL:-5} SAVE_STEPS=${SAVE_STEPS:-10}
CS=${CS:-"bash benchmarks/customer_service/h200.sh"}
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # less fragmentation, so the shares stay small
export USER_SHARED=1 USER_PIDFILE=$R/user.pid USER_PORT=${USER_PORT:-8012}  # h200.sh: use this one customer
mkdir -p "$R"
rm -f "$R/user.stop"
source benchmarks/gpu_pipeline/phases.sh  # elapsed, left, phase; R/gpu.csv (its sampler in $monitor)

serve_user() {  # the customer for the whole run, in its own process group; started once more if it dies early
  local try rc=""
  for try in start retry; do
    [ -f "$R/user.stop" ] && break
    printf 'user\t%s\t%s\n' "$try" "$(elapsed)" >> "$R/phases.tsv"
    setsid $CS user "$R" >> "$R/user.out" 2>&1 < /dev/null & echo $! > "$USER_PIDFILE"
    wait $!; rc=$?
    [ -f "$R/user.stop" ] || [ "$(left)" -le 240 ] && break
    sleep "$RETRY_PAUSE"
  done
  printf 'user\tend\t%s\trc=%s\n' "$(elapsed)" "$rc" >> "$R/phases.tsv"
}
stop_user() {  # end the customer (its whole process group: vLLM's engine processes too) and its supervisor
  [ -n "${server:-}" ] || return 0
  touch "$R/user.stop"
  local pid i; pid=$(cat "$USER_PIDFILE")
  kill -- -"$pid" 2>/dev/null
  for i in $(seq 30); do kill -0 -- -"$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 -- -"$pid" 2>/dev/null
  wait "$server"; server=""
}
after() {  # PHASE: until phases.tsv records PHASE's end
  until grep -q "^$1	end" "$R/phases.tsv"; do sleep "$POLL"; done
}
passed() {  # PHASE: after PHASE's end; true if it ended with rc=0
  after "$1"; grep -q "^$1	end	[0-9]*	rc=0" "$R/phases.tsv"
}
seed_arm() {  # SEED PORT EARLIER: GRPO from the SFT model, the checkpoint chosen on val, scored on test and ood
  local seed=$1
  # Two trainers side by side: SLEEP_LEVEL=0 and fixed_kv_flags (benchmarks/gpu_pipeline/phases.sh says why).
  # TRAIN_UNTIL is an end time, so that a retried train phase keeps it.
  MASTER_PORT=$2 SLEEP_LEVEL=0 TRAIN_FLAGS="$(fixed_kv_flags)" VLLM_UTIL=0.12 MICRO_BATCH=${MICRO_BATCH:-2} GRAD_ACC=$(( 32 / ${MICRO_BATCH:-2} )) STEPS=$STEPS SAVE_STEPS=$SAVE_STEPS TRAIN_UNTIL=$(( T0 + DEADLINE - SCORE_RESERVE - $3 )) \
    phase "train-s$seed" $CS train "$R" "$seed"
  after eval-sft  # select's step 0 is the SFT model's val rows, with each customer select scores; without the
  # model customer's (eval-sft-user failed twice) it chooses with the scripted one rather than not at all
  local users=scripted
  if [ "${EVAL_MODEL_USER:-1}" = 1 ]; then
    passed eval-sft-user && users="scripted model"
  fi
  GPU_UTIL=0.15 SELECT_USERS=$users phase "select-s$seed" $CS select "$R" "$seed"
  GPU_UTIL=0.15 EVAL_USERS=scripted phase "eval-trained-s$seed" $CS eval-trained "$R" "$seed" & local scored=$!
  if [ "${EVAL_MODEL_USER:-1}" = 1 ]; then
    sleep "$STAGGER"; GPU_UTIL=0.15 EVAL_USERS=model phase "eval-trained-user-s$seed" $CS eval-trained "$R" "$seed"
  fi
  wait "$scored"
}

sft_draws() {  # SFT_DRAWS: more SFT models from the same demonstrations (the baseline's spread; never a warm
  # start), one after another once eval-base has left the GPU; the trainers do not wait for them
  local draw
  for draw in $SFT_DRAWS; do
    after eval-base; MASTER_PORT=$(( 29522 + draw % 8 )) phase "sft-$draw" $CS sft "$R" "$draw"
  done
}
score_draws() {  # each SFT draw that trained, scored after the first SFT model's evaluation with the same customer
  # (one at a time, so that no more engines share the GPU than before)
  local draw
  for draw in $SFT_DRAWS; do
    passed "sft-$draw" || continue
    after eval-sft; GPU_UTIL=0.15 EVAL_USERS=scripted phase "eval-sft-$draw" $CS eval-sft "$R" "$draw"
    if [ "${EVAL_MODEL_USER:-1}" = 1 ]; then
      after eval-sft-user; GPU_UTIL=0.15 EVAL_USERS=model phase "eval-sft-$draw-user" $CS eval-sft "$R" "$draw"
    fi
  done
}

phase prepare $CS prepare "$R" || exit 1
serve_user & server=$!
trap stop_user EXIT; trap 'exit 143' TERM INT
MASTER_PORT=29521 phase sft $CS sft "$R" & sft=$!  # demos on the CPU first (~40 s): the customer starts alone
sleep "$STAGGER"
GPU_UTIL=0.25 EVAL_USERS=scripted phase eval-base $CS eval-base "$R" & others=($!)
sft_draws & others+=($!)
if wait "$sft"; then
  GPU_UTIL=0.15 EVAL_USERS=scripted phase eval-sft $CS eval-sft "$R" & others+=($!)
  if USER_WAIT=180 phase user-wait $CS user-wait "$R"; then
    seeds=($SEEDS) port=29531 arms=()
    for k in "${!seeds[@]}"; do
      sleep "$STAGGER"; seed_arm "${seeds[$k]}" "$port" $(( (${#seeds[@]} - 1 - k) * STAGGER )) & arms+=($!)
      port=$((port + 1))
    done
    if [ "${EVAL_MODEL_USER:-1}" = 1 ]; then
      sleep "$STAGGER"; GPU_UTIL=0.15 EVAL_USERS=model phase eval-sft-user $CS eval-sft "$R" & others+=($!)
    fi
    score_draws & others+=($!)
    [ "${#arms[@]}" -eq 0 ] || wait "${arms[@]}"  # a bare wait would wait for the customer too
  fi
fi
wait "${others[@]}"
stop_user
phase summary python3 benchmarks/customer_service/summarize.py "$R"
kill "$monitor" 2>/dev/null
printf 'pipeline\tend\t%s\n' "$(elapsed)" >> "$R/phases.tsv"
