#!/usr/bin/env bash
# The customer-service recipe (issue 35, item 2) on one H100/H200, phase by phase: base model, LoRA SFT on the
# oracle's demonstrations (the SFT-only baseline and the warm start), GRPO from the SFT model with the 0.5B model
# itself served as the customer, the checkpoint chosen on val, scored on test and ood. From the repository root,
# after the GPU kit of benchmarks/README.md is installed (/tmp/site, /tmp/qwen05):
#   bash benchmarks/customer_service/h200.sh PHASE OUT_DIR [SEED]   (benchmarks/customer_service/pipeline.sh runs them all)
# Phases, in order (one device command each, < 10 min; /tmp persists while the machine stays warm):
#   prepare          the eval set (test: held-out goals, ood, val, `split` naming each) -> /tmp/cs/eval.jsonl;
#                    val = train rows 1,901-2,000 (`split` val; rows no demonstration and no GRPO step sees),
#                    GRPO rows = train rows 1,001-1,900                                                seconds
#   eval-base        the base model on the eval set                                                   ~3 min
#   sft              DEMOS (1,000) oracle demonstrations (demos.py) of train rows 1-1,000, LoRA SFT,
#                    merged into /tmp/cs-sft-model                                                    ~4-5 min
#   sft DRAW         another SFT model (swift's --seed and --data_seed DRAW, e.g. 43) from the same
#                    demonstrations, merged into /tmp/cs-sft-model-DRAW: a second draw of the SFT-only baseline,
#                    never a warm start
#   eval-sft         the SFT model on the eval set (its val rows are select's step 0)                 ~3 min
#   eval-sft DRAW    that SFT draw on the eval set (eval-sft-DRAW*.json: a baseline beside sft)
#   train SEED       GRPO from the SFT model (SEED 42; 42 and 43 for the two seeds) with the 0.5B model as the
#                    customer (USER_KIND=scripted: the scripted one), STEPS (40), saves every SAVE_STEPS (5);
#                    stops at TRAIN_TIMEOUT (480 s) or at TRAIN_UNTIL (epoch s): run again to resume  ~9 min a call
#   select SEED      every saved checkpoint of the run on val (one engine a customer), beside the SFT model's
#                    val rows (step 0), with each customer of SELECT_USERS ("scripted model"; a candidate
#                    counts by its worst customer: the SFT model scored 1.00 on val with the scripted one
#                    on 2026-12-06, so that one alone could tell no checkpoint apart); a checkpoint whose
#                    share with a violation exceeds the SFT model's by more than SELECT_VIOLATION_MARGIN
#                    (0.02) is passed over; then the best val goal success wins, then the fewer
#                    conversations with a policy violation, then the earliest; "sft" when none beats it
#                    -> /tmp/cs-grpo-SEED-best.txt, OUT/validation-SEED.json                            ~2 min
#   eval-trained SEED  the chosen checkpoint (the last one without select) on the eval set           ~3 min
#   user             the customer model served by `swift deploy` in the foreground, until killed (pipeline.sh
#                    serves one for the whole run); user-wait: until it answers (USER_WAIT s, 300)
#   summary          summary.md and curves.png from OUT_DIR (summarize.py; CPU)
# Each eval scores, in one run, the test split (goals never trained on, on worlds never trained on), the ood
# split (task types never trained on) and val, per split and per task type: success (`shop.rewards:goal`), the
# share of conversations with a policy violation and violations per conversation. The scripted customer
# (users.py) answers every model alike; the model customer is the one GRPO trains with; EVAL_USERS ("scripted";
# "scripted model" or "model"; EVAL_USER=model is "scripted model") scores the set with the model customer too
# (eval-NAME-model-user.json, trajectories-NAME-model-user.jsonl.gz). The model customer of a phase is its own
# `swift deploy` (12 % of the GPU, until the phase ends), or with USER_SHARED=1 the one already serving at
# USER_PORT (8012; pipeline.sh's): waited for up to USER_WAIT s and a clear failure when it does not answer.
# Knobs: BASE_MODEL (/tmp/qwen05), MODEL_TYPE (qwen2), TEMPLATE (qwen2_5), ENGINE (vllm), RUNS (/tmp: where data,
# runs and models live), GPU_UTIL (eval's vLLM share, 0.6), VLLM_UTIL / MICRO_BATCH / GRAD_ACC / SLEEP_LEVEL /
# USE_VLLM (train.sh, examples/grpo.sh), EVAL_ROWS (prepare: rows of each split scored; a CPU check), MAX_TOKENS
# (256) and CONCURRENCY (64) of eval, USER_BACKEND (vllm; transformers for a CPU check), USER_MODEL_PATH (the
# customer's weights, BASE_MODEL), TRAIN_FLAGS and SFT_FLAGS (extra swift flags, later flags win), DEVICE_ENV
# (/tmp/device_env.sh, sourced when present). A CPU check of every phase: RESULTS.md ("CPU check").
set -euo pipefail
phase=${1:?phase}; out=${2:?out dir}; SEED=${3:-${SEED:-42}}
draw=${3:+-$3}  # sft and eval-sft with a seed: that draw of the SFT model (-SEED in its names); none: the first
DEVICE_ENV=${DEVICE_ENV:-/tmp/device_env.sh}
[ -f "$DEVICE_ENV" ] && source "$DEVICE_ENV" >/dev/null
source benchmarks/vllm_start.sh  # vllm_start LOG CMD: once more when vLLM's start-up lost a memory race
source benchmarks/served_port.sh  # port_free PORT: swift deploy would move off a port still held
export PYTHONPATH="$PWD:${PYTHONPATH:-}" RLFACTORY_CACHE=${RLFACTORY_CACHE:-/tmp/rlf-cache}
export MODEL_TYPE=${MODEL_TYPE:-qwen2} TEMPLATE=${TEMPLATE:-qwen2_5}
BASE_MODEL=${BASE_MODEL:-/tmp/qwen05} RUNS=${RUNS:-/tmp} ENGINE=${ENGINE:-vllm}
ex=examples/customer_service data=$RUNS/cs SFT_MODEL=$RUNS/cs-sft-model RUN=$RUNS/cs-grpo-$SEED
port=${USER_PORT:-8012}
# The served name is a word no conversation holds: the user block's model is recorded as a secret (redaction.py),
# so a name like "customer" came out as ${USER_MODEL} in every logged system prompt and tool error
export USER_BASE_URL="http://127.0.0.1:$port/v1" USER_MODEL=qwen05-sim-customer USER_API_KEY=none
read -ra train_flags <<< "${TRAIN_FLAGS:-}"; read -ra sft_flags <<< "${SFT_FLAGS:-}"
mkdir -p "$out" "$data"

deploy=(python3 -m swift.cli.deploy --model "${USER_MODEL_PATH:-$BASE_MODEL}" --model_type "$MODEL_TYPE"
        --template "$TEMPLATE" --infer_backend "${USER_BACKEND:-vllm}" --host 127.0.0.1 --port "$port"
        --served_model_name "$USER_MODEL" --max_new_tokens 96)
# vLLM at 12 % of the GPU with a KV cache of fixed size (USER_KV_BYTES, 6 GiB: ~500k tokens, two trainers' and
# two evaluations' customers at once), so its start-up skips the free-memory profiling that other processes
# starting beside it can spoil (vllm_start.sh says how)
[ "${USER_BACKEND:-vllm}" = vllm ] && deploy+=(--vllm_gpu_memory_utilization 0.12 --vllm_max_model_len 6144
  --vllm_enforce_eager true --vllm_engine_kwargs "{\"kv_cache_memory_bytes\":${USER_KV_BYTES:-6442450944}}")

wait_user() {  # SECONDS [PID]: until the customer answers; fails at SECONDS or when PID has exited
  served_up "$USER_BASE_URL" "$1" "${2:-}" "the customer's swift deploy"
}
model_user() {  # the model customer for this phase: the shared one (USER_SHARED=1) or its own until the phase ends
  if [ "${USER_SHARED:-0}" = 1 ]; then
    wait_user "${USER_WAIT:-120}" "$(cat "${USER_PIDFILE:-/nonexistent}" 2>/dev/null || true)" \
      || { echo "the shared customer does not answer (pipeline.sh: R/user.out); this phase needs it" >&2; exit 3; }
    return
  fi
  port_free "$port"  # USER_BASE_URL names it: a customer that moved to another port would never answer
  "${deploy[@]}" >> "$out/user-deploy.log" 2>&1 &
  local pid=$!
  trap 'kill '"$pid"' 2>/dev/null || true' EXIT
  wait_user 300 "$pid"
}
evaluate() {  # NAME MODEL [ADAPTERS] [DATASET]: one engine per customer of EVAL_USERS, the metrics into OUT
  local name=$1 model=$2 adapters=${3:-} dataset=${4:-$data/eval.jsonl} env_file suffix dir user rows
  for user in ${EVAL_USERS:-scripted ${EVAL_USER:-}}; do
    env_file=$ex/env.yaml suffix="" rows=$dataset
    if [ "$user" = model ]; then  # val too: select chooses with both customers
      env_file=$ex/env_model_user.yaml suffix=-model-user
      model_user
    fi
    dir=$RUNS/cs-eval-$name$suffix; rm -rf "$dir"
    args=(--model "$model" --model-type "$MODEL_TYPE" --engine "$ENGINE" --env "$env_file" --template "$TEMPLATE"
          --dataset "$rows" --output "$dir" --samples 1 --temperature 0 --max-tokens "${MAX_TOKENS:-256}"
          --max-length 6144 --concurrency "${CONCURRENCY:-64}" --group-by split --group-by task_type)
    [ "$ENGINE" = vllm ] && args+=(--gpu-memory-utilization "${GPU_UTIL:-0.6}")
    [ -n "$adapters" ] && { read -ra more <<< "$adapters"; args+=(--adapters "${more[@]}"); }
    vllm_start "$out/eval-$name$suffix.log" python3 -m swift_rlfactory.cli eval "${args[@]}"
    if [ -f "$dir/metrics.json" ]; then  # one adapter or the model; several adapters: a folder each (select)
      cp "$dir/metrics.json" "$out/eval-$name$suffix.json"
      gzip -c "$dir/trajectories.jsonl" > "$out/trajectories-$name$suffix.jsonl.gz"
    fi
  done
}
last_checkpoint() { ls -d "$1"/v*/checkpoint-* 2>/dev/null | sort -V | tail -1 || true; }  # none: empty

case "$phase" in
  prepare)
    rows=${EVAL_ROWS:-100000}  # rows of each split scored (a CPU check takes a few)
    sed -n '1001,1900p' $ex/data/train.jsonl > "$data/grpo.jsonl"
    sed -n '1901,2000p' $ex/data/train.jsonl | sed 's/"split": "train"/"split": "val"/' | head -n "$rows" > "$data/val.jsonl"
    { for split in test ood; do head -n "$rows" "$ex/data/$split.jsonl"; done; cat "$data/val.jsonl"; } > "$data/eval.jsonl"
    wc -l "$data"/*.jsonl | tee "$out/prepare.log" ;;
  eval-base) evaluate base "$BASE_MODEL" ;;
  sft)  # with a DRAW (a seed): another SFT model from the same demonstrations, the baseline's spread
    rm -rf "$RUNS/cs-sft$draw"
    python3 $ex/demos.py --n "${DEMOS:-1000}" --template "$TEMPLATE" --out "$data/sft$draw.jsonl" > "$out/sft$draw.log" 2>&1
    # examples/sft.sh (LoRA SFT + merge into OUTPUT/merged) with this recipe's batch and length, set here so
    # that a MICRO_BATCH meant for the trainers does not change the SFT run
    seed=(); [ -n "$draw" ] && seed=(--seed "${draw#-}" --data_seed "${draw#-}")  # LoRA init and data order
    MODEL=$BASE_MODEL OUTPUT=$RUNS/cs-sft$draw SFT_ROWS=$data/sft$draw.jsonl DTYPE=bfloat16 EPOCHS=2 MICRO_BATCH=8 \
      GRAD_ACC=2 MAX_LENGTH=6144 bash examples/sft.sh "${sft_flags[@]}" "${seed[@]}" >> "$out/sft$draw.log" 2>&1
    rm -rf "$SFT_MODEL$draw" && mv "$RUNS/cs-sft$draw/merged" "$SFT_MODEL$draw"
    cp "$RUNS"/cs-sft$draw/v*/logging.jsonl "$out/logging-sft$draw.jsonl" ;;
  eval-sft) evaluate "sft$draw" "$SFT_MODEL$draw" ;;
  train)  # resumable: the LoRA weights and step count come back, not the optimizer (deepsearch h200.sh says why)
    # TRAIN_UNTIL (epoch s, pipeline.sh): stop then, so that a retried phase keeps the run's deadline too
    timeout=${TRAIN_TIMEOUT:-480}; [ -n "${TRAIN_UNTIL:-}" ] && timeout=$(( TRAIN_UNTIL - $(date +%s) ))
    [ "$timeout" -ge 60 ] || { echo "no time left to train (${timeout} s): select takes the checkpoints there are"; exit 0; }
    env_file=$ex/env_model_user.yaml
    if [ "${USER_KIND:-model}" = scripted ]; then env_file=$ex/env.yaml; else model_user; fi
    last=$(last_checkpoint "$RUN"); resume=(); [ -n "$last" ] && resume=(--resume_from_checkpoint "$last" --resume_only_model true)
    copy_logs() { for d in "$RUN"/v*; do cp "$d/logging.jsonl" "$out/logging-grpo-$SEED-${d##*/}.jsonl" 2>/dev/null || true; done; }
    (while sleep 15; do copy_logs; done) > /dev/null 2>&1 & copier=$!
    log="$out/train-$SEED-$(date +%s).log"; rc=0
    RLFACTORY_ENV=$env_file MODEL=$SFT_MODEL DATASET=$data/grpo.jsonl OUTPUT=$RUN SEED=$SEED STEPS=${STEPS:-40} \
      SAVE_STEPS=${SAVE_STEPS:-5} VLLM_UTIL=${VLLM_UTIL:-0.3} \
      timeout "$timeout" bash $ex/train.sh "${resume[@]}" "${train_flags[@]}" > "$log" 2>&1 || rc=$?
    kill "$copier"; copy_logs
    # 124: stopped at TRAIN_TIMEOUT, resumable; anything else is a crash and must not pass for a finished run
    [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || { echo "train.sh failed (exit $rc): see $log" >&2; exit "$rc"; } ;;
  select)  # the SFT model (step 0) and every finished checkpoint of RUN on val with each customer of SELECT_USERS
    # ("scripted model"): a candidate counts by its worst customer; the best -> RUN-best.txt
    pending=(); for ckpt in $(ls -d "$RUN"/v*/checkpoint-* 2>/dev/null | sort -V); do
      [ -f "$ckpt/trainer_state.json" ] && pending+=("$ckpt"); done
    sft_dirs=() val_dirs=()
    for user in ${SELECT_USERS:-scripted model}; do
      suffix=$([ "$user" = model ] && echo -model-user || true)
      [ -f "$RUNS/cs-eval-sft$suffix/trajectories.jsonl" ] || {
        echo "select needs eval-sft with the $user customer first (EVAL_USERS=$user; its val rows are step 0)" >&2; exit 2; }
      sft_dirs+=("$RUNS/cs-eval-sft$suffix") val_dirs+=("$RUNS/cs-eval-val-$SEED$suffix")
    done
    [ "${#pending[@]}" -eq 0 ] || EVAL_USERS=${SELECT_USERS:-scripted model} evaluate "val-$SEED" "$SFT_MODEL" "${pending[*]}" "$data/val.jsonl"
    python3 benchmarks/customer_service/summarize.py --choose "$(IFS=,; echo "${sft_dirs[*]}")" \
      "$(IFS=,; echo "${val_dirs[*]}")" "$RUN-best.txt" "$out/validation-$SEED.json" "${pending[@]}" ;;
  eval-trained)  # the checkpoint select chose ("sft": none beat the SFT model); the last one without select
    ckpt=$(cat "$RUN-best.txt" 2>/dev/null || last_checkpoint "$RUN"); echo "$ckpt" > "$out/checkpoint-$SEED.txt"
    evaluate "trained-$SEED" "$SFT_MODEL" "$([ "$ckpt" = sft ] || echo "$ckpt")" ;;
  user) port_free "$port"; exec "${deploy[@]}" ;;  # pipeline.sh: `setsid`, so that one kill of its group ends vLLM's processes too
  user-wait) wait_user "${USER_WAIT:-300}" "$(cat "${USER_PIDFILE:-/nonexistent}" 2>/dev/null || true)" ;;
  summary) python3 benchmarks/customer_service/summarize.py "$out" ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
