#!/usr/bin/env bash
# Booking-world warm start (and the SFT-only baseline): LoRA SFT on the oracle's demonstrations (demos.py),
# merged into a plain model folder that train.sh starts GRPO from. From the repository root:
#   MODEL=/path/to/Qwen2.5-Coder-0.5B-Instruct OUTPUT=output/booking-sft bash examples/booking/sft.sh
#   MODEL=output/booking-sft/merged bash examples/booking/train.sh
# DEMOS (1000): train rows demonstrated. MICRO_BATCH x GRAD_ACC (default 16 x 1) is the batch; EPOCHS (2).
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
MODEL_TYPE=${MODEL_TYPE:-qwen2}
TEMPLATE=${TEMPLATE:-qwen2_5}
OUTPUT=${OUTPUT:-output/booking-sft}
DATASET=${DATASET:-examples/booking/data/train.jsonl}
SWIFT=${SWIFT:-"python3 -m swift.cli"}

python3 examples/booking/demos.py --n "${DEMOS:-1000}" --dataset "$DATASET" --template "$TEMPLATE" --out "$OUTPUT/sft.jsonl"
$SWIFT.sft --model "$MODEL" --model_type "$MODEL_TYPE" --template "$TEMPLATE" --check_model false \
  --dataset "$OUTPUT/sft.jsonl" \
  --tuner_type lora --lora_rank 32 --lora_alpha 64 --target_modules all-linear \
  --torch_dtype "${DTYPE:-bfloat16}" --learning_rate 1e-4 --warmup_ratio 0.05 --num_train_epochs "${EPOCHS:-2}" \
  --per_device_train_batch_size "${MICRO_BATCH:-16}" --gradient_accumulation_steps "${GRAD_ACC:-1}" --max_length 4096 --logging_steps 5 --save_only_model true \
  --output_dir "$OUTPUT" --dataloader_num_workers 0 --dataset_num_proc 1 --report_to none --seed 42 "$@"
ckpt=$(ls -d "$OUTPUT"/v*/checkpoint-* | sort -V | tail -1)
$SWIFT.export --adapters "$ckpt" --merge_lora true --output_dir "$OUTPUT/merged"
echo "merged $ckpt -> $OUTPUT/merged"
