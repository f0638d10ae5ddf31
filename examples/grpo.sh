#!/usr/bin/env bash
# The GRPO launch every example's train.sh shares: single GPU, LoRA, colocated vLLM, the rlfactory plugin.
# Sourced by examples/<name>/train.sh after it sets its defaults (each knob below keeps a value already set
# in the environment); extra arguments go to swift rlhf last (later flags win).
# MODEL (required), MODEL_TYPE (qwen2), TEMPLATE (qwen2_5), DATASET, OUTPUT, RLFACTORY_ENV: what and where.
# MAX_TURNS, MAX_LENGTH (a whole trajectory; also vLLM's max_model_len), MAX_COMPLETION (tokens a turn).
# LORA_RANK (32; alpha twice the rank), LR (2e-5), BETA (0), STEPS (100), SEED (42).
# VLLM_UTIL (0.35: vLLM's share of GPU memory) and MICRO_BATCH x GRAD_ACC (8 x 4: completions per forward
# pass x passes a step; the product is the step's batch) let several runs share one GPU.
# VLLM_EAGER (false): vLLM with CUDA graphs; SLEEP_LEVEL (1): vLLM frees its memory while the step trains.
# Measured 2026-12-06 on one H200 (benchmarks/generation/RESULTS.md, 0.5B, 32 completions): the step 3.3x
# faster than eager without sleep, at 0.45x its peak GPU memory. VLLM_EAGER=true starts ~30 s sooner.
# USE_VLLM=false: generate with the trainer's own model (a CPU check), without the colocated engine's flags.
# SAVE_STEPS (10), SAVE_LIMIT (checkpoints kept; empty: all). DYNAMIC_SAMPLE=1: DAPO's dynamic sampling,
# groups with one reward for all samples regenerated from fresh rows, up to MAX_RESAMPLE (6) rounds
# (examples/arithmetic/train.sh says why 6). SWIFT: the command that runs swift rlhf.
MODEL=${MODEL:?set MODEL to a model folder or hub id}
SWIFT=${SWIFT:-"python3 -m swift.cli.rlhf"}
LORA_RANK=${LORA_RANK:-32}

vllm=(--use_vllm false)
[ "${USE_VLLM:-true}" = true ] && vllm=(--use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization "${VLLM_UTIL:-0.35}"
  --vllm_max_model_len "$MAX_LENGTH" --vllm_enforce_eager "${VLLM_EAGER:-false}" --sleep_level "${SLEEP_LEVEL:-1}")
keep=(); [ -n "${SAVE_LIMIT:-}" ] && keep=(--save_total_limit "$SAVE_LIMIT")
dynamic=(); [ "${DYNAMIC_SAMPLE:-0}" = 1 ] && dynamic=(--dynamic_sample true --max_resample_times "${MAX_RESAMPLE:-6}")

export RLFACTORY_ENV
$SWIFT --rlhf_type grpo \
  --model "$MODEL" --model_type "${MODEL_TYPE:-qwen2}" --template "${TEMPLATE:-qwen2_5}" \
  --dataset "$DATASET" \
  --external_plugins swift_rlfactory/plugin.py \
  --multi_turn_scheduler rlfactory --max_turns "$MAX_TURNS" \
  --reward_funcs rlfactory --callbacks rlfactory \
  "${vllm[@]}" \
  --tuner_type lora --lora_rank "$LORA_RANK" --lora_alpha $(( 2 * LORA_RANK )) --target_modules all-linear \
  --torch_dtype bfloat16 --beta "${BETA:-0}" --learning_rate "${LR:-2e-5}" --warmup_ratio 0.02 \
  --temperature 1.0 --num_generations 8 --per_device_train_batch_size "${MICRO_BATCH:-8}" \
  --gradient_accumulation_steps "${GRAD_ACC:-4}" \
  --max_completion_length "$MAX_COMPLETION" --max_length "$MAX_LENGTH" \
  --max_steps "${STEPS:-100}" --logging_steps 1 --save_steps "${SAVE_STEPS:-10}" "${keep[@]}" \
  --output_dir "$OUTPUT" --dataloader_num_workers 0 --dataset_num_proc 1 \
  --report_to none --check_model false --seed "${SEED:-42}" "${dynamic[@]}" "$@"
