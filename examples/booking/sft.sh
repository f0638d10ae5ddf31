#!/usr/bin/env bash
# Booking-world warm start (and the SFT-only baseline): LoRA SFT on the oracle's demonstrations (demos.py),
# merged into a plain model folder that train.sh starts GRPO from. From the repository root:
#   MODEL=/path/to/Qwen2.5-Coder-0.5B-Instruct OUTPUT=output/booking-sft bash examples/booking/sft.sh
#   MODEL=output/booking-sft/merged bash examples/booking/train.sh
# DEMOS (1000): train rows demonstrated. MICRO_BATCH x GRAD_ACC (default 16 x 1) is the batch; EPOCHS (2).
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
TEMPLATE=${TEMPLATE:-qwen2_5}
OUTPUT=${OUTPUT:-output/booking-sft}
DATASET=${DATASET:-examples/booking/data/train.jsonl}

python3 examples/booking/demos.py --n "${DEMOS:-1000}" --dataset "$DATASET" --template "$TEMPLATE" --out "$OUTPUT/sft.jsonl"
source "$(dirname "$0")/../sft.sh"  # SFT_ROWS: $OUTPUT/sft.jsonl
