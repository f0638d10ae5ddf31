#!/usr/bin/env bash
# Code GRPO: single GPU, LoRA, colocated vLLM. The model writes a function, may test it with the sandboxed
# run_python tool, and is rewarded with the share of hidden tests its final function passes. From the
# repository root (bubblewrap must be installed: apt-get install bubblewrap):
#   MODEL=/path/to/Qwen2.5-Coder-0.5B-Instruct bash examples/code/train.sh [extra swift rlhf flags]
# Every knob (VLLM_EAGER, SLEEP_LEVEL, VLLM_UTIL, ...): examples/grpo.sh.
set -euo pipefail
OUTPUT=${OUTPUT:-output/code} DATASET=${DATASET:-examples/code/data/train.jsonl}
RLFACTORY_ENV=${RLFACTORY_ENV:-examples/code/env.yaml}
MAX_TURNS=4 MAX_LENGTH=4096 MAX_COMPLETION=${MAX_COMPLETION:-384} SAVE_LIMIT=${SAVE_LIMIT-3}
source "$(dirname "$0")/../grpo.sh"
