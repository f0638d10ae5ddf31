#!/usr/bin/env bash
# DeepSearch GRPO: single GPU, LoRA, colocated vLLM. Run from the repository root:
#   MODEL=/path/to/Qwen2.5-Coder-0.5B-Instruct bash examples/deepsearch/train.sh [extra swift rlhf flags]
# Defaults are the settings of the committed H200 run (benchmarks/deepsearch/); see README.md beside
# this file for 4B/8B settings on one 80 GB GPU. Every knob (VLLM_UTIL, MICRO_BATCH x GRAD_ACC,
# DYNAMIC_SAMPLE, VLLM_EAGER, SLEEP_LEVEL, ...): examples/grpo.sh.
set -euo pipefail
OUTPUT=${OUTPUT:-output/deepsearch} DATASET=${DATASET:-examples/deepsearch/data/train.jsonl}
RLFACTORY_ENV=${RLFACTORY_ENV:-examples/deepsearch/env.yaml}
MAX_TURNS=4 MAX_LENGTH=4096 MAX_COMPLETION=${MAX_COMPLETION:-256} SAVE_LIMIT=${SAVE_LIMIT-3}
source "$(dirname "$0")/../grpo.sh"
