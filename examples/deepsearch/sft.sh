#!/usr/bin/env bash
# DeepSearch warm start: LoRA SFT on scripted search trajectories (build_sft.py), merged into a plain model
# folder that train.sh then starts GRPO from. From the repository root:
#   MODEL=/path/to/Qwen2.5-Coder-0.5B-Instruct OUTPUT=output/deepsearch-sft bash examples/deepsearch/sft.sh
#   MODEL=output/deepsearch-sft/merged bash examples/deepsearch/train.sh
# MICRO_BATCH x GRAD_ACC (default 16 x 1) is the batch; a smaller MICRO_BATCH needs less GPU memory.
# Why a warm start: see build_sft.py. Two epochs over ~1,700 episodes take about a minute on one H200.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
TEMPLATE=${TEMPLATE:-qwen2_5}
OUTPUT=${OUTPUT:-output/deepsearch-sft}
DATASET=${DATASET:-examples/deepsearch/data/train.jsonl}

# RECHECK (0-1, default 0): the share of two-hop demonstrations that search a wrong name first (build_sft.py)
# SINGLE_HOP (default: all): demonstrate only the first N single-hop questions, every two-hop one
single=(); [ -n "${SINGLE_HOP:-}" ] && single=(--single-hop "$SINGLE_HOP")
python3 examples/deepsearch/build_sft.py --dataset "$DATASET" --template "$TEMPLATE" --out "$OUTPUT/sft.jsonl" \
  --recheck "${RECHECK:-0}" "${single[@]}"
source "$(dirname "$0")/../sft.sh"  # SFT_ROWS: $OUTPUT/sft.jsonl
