#!/usr/bin/env bash
# Booking-world GRPO: single GPU, LoRA, colocated vLLM, from the warm-start model of sft.sh. From the
# repository root:
#   MODEL=output/booking-sft/merged bash examples/booking/train.sh [extra swift rlhf flags]
# SEED (42): the run's seed (data order, sampling, LoRA init); two seeds are two runs of the same recipe.
# VLLM_UTIL, MICRO_BATCH x GRAD_ACC let several runs share one GPU (benchmarks/booking/pipeline.sh runs two
# seeds side by side); USE_VLLM=false is a CPU check; every knob: examples/grpo.sh.
# A trajectory is ~3 turns (search, book, answer); the completion holds the observations too (the oracle
# needs 430 tokens, at most 670), so it gets 1,024.
set -euo pipefail
OUTPUT=${OUTPUT:-output/booking} DATASET=${DATASET:-examples/booking/data/train.jsonl}
RLFACTORY_ENV=${RLFACTORY_ENV:-examples/booking/env.yaml}
MAX_TURNS=6 MAX_LENGTH=4096 MAX_COMPLETION=${MAX_COMPLETION:-1024} STEPS=${STEPS:-60} BETA=${BETA:-0.02}
VLLM_UTIL=${VLLM_UTIL:-0.3} SAVE_LIMIT=${SAVE_LIMIT-10}
source "$(dirname "$0")/../grpo.sh"
