#!/usr/bin/env bash
# The committed DeepSearch run on one H200, phase by phase (each phase is one device command of < 10 min;
# /tmp persists between them while the machine stays warm). From the repository root, after the GPU kit
# of ../shared/gpu/README.md is installed (/tmp/site, /tmp/qwen05):
#   bash benchmarks/deepsearch/h200.sh prepare|eval-base|train|eval-trained  OUT_DIR
set -euo pipefail
phase=${1:?phase}; out=${2:?out dir}
source /tmp/device_env.sh >/dev/null
export PYTHONPATH="$PWD:$PYTHONPATH" RLFACTORY_CACHE=/tmp/rlf-cache
export MODEL=/tmp/qwen05 MODEL_TYPE=qwen2 TEMPLATE=qwen2_5 ENGINE=vllm
mkdir -p "$out"
case "$phase" in
  prepare)  # the held-out questions (never committed) and the BM25 index
    python3 examples/deepsearch/build_data.py --holdout 300 --train 0 --test 0 --out /tmp/holdout
    python3 -m swift_rlfactory.retrieval.server build --backend bm25 ;;
  eval-base)
    bash examples/deepsearch/eval.sh /tmp/eval-base-test > "$out/eval-base-test.log" 2>&1
    DATASET=/tmp/holdout/holdout.jsonl bash examples/deepsearch/eval.sh /tmp/eval-base-holdout \
      > "$out/eval-base-holdout.log" 2>&1
    cp /tmp/eval-base-test/metrics.json "$out/eval-base-test.json"
    cp /tmp/eval-base-holdout/metrics.json "$out/eval-base-holdout.json" ;;
  train)  # resumable: run it again to continue from the last checkpoint
    last=$(ls -d /tmp/ds/v*/checkpoint-* 2>/dev/null | sort -t- -k2 -n | tail -1 || true)
    resume=(); [ -n "$last" ] && resume=(--resume_from_checkpoint "$last")
    copy_logs() { for d in /tmp/ds/v*; do cp "$d/logging.jsonl" "$out/logging-${d##*/}.jsonl" 2>/dev/null || true; done; }
    # Copy the step logs every 15 s: a device command cut short (time limit, budget) still returns them.
    (while sleep 15; do copy_logs; done) & copier=$!
    OUTPUT=/tmp/ds timeout "${TRAIN_TIMEOUT:-560}" bash examples/deepsearch/train.sh "${resume[@]}" \
      > "$out/train-$(date +%s).log" 2>&1 || true
    kill "$copier"; copy_logs ;;
  eval-trained)
    ckpt=$(ls -d /tmp/ds/v*/checkpoint-* | sort -t- -k2 -n | tail -1)
    echo "$ckpt" > "$out/checkpoint.txt"
    ADAPTERS=$ckpt bash examples/deepsearch/eval.sh /tmp/eval-trained-test > "$out/eval-trained-test.log" 2>&1
    ADAPTERS=$ckpt DATASET=/tmp/holdout/holdout.jsonl bash examples/deepsearch/eval.sh /tmp/eval-trained-holdout \
      > "$out/eval-trained-holdout.log" 2>&1
    cp /tmp/eval-trained-test/metrics.json "$out/eval-trained-test.json"
    cp /tmp/eval-trained-holdout/metrics.json "$out/eval-trained-holdout.json" ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
