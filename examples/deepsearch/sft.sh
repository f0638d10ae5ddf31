#!/usr/bin/env bash
# DeepSearch warm start: LoRA SFT on scripted search trajectories (build_sft.py), merged into a plain model
# folder that train.sh then starts GRPO from. From the repository root:
#   MODEL=/path/to/Qwen2.5-Coder-0.5B-Instruct OUTPUT=output/deepsearch-sft bash examples/deepsearch/sft.sh
#   MODEL=output/deepsearch-sft/merged bash examples/deepsearch/train.sh
# MICRO_BATCH x GRAD_ACC (default 16 x 1) is the batch; a smaller MICRO_BATCH needs less GPU memory.
# Why a warm start: see build_sft.py. Two epochs over ~1,700 episodes take about a minute on one H200.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
MODEL_TYPE=${MODEL_TYPE:-qwen2}
TEMPLATE=${TEMPLATE:-qwen2_5}
OUTPUT=${OUTPUT:-output/deepsearch-sft}
DATASET=${DATASET:-examples/deepsearch/data/train.jsonl}
SWIFT=${SWIFT:-"python3 -m swift.cli"}

# RECHECK (0-1, default 0): the share of two-hop demonstrations that search a wrong name first (build_sft.py)
# SINGLE_HOP (default: all): demonstrate only the first N single-hop questions, every two-hop one
single=(); [ -n "${SINGLE_HOP:-}" ] && single=(--single-hop "$SINGLE_HOP")
python3 examples/deepsearch/build_sft.py --dataset "$DATASET" --template "$TEMPLATE" --out "$OUTPUT/sft.jsonl" \
  --recheck "${RECHECK:-0}" "${single[@]}"
$SWIFT.sft --model "$MODEL" --model_type "$MODEL_TYPE" --template "$TEMPLATE" --check_model false \
  --dataset "$OUTPUT/sft.jsonl" \
  --tuner_type lora --lora_rank 32 --lora_alpha 64 --target_modules all-linear \
  --torch_dtype bfloat16 --learning_rate 1e-4 --warmup_ratio 0.05 --num_train_epochs 2 \
  --per_device_train_batch_size "${MICRO_BATCH:-16}" --gradient_accumulation_steps "${GRAD_ACC:-1}" --max_length 4096 --logging_steps 5 --save_only_model true \
  --output_dir "$OUTPUT" --dataloader_num_workers 0 --dataset_num_proc 1 --report_to none --seed 42 "$@"
ckpt=$(ls -d "$OUTPUT"/v*/checkpoint-* | sort -V | tail -1)
$SWIFT.export --adapters "$ckpt" --merge_lora true --output_dir "$OUTPUT/merged"
echo "merged $ckpt -> $OUTPUT/merged"
