#!/usr/bin/env bash
# Evaluate a model (optionally with LoRA adapters) in the booking world, then write the per-task-type tables
# (report.py: success, each constraint, tool calls, turns). From the repository root:
#   MODEL=/path/to/model [ADAPTERS="ckpt-a ckpt-b"] bash examples/booking/eval.sh OUT_DIR
# DATASET (data/test.jsonl; a file with a `split` column, e.g. test and ood joined, is reported per split and
# type), LIMIT (first N rows), SAMPLES, TEMPERATURE (0: greedy), CONCURRENCY, GPU_UTIL (vLLM's share of GPU
# memory; lower it beside training), ENGINE (vllm; transformers for a CPU check), MAX_TOKENS (per turn, 384).
# Several ADAPTERS go through one engine, each scored into OUT_DIR/<folder name>/ with its own report.
set -euo pipefail
OUT=${1:?usage: eval.sh OUT_DIR}
args=(--model "${MODEL:?set MODEL}" --model-type "${MODEL_TYPE:-qwen2}" --engine "${ENGINE:-vllm}"
      --env "${EVAL_ENV:-examples/booking/env.yaml}" --template "${TEMPLATE:-qwen2_5}"
      --dataset "${DATASET:-examples/booking/data/test.jsonl}" --output "$OUT" --samples "${SAMPLES:-1}"
      --temperature "${TEMPERATURE:-0}" --max-tokens "${MAX_TOKENS:-384}" --max-length 4096
      --concurrency "${CONCURRENCY:-64}" --group-by split --group-by type)
[ -n "${ADAPTERS:-}" ] && read -ra adapters <<< "$ADAPTERS" && args+=(--adapters "${adapters[@]}")
[ -n "${GPU_UTIL:-}" ] && args+=(--gpu-memory-utilization "$GPU_UTIL")
[ -n "${LIMIT:-}" ] && args+=(--limit "$LIMIT")
python3 -m swift_rlfactory.cli eval "${args[@]}"
for dir in "$OUT" "$OUT"/*/; do  # one report per scored folder (the model, or each adapter)
  [ -f "$dir/trajectories.jsonl" ] || continue
  python3 examples/booking/report.py "$dir" --out "$dir/report.md" --json "$dir/report.json" > /dev/null
done
