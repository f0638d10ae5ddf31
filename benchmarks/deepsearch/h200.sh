#!/usr/bin/env bash
# The committed DeepSearch run on one H200, phase by phase (each phase is one device command of < 10 min;
# /tmp persists between them while the machine stays warm). From the repository root, after the GPU kit
# of ../shared/gpu/README.md is installed (/tmp/site, /tmp/qwen05):
#   bash benchmarks/deepsearch/h200.sh prepare|eval-base|sft|eval-sft|select|train|eval-trained  OUT_DIR
# The recipe is base -> warm-start SFT (sft.sh, merged into /tmp/qwen05-sft) -> GRPO from the SFT model.
# The train split is cut in two: SFT demonstrations from the first 1,000 questions; GRPO on those of the
# other 1,000 that the SFT model solves in some but not all of 4 samples (`swift-rlfactory select`), the
# only groups GRPO gets a gradient from.
# Each eval phase scores the test split and the never-committed holdout questions.
set -euo pipefail
phase=${1:?phase}; out=${2:?out dir}
source /tmp/device_env.sh >/dev/null
export PYTHONPATH="$PWD:$PYTHONPATH" RLFACTORY_CACHE=/tmp/rlf-cache
export MODEL=/tmp/qwen05 MODEL_TYPE=qwen2 TEMPLATE=qwen2_5 ENGINE=vllm
mkdir -p "$out"

evaluate() {  # NAME MODEL [ADAPTERS]: test + holdout in one run (one vLLM start-up), scored per split and hops
  MODEL=$2 ADAPTERS=${3:-} DATASET=/tmp/eval-sets.jsonl GROUP_BY="split hops" \
    bash examples/deepsearch/eval.sh "/tmp/eval-$1" > "$out/eval-$1.log" 2>&1
  cp "/tmp/eval-$1/metrics.json" "$out/eval-$1.json"  # by_split: test and holdout; by_hops: 1 and 2
}
last_checkpoint() {  # the GRPO run's highest step (sort -V: checkpoint-100 after checkpoint-80)
  ls -d /tmp/ds/v*/checkpoint-* | sort -V | tail -1
}
case "$phase" in
  prepare)  # the held-out questions (never committed), the SFT/GRPO halves of train, the BM25 index
    python3 examples/deepsearch/build_data.py --holdout 300 --train 0 --test 0 --out /tmp/holdout
    python3 - <<'PY'  # the evaluation set: test and holdout rows, each tagged with its split
import json
with open("/tmp/eval-sets.jsonl", "w") as out:
    for split, path in (("test", "examples/deepsearch/data/test.jsonl"), ("holdout", "/tmp/holdout/holdout.jsonl")):
        for line in open(path):
            out.write(json.dumps({**json.loads(line), "split": split}) + "\n")
PY
    mkdir -p /tmp/split
    head -n 1000 examples/deepsearch/data/train.jsonl > /tmp/split/sft.jsonl
    tail -n +1001 examples/deepsearch/data/train.jsonl > /tmp/split/pool.jsonl
    python3 -m swift_rlfactory.retrieval.server build --backend bm25 ;;
  eval-base) evaluate base /tmp/qwen05 ;;
  sft)
    DATASET=/tmp/split/sft.jsonl OUTPUT=/tmp/sft bash examples/deepsearch/sft.sh > "$out/sft.log" 2>&1
    rm -rf /tmp/qwen05-sft && mv /tmp/sft/merged /tmp/qwen05-sft
    cp /tmp/sft/v*/logging.jsonl "$out/logging-sft.jsonl" ;;
  eval-sft) evaluate sft /tmp/qwen05-sft ;;
  select)  # GRPO's questions: the pool questions the SFT model solves sometimes
    # 600 of the pool's 1,000 questions x 4 samples: ~2,400 episodes, a few minutes of device time.
    MODEL=/tmp/qwen05-sft DATASET=/tmp/split/pool.jsonl SAMPLES=4 TEMPERATURE=1.0 LIMIT=600 CONCURRENCY=128 \
      bash examples/deepsearch/eval.sh /tmp/eval-pool > "$out/eval-pool.log" 2>&1
    cp /tmp/eval-pool/metrics.json "$out/eval-pool.json"
    python3 -m swift_rlfactory.cli select --eval /tmp/eval-pool --dataset /tmp/split/pool.jsonl \
      --out /tmp/split/grpo.jsonl | tee "$out/select.log" ;;
  train)  # resumable: run it again to continue from the last checkpoint
    # Resuming restores the LoRA weights and the step count but not the optimizer: on the H200, loading the
    # saved fused-AdamW state crashed the first step after a resume ("params, grads, exp_avgs, and
    # exp_avg_sqs must have same dtype, device, and layout", results/2026-12-01-select-grpo/train-resume.log).
    last=$(last_checkpoint 2>/dev/null || true)
    resume=(); [ -n "$last" ] && resume=(--resume_from_checkpoint "$last" --resume_only_model true)
    copy_logs() { for d in /tmp/ds/v*; do cp "$d/logging.jsonl" "$out/logging-${d##*/}.jsonl" 2>/dev/null || true; done; }
    # Copy the step logs every 15 s: a device command cut short (time limit, budget) still returns them.
    (while sleep 15; do copy_logs; done) & copier=$!
    MODEL=/tmp/qwen05-sft DATASET=/tmp/split/grpo.jsonl OUTPUT=/tmp/ds timeout "${TRAIN_TIMEOUT:-580}" bash examples/deepsearch/train.sh "${resume[@]}" \
      > "$out/train-$(date +%s).log" 2>&1 || true
    kill "$copier"; copy_logs ;;
  eval-trained)
    ckpt=$(last_checkpoint)
    echo "$ckpt" > "$out/checkpoint.txt"
    evaluate trained /tmp/qwen05-sft "$ckpt" ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
