#!/usr/bin/env bash
# Customer-service GRPO: single GPU, LoRA, colocated vLLM; the customer is the environment's `user:`.
# From the repository root:
#   MODEL=/path/to/Qwen2.5-0.5B-Instruct bash examples/customer_service/train.sh [extra swift rlhf flags]
# RLFACTORY_ENV: env.yaml (the scripted customer, default) or env_model_user.yaml (a model behind
# USER_BASE_URL, e.g. the same 0.5B served by `swift deploy`: benchmarks/customer_service/h200.sh).
# SEED (42), STEPS (100), VLLM_UTIL, MICRO_BATCH x GRAD_ACC and every other knob: examples/grpo.sh.
set -euo pipefail
OUTPUT=${OUTPUT:-output/customer_service} DATASET=${DATASET:-examples/customer_service/data/train.jsonl}
RLFACTORY_ENV=${RLFACTORY_ENV:-examples/customer_service/env.yaml}
MAX_TURNS=16 MAX_LENGTH=6144 MAX_COMPLETION=${MAX_COMPLETION:-1024} BETA=${BETA:-0.04}
SAVE_STEPS=${SAVE_STEPS:-20} SAVE_LIMIT=${SAVE_LIMIT-10}
source "$(dirname "$0")/../grpo.sh"
