#!/usr/bin/env bash
# The warm start every example's sft.sh shares: LoRA SFT on demonstrations already written as ms-swift SFT
# rows (SFT_ROWS), merged into a plain model folder, OUTPUT/merged, that GRPO then starts from. Sourced by
# examples/<name>/sft.sh after it wrote SFT_ROWS (or run with bash, every knob in the environment); extra
# arguments go to swift sft last (later flags win).
# MODEL (required), MODEL_TYPE (qwen2), TEMPLATE (qwen2_5), SFT_ROWS (OUTPUT/sft.jsonl), OUTPUT (the run
# folder). LoRA rank 32 (alpha 64), LR 1e-4, EPOCHS (2), DTYPE (bfloat16), MICRO_BATCH x GRAD_ACC (16 x 1:
# the batch; a smaller MICRO_BATCH needs less GPU memory), MAX_LENGTH (4096). SWIFT: "python3 -m swift.cli".
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
OUTPUT=${OUTPUT:?set OUTPUT to the SFT run folder}
SWIFT=${SWIFT:-"python3 -m swift.cli"}
$SWIFT.sft --model "$MODEL" --model_type "${MODEL_TYPE:-qwen2}" --template "${TEMPLATE:-qwen2_5}" --check_model false \
  --dataset "${SFT_ROWS:-$OUTPUT/sft.jsonl}" \
  --tuner_type lora --lora_rank 32 --lora_alpha 64 --target_modules all-linear \
  --torch_dtype "${DTYPE:-bfloat16}" --learning_rate 1e-4 --warmup_ratio 0.05 --num_train_epochs "${EPOCHS:-2}" \
  --per_device_train_batch_size "${MICRO_BATCH:-16}" --gradient_accumulation_steps "${GRAD_ACC:-1}" \
  --max_length "${MAX_LENGTH:-4096}" --logging_steps 5 --save_only_model true \
  --output_dir "$OUTPUT" --dataloader_num_workers 0 --dataset_num_proc 1 --report_to none --seed 42 "$@"
ckpt=$(ls -d "$OUTPUT"/v*/checkpoint-* | sort -V | tail -1)
$SWIFT.export --adapters "$ckpt" --merge_lora true --output_dir "$OUTPUT/merged"
echo "merged $ckpt -> $OUTPUT/merged"
