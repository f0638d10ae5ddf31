#!/usr/bin/env bash
# Evaluate a model (optionally with a LoRA adapter) on the DeepSearch test split. From the repository root:
#   MODEL=/path/to/model [ADAPTERS=output/deepsearch/v0-.../checkpoint-120] bash examples/deepsearch/eval.sh OUT_DIR
# Optional: DATASET, SAMPLES, TEMPERATURE, LIMIT (first N questions), CONCURRENCY (episodes in flight),
# GROUP_BY (columns, space-separated; default hops: single- vs two-hop scores; GROUP_BY= for data without
# that column, e.g. NQ).
set -euo pipefail
MODEL=${MODEL:?set MODEL}
OUT=${1:?usage: eval.sh OUT_DIR}
DATASET=${DATASET:-examples/deepsearch/data/test.jsonl}
args=(--env examples/deepsearch/env.yaml --model "$MODEL" --model-type "${MODEL_TYPE:-qwen2}"
      --template "${TEMPLATE:-qwen2_5}" --engine "${ENGINE:-vllm}" --dataset "$DATASET" --output "$OUT"
      --samples "${SAMPLES:-1}" --temperature "${TEMPERATURE:-0}" --max-tokens 256 --max-length 4096 --concurrency "${CONCURRENCY:-64}")
[ -n "${ADAPTERS:-}" ] && args+=(--adapters "$ADAPTERS")
[ -n "${LIMIT:-}" ] && args+=(--limit "$LIMIT")
GROUP_BY=${GROUP_BY-hops}
for column in $GROUP_BY; do args+=(--group-by "$column"); done
python3 -m swift_rlfactory.cli eval "${args[@]}"
