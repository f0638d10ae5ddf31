#!/usr/bin/env bash
# The booking world (examples/booking, issue 34) on one H100/H200, phase by phase: base model, SFT warm
# start on the oracle's demonstrations (also the SFT-only baseline), GRPO from the SFT model (LoRA,
# colocated vLLM, Qwen2.5-Coder-0.5B-Instruct), the checkpoint chosen on val, scored on test and ood.
# From the repository root, after the GPU kit of benchmarks/README.md is installed (/tmp/site, /tmp/qwen05):
#   bash benchmarks/booking/h200.sh PHASE OUT_DIR         (benchmarks/booking/pipeline.sh runs them all)
# Phases, in order (one device command each, < 10 min; /tmp persists while the machine stays warm):
#   prepare       data/{train,val,test,ood}.jsonl (committed; rebuilt if absent) and the eval set
#                 (test + ood + val, `split` naming each) -> /tmp/booking/eval.jsonl               seconds
#   eval-base     base model, greedy, on the eval set                                             ~2 min
#   sft           examples/booking/sft.sh: DEMOS (1000) oracle demonstrations, LoRA SFT, merged
#                 into /tmp/booking-sft-model                                                      ~3-4 min
#   eval-sft      the SFT model (the SFT-only baseline) on the eval set                           ~2 min
#   train         GRPO from the SFT model, run RUN (/tmp/bk-s$SEED), SEED (1), STEPS (60), saves
#                 every SAVE_STEPS (10); stops at TRAIN_TIMEOUT (540 s), run it again to resume    ~9 min a call
#   select        every saved checkpoint of RUN on val (greedy, one engine for all), beside the SFT
#                 model's val rows of eval-sft (step 0); the best val success wins (then constraints,
#                 then the earliest), "sft"
#                 when none beats the SFT model -> RUN-best.txt, OUT/validation-s$SEED.json        ~1.5 min
#   eval-trained  the chosen checkpoint on the eval set -> OUT/eval-trained-s$SEED.*               ~2 min
# Each eval phase writes OUT/eval-NAME.json (the eval CLI's metrics, by split and by type), OUT/report-NAME.md
# and .json (report.py: per split/type success, each constraint, tool calls, turns) and the trajectories.
# Knobs: BASE_MODEL (/tmp/qwen05), MODEL_TYPE (qwen2), TEMPLATE (qwen2_5), ENGINE (vllm), RUNS (/tmp: where
# runs and models live), GPU_UTIL (eval's vLLM share, 0.2), VLLM_UTIL / MICRO_BATCH / GRAD_ACC / BETA / LR /
# USE_VLLM (train.sh), EVAL_ROWS (prepare: rows of each split scored; a CPU check), TRAIN_FLAGS and SFT_FLAGS (extra swift flags, later flags
# win), DEVICE_ENV (/tmp/device_env.sh, sourced when present). A CPU check of every phase with a tiny model:
# benchmarks/booking/RESULTS.md ("CPU check").
set -euo pipefail
phase=${1:?phase}; out=${2:?out dir}
DEVICE_ENV=${DEVICE_ENV:-/tmp/device_env.sh}
[ -f "$DEVICE_ENV" ] && source "$DEVICE_ENV" >/dev/null
source benchmarks/vllm_start.sh  # vllm_start LOG CMD: once more when vLLM's start-up lost a memory race
export PYTHONPATH="$PWD:${PYTHONPATH:-}" RLFACTORY_CACHE=${RLFACTORY_CACHE:-/tmp/rlf-cache}
export MODEL_TYPE=${MODEL_TYPE:-qwen2} TEMPLATE=${TEMPLATE:-qwen2_5} ENGINE=${ENGINE:-vllm}
BASE_MODEL=${BASE_MODEL:-/tmp/qwen05} RUNS=${RUNS:-/tmp} SEED=${SEED:-1}
DATA=examples/booking/data EVAL_SET=$RUNS/booking/eval.jsonl VAL_SET=$RUNS/booking/val.jsonl SFT_MODEL=$RUNS/booking-sft-model
RUN=$RUNS/bk-s$SEED
read -ra train_flags <<< "${TRAIN_FLAGS:-}"; read -ra sft_flags <<< "${SFT_FLAGS:-}"
mkdir -p "$out"

evaluate() {  # NAME MODEL [ADAPTERS] [DATASET]: one engine, the metrics and report.py's tables into OUT
  local name=$1 model=$2 adapters=${3:-} dataset=${4:-$EVAL_SET} dir=$RUNS/booking-eval-$1
  rm -rf "$dir"
  MODEL=$model ADAPTERS=$adapters DATASET=$dataset GPU_UTIL=${GPU_UTIL:-0.2} \
    vllm_start "$out/eval-$name.log" bash examples/booking/eval.sh "$dir"
  if [ -f "$dir/metrics.json" ]; then
    cp "$dir/metrics.json" "$out/eval-$name.json"
    cp "$dir/report.md" "$out/report-$name.md"; cp "$dir/report.json" "$out/report-$name.json"
    gzip -c "$dir/trajectories.jsonl" > "$out/trajectories-$name.jsonl.gz"
  fi
}
last_checkpoint() { ls -d "$RUN"/v*/checkpoint-* 2>/dev/null | sort -V | tail -1 || true; }  # none: empty

case "$phase" in
  prepare)
    [ -f "$DATA/ood.jsonl" ] || python3 examples/booking/build_data.py
    mkdir -p "$(dirname "$EVAL_SET")"
    rows=${EVAL_ROWS:-100000}  # rows of each split scored (a CPU check takes a few)
    head -n "$rows" "$DATA/val.jsonl" > "$VAL_SET"
    for split in test ood val; do head -n "$rows" "$DATA/$split.jsonl"; done > "$EVAL_SET.$$" && mv "$EVAL_SET.$$" "$EVAL_SET"
    wc -l "$DATA"/*.jsonl "$EVAL_SET" ;;
  eval-base) evaluate base "$BASE_MODEL" ;;
  sft)
    rm -rf "$RUNS/booking-sft"
    MODEL=$BASE_MODEL OUTPUT=$RUNS/booking-sft bash examples/booking/sft.sh "${sft_flags[@]}" > "$out/sft.log" 2>&1
    rm -rf "$SFT_MODEL" && mv "$RUNS/booking-sft/merged" "$SFT_MODEL"
    cp "$RUNS"/booking-sft/v*/logging.jsonl "$out/logging-sft.jsonl" ;;
  eval-sft) evaluate sft "$SFT_MODEL" ;;
  train)  # resumable: the LoRA weights and step count come back, not the optimizer (deepsearch h200.sh says why)
    last=$(last_checkpoint); resume=(); [ -n "$last" ] && resume=(--resume_from_checkpoint "$last" --resume_only_model true)
    copy_logs() { for d in "$RUN"/v*; do cp "$d/logging.jsonl" "$out/logging-s$SEED-${d##*/}.jsonl" 2>/dev/null || true; done; }
    (while sleep 15; do copy_logs; done) > /dev/null 2>&1 & copier=$!
    rc=0
    MODEL=$SFT_MODEL OUTPUT=$RUN SEED=$SEED timeout "${TRAIN_TIMEOUT:-540}" bash examples/booking/train.sh "${resume[@]}" \
      "${train_flags[@]}" > "$out/train-s$SEED-$(date +%s).log" 2>&1 || rc=$?
    kill "$copier"; copy_logs
    # 124: stopped at TRAIN_TIMEOUT, resumable; anything else is a crash and must not pass for a finished run
    [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || { echo "train.sh failed (exit $rc)" >&2; exit "$rc"; } ;;
  select)  # the SFT model (step 0) and every finished checkpoint of RUN on val; the best -> RUN-best.txt
    pending=(); for ckpt in $(ls -d "$RUN"/v*/checkpoint-* 2>/dev/null | sort -V); do
      [ -f "$ckpt/trainer_state.json" ] && pending+=("$ckpt"); done
    [ -f "$RUNS/booking-eval-sft/report.json" ] || { echo "select needs eval-sft first (its val rows are step 0)" >&2; exit 2; }
    [ "${#pending[@]}" -eq 0 ] || evaluate "val-s$SEED" "$SFT_MODEL" "${pending[*]}" "$VAL_SET"
    python3 - "$RUNS" "$SEED" "$RUN-best.txt" "$out/validation-s$SEED.json" "${pending[@]}" <<'PY'
import json, pathlib, sys
runs, seed, best_file, report, *checkpoints = sys.argv[1:]
def score(report_file, step, checkpoint):  # report.py's numbers over the val rows
    [table] = json.loads(pathlib.Path(report_file).read_text()).values()  # report.py: {folder: table}
    val = table["val/all"]
    return {"step": step, "checkpoint": checkpoint, **{k: val[k] for k in ("success", "constraints", "tool_calls", "turns")}}
scores = [score(f"{runs}/booking-eval-sft/report.json", 0, "sft")]  # eval-sft scored val beside test and ood
folder = pathlib.Path(f"{runs}/booking-eval-val-s{seed}")
for ckpt in checkpoints:  # several adapters: one folder each; one adapter: the run's folder itself
    found = folder / pathlib.Path(ckpt).name / "report.json" if len(checkpoints) > 1 else folder / "report.json"
    if found.exists():
        scores.append(score(found, int(ckpt.rsplit("-", 1)[1]), ckpt))
best = max(scores, key=lambda s: (s["success"], s["constraints"], -s["step"]))
for s in scores:
    print(f"step {s['step']:>4}  val success {s['success']:.3f}  constraints {s['constraints']:.3f}{'  <- best' if s is best else ''}")
pathlib.Path(best_file).write_text(best["checkpoint"] + "\n")
pathlib.Path(report).write_text(json.dumps({"best": best, "scores": scores}, indent=1))
PY
    ;;
  eval-trained)  # the checkpoint select chose ("sft": none beat the SFT model); the last one without select
    ckpt=$(cat "$RUN-best.txt" 2>/dev/null || last_checkpoint); echo "$ckpt" > "$out/checkpoint-s$SEED.txt"
    evaluate "trained-s$SEED" "$SFT_MODEL" "$([ "$ckpt" = sft ] || echo "$ckpt")" ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
