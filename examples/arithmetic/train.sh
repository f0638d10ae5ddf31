#!/usr/bin/env bash
# GRPO from the base model (no SFT) on arithmetic word problems with the calculator tool: single GPU,
# LoRA, colocated vLLM. From the repository root:
#   MODEL=/path/to/Qwen2.5-Coder-0.5B-Instruct bash examples/arithmetic/train.sh [extra swift rlhf flags]
# 200 steps x 4 questions x 8 samples: 800 of the 2,000 train problems, each seen at most once. The
# committed H200 run is benchmarks/rl_from_base/h200.sh (saves every 25 steps, resumes across commands).
# VLLM_UTIL (vLLM's share of GPU memory) and MICRO_BATCH x GRAD_ACC (default 32 x 1: the step's 32
# completions) let it share one GPU with other runs. DYNAMIC_SAMPLE=1 turns on DAPO's dynamic sampling:
# a group whose 8 rewards are all equal carries no GRPO signal, and ms-swift regenerates such groups from
# fresh rows, up to MAX_RESAMPLE (6) more rounds, until the step's batch is all signal. On 2026-12-01b,
# from step 40 on, 3 of 4 groups were all right or all wrong. ms-swift falls back to the step's first
# batch when the rounds run out, so MAX_RESAMPLE is above its default of 3 (at one group in five with
# signal, four groups take about five rounds).
# MAX_COMPLETION (192): tokens each turn may write (env_python.yaml's programs need more than one expression).
# VLLM_EAGER (false): vLLM with CUDA graphs; SLEEP_LEVEL (1): vLLM frees its memory while the step trains.
# Measured 2026-12-06 on one H200 (benchmarks/generation/RESULTS.md, 0.5B, 32 completions): the step 3.3x
# faster than eager without sleep, at 0.45x its peak GPU memory. VLLM_EAGER=true starts ~30 s sooner.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
OUTPUT=${OUTPUT:-output/arithmetic}
STEPS=${STEPS:-200}
DATASET=${DATASET:-examples/arithmetic/data/train.jsonl}
SWIFT=${SWIFT:-"python3 -m swift.cli.rlhf"}
dynamic=(); [ "${DYNAMIC_SAMPLE:-0}" = 1 ] && dynamic=(--dynamic_sample true --max_resample_times "${MAX_RESAMPLE:-6}")

export RLFACTORY_ENV=${RLFACTORY_ENV:-examples/arithmetic/env.yaml}
$SWIFT --rlhf_type grpo \
  --model "$MODEL" --model_type "${MODEL_TYPE:-qwen2}" --template "${TEMPLATE:-qwen2_5}" \
  --dataset "$DATASET" \
  --external_plugins swift_rlfactory/plugin.py \
  --multi_turn_scheduler rlfactory --max_turns 4 \
  --reward_funcs rlfactory --callbacks rlfactory \
  --use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization "${VLLM_UTIL:-0.3}" \
  --vllm_max_model_len 2048 --vllm_enforce_eager "${VLLM_EAGER:-false}" --sleep_level "${SLEEP_LEVEL:-1}" \
  --tuner_type lora --lora_rank 16 --lora_alpha 32 --target_modules all-linear \
  --torch_dtype bfloat16 --beta "${BETA:-0}" --learning_rate "${LR:-5e-5}" --warmup_ratio 0.02 \
  --temperature 1.0 --num_generations 8 --per_device_train_batch_size "${MICRO_BATCH:-32}" --gradient_accumulation_steps "${GRAD_ACC:-1}" \
  --max_completion_length "${MAX_COMPLETION:-192}" --max_length 2048 \
  --max_steps "$STEPS" --logging_steps 1 --save_steps "${SAVE_STEPS:-25}" \
  --output_dir "$OUTPUT" --dataloader_num_workers 0 --dataset_num_proc 1 \
  --report_to none --check_model false --seed 42 "${dynamic[@]}" "$@"
