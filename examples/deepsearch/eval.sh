#!/usr/bin/env bash
# Evaluate a model (optionally with a LoRA adapter) on the DeepSearch test split. From the repository root:
#   MODEL=/path/to/model [ADAPTERS=output/deepsearch/v0-.../checkpoint-120] bash examples/deepsearch/eval.sh OUT_DIR
#   (ADAPTERS="A B ...": several checkpoints through one engine, each scored into OUT_DIR/<folder name>/)
#   BASE_URL=http://host:8000/v1 SERVED_MODEL=name [API_KEY=...] bash examples/deepsearch/eval.sh OUT_DIR
# Optional: EVAL_ENV (environment file), DATASET, SAMPLES, TEMPERATURE, LIMIT (first N questions), CONCURRENCY (episodes in flight),
# GROUP_BY (columns, space-separated; default hops: single- vs two-hop scores; GROUP_BY= for data without
# that column, e.g. NQ), EXTRA_EVAL (comma-separated files scored beside DATASET in the same run, e.g.
# EXTRA_EVAL=mine.jsonl,nq_dev.jsonl; our rows or FlashRAG {question, golden_answers}; each reported as
# its own value of the `split` column, named by the file's stem - see eval_sets.py; refused with LIMIT,
# or when DATASET already has that split, i.e. was merged with it before), GPU_UTIL (vLLM's share
# of GPU memory, default 0.9; lower it to run beside training), SHIFTS (`--shifts`, e.g. all: the set scored
# again under each phrasing shift, docs/eval.md), SHIFT_MARGIN, REFERENCE (an earlier eval's metrics.json: the
# alarm's baseline), CHOOSE_BY (em | worst-shift: with several ADAPTERS, OUT_DIR/chosen.json names the best).
set -euo pipefail
OUT=${1:?usage: eval.sh OUT_DIR}
DATASET=${DATASET:-examples/deepsearch/data/test.jsonl}
GROUP_BY=${GROUP_BY-hops}
if [ -n "${EXTRA_EVAL:-}" ]; then
  # LIMIT keeps the merged file's first N rows: the extra files, merged after DATASET, would vanish unsaid
  [ -z "${LIMIT:-}" ] || { echo "eval.sh: LIMIT cuts the merged set to its first $LIMIT rows and would drop EXTRA_EVAL's files: give one of them, or shorten the files" >&2; exit 2; }
  mkdir -p "$OUT"
  IFS=, read -ra extra <<< "$EXTRA_EVAL"
  python3 examples/deepsearch/eval_sets.py "$OUT/eval-set.jsonl" "$DATASET" "${extra[@]}"
  DATASET=$OUT/eval-set.jsonl
  [[ " $GROUP_BY " == *" split "* ]] || GROUP_BY="split $GROUP_BY"
fi
if [ -n "${BASE_URL:-}" ]; then
  args=(--base-url "$BASE_URL" --served-model "${SERVED_MODEL:?set SERVED_MODEL with BASE_URL}")
  [ -n "${API_KEY:-}" ] && args+=(--api-key "$API_KEY")
else
  args=(--model "${MODEL:?set MODEL or BASE_URL}" --model-type "${MODEL_TYPE:-qwen2}" --engine "${ENGINE:-vllm}")
  # several folders, space-separated: one engine scores each into OUT_DIR/<folder name>/
  [ -n "${ADAPTERS:-}" ] && read -ra adapters <<< "$ADAPTERS" && args+=(--adapters "${adapters[@]}")
fi
args+=(--env "${EVAL_ENV:-examples/deepsearch/env.yaml}" --template "${TEMPLATE:-qwen2_5}" --dataset "$DATASET"
       --output "$OUT" --samples "${SAMPLES:-1}" --temperature "${TEMPERATURE:-0}" --max-tokens 256
       --max-length 4096 --concurrency "${CONCURRENCY:-64}")
[ -n "${GPU_UTIL:-}" ] && args+=(--gpu-memory-utilization "$GPU_UTIL")
[ -n "${LIMIT:-}" ] && args+=(--limit "$LIMIT")
[ -n "${SHIFTS:-}" ] && args+=(--shifts "$SHIFTS")
[ -n "${SHIFT_MARGIN:-}" ] && args+=(--shift-margin "$SHIFT_MARGIN")
[ -n "${REFERENCE:-}" ] && args+=(--reference "$REFERENCE")
[ -n "${CHOOSE_BY:-}" ] && args+=(--choose-by "$CHOOSE_BY")
for column in $GROUP_BY; do args+=(--group-by "$column"); done
python3 -m swift_rlfactory.cli eval "${args[@]}"
