#!/usr/bin/env bash
# DeepSearch GRPO on several GPUs of one node: NPROC_PER_NODE ranks (default 2), each with its own
# colocated vLLM engine, LoRA. NOT RUN YET on GPUs (docs/scaling.md says what was run where). From the
# repository root:
#   MODEL=/path/to/Qwen2.5-3B-Instruct NPROC_PER_NODE=8 bash examples/deepsearch/train_multi_gpu.sh [flags]
# DEEPSPEED=zero2 or zero3 (optional) shards optimizer state (and with zero3 the parameters) over ranks.
# MICRO_BATCH is per rank: a step's batch is MICRO_BATCH x ranks x GRAD_ACC, a multiple of 8 generations.
# train_multi_node.sh runs this script on each of several nodes.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
MODEL_TYPE=${MODEL_TYPE:-qwen2}
TEMPLATE=${TEMPLATE:-qwen2_5}
OUTPUT=${OUTPUT:-output/deepsearch-multi}
STEPS=${STEPS:-100}
DATASET=${DATASET:-examples/deepsearch/data/train.jsonl}
export NPROC_PER_NODE=${NPROC_PER_NODE:-2}
deepspeed=(); [ -n "${DEEPSPEED:-}" ] && deepspeed=(--deepspeed "$DEEPSPEED")
# VLLM_SERVER=host (VLLM_SERVER_PORT, 8000): generate on a `swift rollout` server (rollout_server.sh)
# instead of each rank's own vLLM
vllm=(--vllm_mode colocate --vllm_gpu_memory_utilization "${VLLM_UTIL:-0.4}" --sleep_level 1 --vllm_max_model_len 4096)
[ -n "${VLLM_SERVER:-}" ] && vllm=(--vllm_mode server --vllm_server_host "$VLLM_SERVER"
  --vllm_server_port "${VLLM_SERVER_PORT:-8000}" --vllm_server_pass_dataset true)

export RLFACTORY_ENV=${RLFACTORY_ENV:-examples/deepsearch/env.yaml}
swift rlhf --rlhf_type grpo \
  --model "$MODEL" --model_type "$MODEL_TYPE" --template "$TEMPLATE" \
  --dataset "$DATASET" \
  --external_plugins swift_rlfactory/plugin.py \
  --multi_turn_scheduler rlfactory --max_turns 4 \
  --reward_funcs rlfactory --callbacks rlfactory \
  --use_vllm true "${vllm[@]}" \
  --tuner_type lora --lora_rank 32 --lora_alpha 64 --target_modules all-linear \
  --torch_dtype bfloat16 --beta 0 --learning_rate "${LR:-2e-5}" --warmup_ratio 0.02 \
  --temperature 1.0 --num_generations 8 --per_device_train_batch_size "${MICRO_BATCH:-8}" \
  --gradient_accumulation_steps "${GRAD_ACC:-1}" \
  --max_completion_length 256 --max_length 4096 \
  --max_steps "$STEPS" --logging_steps 1 --save_steps 10 --save_total_limit 3 \
  --output_dir "$OUTPUT" --dataloader_num_workers 0 --dataset_num_proc 1 \
  --report_to none --check_model false --seed 42 "${deepspeed[@]}" "$@"
