#!/usr/bin/env bash
# RL from the base model, no SFT: GRPO on arithmetic word problems with the calculator tool
# (examples/arithmetic/), Qwen2.5-Coder-0.5B-Instruct on one H200. Each phase is one device command of
# < 10 min; /tmp persists between them while the machine stays warm. From the repository root, after the
# GPU kit of ../shared/gpu/README.md is installed (/tmp/site, /tmp/qwen05):
#   [ENV_FILE=examples/arithmetic/env.yaml] [TRAIN_DATA=examples/arithmetic/data/train_mix.jsonl] \
#     bash benchmarks/rl_from_base/h200.sh eval-base|train|eval-checkpoints|curve  OUT_DIR
#
# TRAIN_DATA (default data/train.jsonl, the eight one-pattern templates) is train.sh's DATASET;
# data/train_mix.jsonl is the 24-family mix of varied phrasings, data/train_chain.jsonl the mix with a
# third of chains of derived quantities (build_data.py says why). Each
# ENV_FILE x TRAIN_DATA pair has its own run and evals folders, so two runs never share checkpoints.
# DYNAMIC_SAMPLE=1 (train.sh: regenerate the groups whose samples all scored alike) is a run of its own too.
#
#   eval-base         base model, greedy, 300 held-out + 200 OOD + 300 mix + 100 chains  ~2.5 min
#   probe             base model, greedy, on the first PROBE_ROWS (200) problems of TRAIN_DATA:
#                     does it follow ENV_FILE's protocol? (the GPU pipeline's AR_PROBE picks an
#                     environment on it; training problems, so the choice spends no held-out one) ~1 min
#   train             GRPO up to STEPS (200), checkpoint every 25 steps; stops itself
#                     at TRAIN_TIMEOUT (540 s) - run it again to resume                  ~9 min a call, 2 calls
#   eval-checkpoints  every STRIDE-th (50) saved checkpoint not scored yet, greedy,
#                     until EVAL_BUDGET (500 s) is spent - rerun, or STRIDE=25, for more  ~1.3 min a checkpoint
#   (VLLM_UTIL, MICRO_BATCH, GRAD_ACC for train.sh and EVAL_UTIL (0.5) for the evals let phases share the GPU)
#   curve             learning curve: OUT/curve.png, curve.md, curve.json from every eval  seconds
#
# Every eval writes OUT/eval-<name>.json (metrics.json of the eval CLI: em, tool_calls per question, by
# family and steps) and keeps a copy in /tmp/arith-evals (a device command returns at most 8 files, so
# `curve` gathers them all); train copies ms-swift's logging.jsonl into OUT every 15 s, so a cut-short
# command keeps it. `python benchmarks/rl_from_base/curve.py DIR` does the same on the CPU machine from
# the returned eval-*.json files.
set -euo pipefail
phase=${1:?phase}; out=${2:?out dir}
mkdir -p "$out"
source /tmp/device_env.sh >/dev/null
source benchmarks/vllm_start.sh  # vllm_start LOG CMD: once more when vLLM's start-up lost a memory race
export PYTHONPATH="$PWD:$PYTHONPATH" RLFACTORY_CACHE=/tmp/rlf-cache
# One eval set, one engine start-up: the 300 held-out problems (our templates, never trained on), the
# OOD problems (data/ood.jsonl: GSM-Symbolic word problems, phrased unlike any template, never trained on)
# the 300 held-out problems of the mix (data/heldout_mix.jsonl: its 16 new families) and the 100 held-out
# chains (data/heldout_chain.jsonl: stories of derived quantities), `split` naming each.
for f in train_mix heldout_mix train_chain heldout_chain; do  # built, not committed (seed 0: the same bytes)
  [ -f "examples/arithmetic/data/$f.jsonl" ] || python3 examples/arithmetic/build_data.py --ood 0 > /dev/null
done
EVAL_SET=/tmp/arith-eval-set.jsonl
extra=(); for f in ood heldout_mix heldout_chain; do
  [ -f "examples/arithmetic/data/$f.jsonl" ] && extra+=("examples/arithmetic/data/$f.jsonl"); done
python3 examples/deepsearch/eval_sets.py "$EVAL_SET.$$" examples/arithmetic/data/heldout.jsonl "${extra[@]}" > /dev/null
mv "$EVAL_SET.$$" "$EVAL_SET"  # atomic: phases running side by side never read a half-written file
# env_hint.yaml: the calculator's result repeats the protocol's last step, so the base model answers after
# the tool (EM 0.62 on CPU) - the signal GRPO needs; env.yaml, the bare calculator: base EM 0.00.
ENV_FILE=${ENV_FILE:-examples/arithmetic/env_hint.yaml}
TRAIN_DATA=${TRAIN_DATA:-examples/arithmetic/data/train.jsonl}
[ -f "$TRAIN_DATA" ] || { echo "TRAIN_DATA: no file $TRAIN_DATA" >&2; exit 2; }
# MAX_TOKENS (192): tokens a turn may write, in training and in every evaluation alike; a program
# (env_python.yaml) takes more than one expression.
MAX_TOKENS=${MAX_TOKENS:-192}
if grep -q run_python "$ENV_FILE"; then  # env_python.yaml: every call runs in bubblewrap
  source benchmarks/bwrap.sh  # from BWRAP_DEBS (.bwrap) when the image has none
  case "$phase" in eval-base|probe|train) bwrap_probe "$ENV_FILE" "$out/probe.log" ;; esac
fi
tag=$(basename "$ENV_FILE" .yaml)-$(basename "$TRAIN_DATA" .jsonl)  # e.g. env_hint-train_mix
[ "${DYNAMIC_SAMPLE:-0}" = 1 ] && tag+=-dyn  # train.sh's dynamic sampling: a run of its own
[ "$MAX_TOKENS" = 192 ] || tag+=-t$MAX_TOKENS  # so is a turn of another length (its checkpoints differ)
RUN=/tmp/arith-$tag EVALS=/tmp/arith-evals-$tag
mkdir -p "$EVALS"

evaluate() {  # NAME [ADAPTERS]: greedy on the held-out and OOD splits, scored per split, family and steps
  local args=(--env "$ENV_FILE" --model /tmp/qwen05 --model-type qwen2 --template qwen2_5
              --engine vllm --dataset "$EVAL_SET" --output "/tmp/eval-arith-$tag-$1" --samples 1 --temperature 0
              --max-tokens "$MAX_TOKENS" --max-length 2048 --concurrency 128 --group-by split --group-by family --group-by steps
              --gpu-memory-utilization "${EVAL_UTIL:-0.5}")
  [ -n "${2:-}" ] && args+=(--adapters "$2")
  vllm_start "$out/eval.log" python3 -m swift_rlfactory.cli eval "${args[@]}"
  cp "/tmp/eval-arith-$tag-$1/metrics.json" "$EVALS/eval-$1.json"
  cp "$EVALS/eval-$1.json" "$out/"
  gzip -c "/tmp/eval-arith-$tag-$1/trajectories.jsonl" > "$out/trajectories-$1.jsonl.gz"  # for reading failures
  python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(sys.argv[2], *(f\"{k} em {g['em']:.3f} tool calls/question {g['tool_calls']:.2f}\" for k, g in m['by_split'].items()))" \
    "$out/eval-$1.json" "$1"
}
case "$phase" in
  eval-base) evaluate step-0 ;;
  probe)  # rows of the training file, as one split "train" (eval_sets.py), in place of the eval set
    head -n "${PROBE_ROWS:-200}" "$TRAIN_DATA" > "/tmp/arith-probe-rows-$tag.jsonl"
    python3 examples/deepsearch/eval_sets.py "/tmp/arith-probe-$tag.jsonl" "train=/tmp/arith-probe-rows-$tag.jsonl" > /dev/null
    EVAL_SET=/tmp/arith-probe-$tag.jsonl evaluate probe ;;
  train)  # resumable: LoRA weights and step count come back, the optimizer starts fresh (see deepsearch)
    last=$(ls -d $RUN/v*/checkpoint-* 2>/dev/null | sort -V | tail -1 || true)
    resume=(); [ -n "$last" ] && resume=(--resume_from_checkpoint "$last" --resume_only_model true)
    copy_logs() { for d in $RUN/v*; do cp "$d/logging.jsonl" "$out/logging-${d##*/}.jsonl" 2>/dev/null || true; done; }
    (while sleep 15; do copy_logs; done) > /dev/null 2>&1 & copier=$!
    start=$(date +%s)
    rc=0
    RLFACTORY_ENV=$ENV_FILE DATASET=$TRAIN_DATA MAX_COMPLETION=$MAX_TOKENS MODEL=/tmp/qwen05 OUTPUT=$RUN STEPS=${STEPS:-200} timeout "${TRAIN_TIMEOUT:-540}" \
      bash examples/arithmetic/train.sh "${resume[@]}" > "$out/train-$start.log" 2>&1 || rc=$?
    kill "$copier"; copy_logs
    # 124: stopped at TRAIN_TIMEOUT (run the phase again to resume); anything else is a crash
    [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || { echo "train.sh failed (exit $rc): see $out/train-$start.log" >&2; exit "$rc"; }
    echo "train: $(( $(date +%s) - start )) s, checkpoints: $(ls -d $RUN/v*/checkpoint-* 2>/dev/null | sort -V | xargs -n1 basename | tr '\n' ' ')" ;;
  eval-checkpoints)
    start=$(date +%s)
    for ckpt in $(ls -d $RUN/v*/checkpoint-* 2>/dev/null | sort -V); do
      step=${ckpt##*-}
      [ $(( step % ${STRIDE:-50} )) -eq 0 ] || continue
      [ -f "$EVALS/eval-step-$step.json" ] && continue
      [ -f "$ckpt/trainer_state.json" ] || continue  # still being written (this phase can run beside train)
      [ $(( $(date +%s) - start )) -lt "${EVAL_BUDGET:-500}" ] || { echo "budget spent: rerun for the rest"; break; }
      evaluate "step-$step" "$ckpt"
    done ;;
  curve) python3 benchmarks/rl_from_base/curve.py "$EVALS" --out "$out" ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
