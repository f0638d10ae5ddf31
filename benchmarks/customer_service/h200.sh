#!/usr/bin/env bash
# The customer-service recipe (issue 35, item 2) on one H200, phase by phase (each phase one device command
# of < 10 min; /tmp persists between them while the machine stays warm). From the repository root, after
# the GPU kit of ../shared/gpu/README.md is installed (/tmp/site, /tmp/qwen05):
#   bash benchmarks/customer_service/h200.sh PHASE OUT_DIR
# Phases, in order:
#   prepare          1,000 oracle demonstrations (demos.py) of the first 1,000 train rows -> /tmp/cs/sft.jsonl;
#                    the other 1,000 train rows for GRPO; the eval set = test (held-out goals) + ood   ~1 min
#   eval-base        the base model, scripted customer, on the eval set                               ~3 min
#   sft              LoRA SFT on the demonstrations, merged into /tmp/qwen05-sft                      ~3 min
#   eval-sft         the SFT model on the eval set                                                    ~3 min
#   train SEED       GRPO from the SFT model (seed SEED, 42 and 43 for the two seeds) with the 0.5B model
#                    itself as the customer, served by `swift deploy` beside training (USER_KIND=scripted: the
#                    scripted customer instead); stops at TRAIN_TIMEOUT (480 s): run again to resume    ~9 min a call
#   eval-trained SEED  run SEED's last checkpoint on the eval set                                     ~3 min
#   summary          the table of RESULTS.md from every eval-*.json in OUT_DIR (CPU)
# Each eval scores, in one run, the test split (goals never trained on, on worlds never trained on) and the
# ood split (task types never trained on), per split and per task type: success (`reward/shop.rewards:goal`),
# the rate of policy violations (1 - `reward/shop.rewards:policy`) and violations per conversation. The
# customer in every eval is the scripted one (users.py), so the numbers of two models compare; EVAL_USER=model
# scores with the model customer too (eval-NAME-model-user.json).
set -euo pipefail
phase=${1:?phase}; out=${2:?out dir}
source /tmp/device_env.sh >/dev/null
source benchmarks/vllm_start.sh  # vllm_start LOG CMD: once more when vLLM's start-up lost a memory race
export PYTHONPATH="$PWD:$PYTHONPATH" RLFACTORY_CACHE=/tmp/rlf-cache
export MODEL_TYPE=qwen2 TEMPLATE=qwen2_5
ex=examples/customer_service
port=${USER_PORT:-8012}
export USER_BASE_URL="http://127.0.0.1:$port/v1" USER_MODEL=customer USER_API_KEY=none
mkdir -p "$out" /tmp/cs

model_user() {  # serve /tmp/qwen05 as the customer (vLLM, 12 % of the GPU) until this phase ends
  python3 -m swift.cli.deploy --model /tmp/qwen05 --model_type qwen2 --template qwen2_5 \
    --infer_backend vllm --vllm_gpu_memory_utilization 0.12 --vllm_max_model_len 6144 --vllm_enforce_eager true \
    --host 127.0.0.1 --port "$port" --served_model_name "$USER_MODEL" --max_new_tokens 96 \
    >> "$out/user-deploy.log" 2>&1 &
  local pid=$!
  trap 'kill '"$pid"' 2>/dev/null || true' EXIT
  python3 - "$pid" <<'PY'  # wait until the customer answers /v1/models (or its process dies)
import os, sys, time, urllib.request
pid, url = int(sys.argv[1]), os.environ["USER_BASE_URL"] + "/models"
for _ in range(300):
    try:
        urllib.request.urlopen(url, timeout=2)
        sys.exit(print("customer up"))
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit("swift deploy exited; see user-deploy.log")
        time.sleep(1)
sys.exit("customer not up after 300 s")
PY
}
evaluate() {  # NAME MODEL [ADAPTERS]: the eval set with the scripted customer (and the model one with EVAL_USER=model)
  local name=$1 model=$2 adapters=${3:-} env_file suffix
  for user in scripted ${EVAL_USER:-}; do
    env_file=$ex/env.yaml suffix=""
    [ "$user" = model ] && env_file=$ex/env_model_user.yaml suffix=-model-user
    [ "$user" = model ] && model_user
    rm -rf "/tmp/eval-$name$suffix"
    args=(--model "$model" --model-type qwen2 --engine vllm --env "$env_file" --template qwen2_5
          --dataset /tmp/cs/eval.jsonl --output "/tmp/eval-$name$suffix" --samples 1 --temperature 0
          --max-tokens 256 --max-length 6144 --concurrency 64 --group-by split --group-by task_type
          --gpu-memory-utilization "${GPU_UTIL:-0.6}")
    [ -n "$adapters" ] && args+=(--adapters "$adapters")
    vllm_start "$out/eval-$name$suffix.log" python3 -m swift_rlfactory.cli eval "${args[@]}"
    cp "/tmp/eval-$name$suffix/metrics.json" "$out/eval-$name$suffix.json"
    gzip -c "/tmp/eval-$name$suffix/trajectories.jsonl" > "$out/trajectories-$name$suffix.jsonl.gz"
  done
}
last_checkpoint() { ls -d "$1"/v*/checkpoint-* | sort -V | tail -1; }

case "$phase" in
  prepare)
    python3 $ex/demos.py --n 1000 --template qwen2_5 --out /tmp/cs/sft.jsonl | tee "$out/prepare.log"
    tail -n +1001 $ex/data/train.jsonl > /tmp/cs/grpo.jsonl
    cat $ex/data/test.jsonl $ex/data/ood.jsonl > /tmp/cs/eval.jsonl
    wc -l /tmp/cs/*.jsonl | tee -a "$out/prepare.log" ;;
  eval-base) evaluate base /tmp/qwen05 ;;
  sft)
    rm -rf /tmp/cs-sft
    python3 -m swift.cli.sft --model /tmp/qwen05 --model_type qwen2 --template qwen2_5 --check_model false \
      --dataset /tmp/cs/sft.jsonl --tuner_type lora --lora_rank 32 --lora_alpha 64 --target_modules all-linear \
      --torch_dtype bfloat16 --learning_rate 1e-4 --warmup_ratio 0.05 --num_train_epochs 2 \
      --per_device_train_batch_size 8 --gradient_accumulation_steps 2 --max_length 6144 --logging_steps 5 \
      --save_only_model true --output_dir /tmp/cs-sft --dataloader_num_workers 0 --dataset_num_proc 1 \
      --report_to none --seed 42 > "$out/sft.log" 2>&1
    ckpt=$(last_checkpoint /tmp/cs-sft)
    python3 -m swift.cli.export --adapters "$ckpt" --merge_lora true --output_dir /tmp/cs-sft/merged >> "$out/sft.log" 2>&1
    rm -rf /tmp/qwen05-sft && mv /tmp/cs-sft/merged /tmp/qwen05-sft
    cp /tmp/cs-sft/v*/logging.jsonl "$out/logging-sft.jsonl" ;;
  eval-sft) evaluate sft /tmp/qwen05-sft ;;
  train)
    seed=${3:?seed}; run=/tmp/cs-grpo-$seed env_file=$ex/env_model_user.yaml
    if [ "${USER_KIND:-model}" = scripted ]; then env_file=$ex/env.yaml; else model_user; fi
    last=$(last_checkpoint "$run" 2>/dev/null || true)
    resume=(); [ -n "$last" ] && resume=(--resume_from_checkpoint "$last" --resume_only_model true)
    log="$out/train-$seed-$(date +%s).log"; rc=0
    RLFACTORY_ENV=$env_file MODEL=/tmp/qwen05-sft DATASET=/tmp/cs/grpo.jsonl OUTPUT=$run SEED=$seed \
      VLLM_UTIL=${VLLM_UTIL:-0.3} timeout "${TRAIN_TIMEOUT:-480}" bash $ex/train.sh "${resume[@]}" > "$log" 2>&1 || rc=$?
    for d in "$run"/v*; do cp "$d/logging.jsonl" "$out/logging-grpo-$seed-${d##*/}.jsonl" 2>/dev/null || true; done
    # 124: stopped at TRAIN_TIMEOUT, resumable; anything else is a crash
    [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || { echo "train.sh failed (exit $rc): see $log" >&2; exit "$rc"; } ;;
  eval-trained)
    seed=${3:?seed}; ckpt=$(last_checkpoint "/tmp/cs-grpo-$seed"); echo "$ckpt" > "$out/checkpoint-$seed.txt"
    evaluate "trained-$seed" /tmp/qwen05-sft "$ckpt" ;;
  summary) python3 benchmarks/customer_service/summarize.py "$out" ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
