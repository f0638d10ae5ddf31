#!/usr/bin/env bash
# One vLLM engine serving several LoRA checkpoints (`eval --adapters A B`, what h200.sh validate does with
# every checkpoint saved since its last call) against one engine per checkpoint: the same greedy answers?
# No GPU run had needed the one-engine path before (each validation found one new checkpoint).
#
# On the GPU machine, from the repository root, after the kit of benchmarks/README.md ("The kit in 10 calls"):
#   bash benchmarks/gpu_pipeline/one_engine/h200.sh OUT      # ~4 min: 2 adapters, 3 engine start-ups
# Writes OUT/compare.json (python compare.py) and each evaluation's metrics and log.
# LIMIT (100): validation questions; SCALES ("0.005 0.02"): the adapters' B noise (make_adapters.py).
set -euo pipefail
OUT=${1:?usage: h200.sh OUT}
mkdir -p "$OUT"
source /tmp/device_env.sh >/dev/null  # as benchmarks/deepsearch/h200.sh: each device call is a new shell
export PYTHONPATH="$PWD:${PYTHONPATH:-}"  # the search tool's MCP server imports swift_rlfactory
here=benchmarks/gpu_pipeline/one_engine
python3 -m swift_rlfactory.retrieval.server build --backend bm25 > "$OUT/index.log" 2>&1
# shellcheck disable=SC2086
python3 "$here/make_adapters.py" /tmp/qwen05 /tmp/oe-lora ${SCALES:-0.005 0.02} > "$OUT/adapters.log" 2>&1
adapters=$(ls -d /tmp/oe-lora/lora-* | sort -V)
run() {  # NAME ADAPTERS...: the validation questions with these checkpoints through one engine
  local name=$1 t0; shift; t0=$(date +%s)
  MODEL=/tmp/qwen05 ADAPTERS="$*" DATASET=examples/deepsearch/data/val.jsonl GROUP_BY="hops family" \
    LIMIT=${LIMIT:-100} GPU_UTIL=0.3 bash examples/deepsearch/eval.sh "/tmp/oe/$name" > "$OUT/$name.log" 2>&1
  echo "$name: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/seconds.txt"
}
rm -rf /tmp/oe
# shellcheck disable=SC2086
run one-engine $adapters
for a in $adapters; do run "single-${a##*/}" "$a"; done
python3 "$here/compare.py" /tmp/oe $adapters > "$OUT/compare.json"
cat "$OUT/compare.json"
for d in /tmp/oe/*/; do mkdir -p "$OUT/${d%/}" && cp "$d"metrics.json "$OUT/${d%/}/" 2>/dev/null || true; done
