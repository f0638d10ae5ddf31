#!/usr/bin/env bash
# Customer-service GRPO: single GPU, LoRA, colocated vLLM; the customer is the environment's `user:`.
# From the repository root:
#   MODEL=/path/to/Qwen2.5-0.5B-Instruct bash examples/customer_service/train.sh [extra swift rlhf flags]
# RLFACTORY_ENV: env.yaml (the scripted customer, default) or env_model_user.yaml (a model behind
# USER_BASE_URL, e.g. the same 0.5B served by `swift deploy`: benchmarks/customer_service/h200.sh).
# SEED (42), STEPS (100), VLLM_UTIL, MICRO_BATCH x GRAD_ACC (the step's batch) as in examples/deepsearch.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
OUTPUT=${OUTPUT:-output/customer_service}
DATASET=${DATASET:-examples/customer_service/data/train.jsonl}
SWIFT=${SWIFT:-"python3 -m swift.cli.rlhf"}

export RLFACTORY_ENV=${RLFACTORY_ENV:-examples/customer_service/env.yaml}
$SWIFT --rlhf_type grpo \
  --model "$MODEL" --model_type "${MODEL_TYPE:-qwen2}" --template "${TEMPLATE:-qwen2_5}" \
  --dataset "$DATASET" \
  --external_plugins swift_rlfactory/plugin.py \
  --multi_turn_scheduler rlfactory --max_turns 16 \
  --reward_funcs rlfactory --callbacks rlfactory \
  --use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization "${VLLM_UTIL:-0.35}" \
  --vllm_max_model_len 6144 --vllm_enforce_eager "${VLLM_EAGER:-false}" --sleep_level "${SLEEP_LEVEL:-1}" \
  --tuner_type lora --lora_rank 32 --lora_alpha 64 --target_modules all-linear \
  --torch_dtype bfloat16 --beta "${BETA:-0.04}" --learning_rate "${LR:-2e-5}" --warmup_ratio 0.02 \
  --temperature 1.0 --num_generations 8 --per_device_train_batch_size "${MICRO_BATCH:-8}" \
  --gradient_accumulation_steps "${GRAD_ACC:-4}" \
  --max_completion_length 1024 --max_length 6144 \
  --max_steps "${STEPS:-100}" --logging_steps 1 --save_steps "${SAVE_STEPS:-20}" --save_total_limit 10 \
  --output_dir "$OUTPUT" --dataloader_num_workers 0 --dataset_num_proc 1 \
  --report_to none --check_model false --seed "${SEED:-42}" "$@"
