#!/usr/bin/env bash
# Booking-world GRPO: single GPU, LoRA, colocated vLLM, from the warm-start model of sft.sh. From the
# repository root:
#   MODEL=output/booking-sft/merged bash examples/booking/train.sh [extra swift rlhf flags]
# SEED (42): the run's seed (data order, sampling, LoRA init); two seeds are two runs of the same recipe.
# VLLM_UTIL (vLLM's share of GPU memory), MICRO_BATCH x GRAD_ACC (completions per forward pass x passes a
# step) let several runs share one GPU (benchmarks/booking/pipeline.sh runs two seeds side by side).
# A trajectory is ~3 turns (search, book, answer); the completion holds the observations too (the oracle
# needs 430 tokens, at most 670), so it gets 1,024. Later flags win.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
MODEL_TYPE=${MODEL_TYPE:-qwen2}
TEMPLATE=${TEMPLATE:-qwen2_5}
OUTPUT=${OUTPUT:-output/booking}
STEPS=${STEPS:-60}
DATASET=${DATASET:-examples/booking/data/train.jsonl}
SWIFT=${SWIFT:-"python3 -m swift.cli.rlhf"}

# USE_VLLM=false: generate with the trainer's own model (a CPU check), without the colocated engine's flags
vllm=(--use_vllm false)
[ "${USE_VLLM:-true}" = true ] && vllm=(--use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization "${VLLM_UTIL:-0.3}"
  --vllm_max_model_len 4096 --vllm_enforce_eager "${VLLM_EAGER:-false}" --sleep_level "${SLEEP_LEVEL:-1}")

export RLFACTORY_ENV=${RLFACTORY_ENV:-examples/booking/env.yaml}
$SWIFT --rlhf_type grpo \
  --model "$MODEL" --model_type "$MODEL_TYPE" --template "$TEMPLATE" \
  --dataset "$DATASET" \
  --external_plugins swift_rlfactory/plugin.py \
  --multi_turn_scheduler rlfactory --max_turns 6 \
  --reward_funcs rlfactory --callbacks rlfactory \
  "${vllm[@]}" \
  --tuner_type lora --lora_rank 32 --lora_alpha 64 --target_modules all-linear \
  --torch_dtype bfloat16 --beta "${BETA:-0.02}" --learning_rate "${LR:-2e-5}" --warmup_ratio 0.02 \
  --temperature 1.0 --num_generations 8 --per_device_train_batch_size "${MICRO_BATCH:-8}" --gradient_accumulation_steps "${GRAD_ACC:-4}" \
  --max_completion_length 1024 --max_length 4096 \
  --max_steps "$STEPS" --logging_steps 1 --save_steps "${SAVE_STEPS:-10}" --save_total_limit 10 \
  --output_dir "$OUTPUT" --dataloader_num_workers 0 --dataset_num_proc 1 \
  --report_to none --check_model false --seed "${SEED:-42}" "$@"
