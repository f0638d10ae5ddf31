#!/usr/bin/env bash
# The committed DeepSearch run on one H200, phase by phase (each phase is one device command of < 10 min;
# /tmp persists between them while the machine stays warm). From the repository root, after the GPU kit
# of ../shared/gpu/README.md is installed (/tmp/site, /tmp/qwen05):
#   bash benchmarks/deepsearch/h200.sh PHASE OUT_DIR
# Phases, in order, with the device time each should take (one H200; each < 9 min):
#   prepare        holdout questions (never committed), the eval set, the SFT/GRPO halves, BM25 index  ~1.5 min
#   eval-base      base model on the eval set                                                          ~3 min
#   sft            examples/deepsearch/sft.sh on the first 1,000 train questions -> /tmp/qwen05-sft   ~3 min
#   eval-sft       SFT model on the eval set                                                           ~3 min
#   select         the pool (POOL_FILE) x 4 samples at T=1; the mixed ones, at most PER_STRATUM (60) per
#                  STRATIFY cell (hops,family): every family trained on, none dominating               ~4 min
#   train          GRPO from the SFT model (ENV_FILE: env_grpo.yaml = env_budget.yaml + the per-turn
#                  search_hit reward, trajectory credit; BETA: 0.04, saves every 20 steps); stops at
#                  TRAIN_TIMEOUT (540 s) - run it again to resume                                     ~9 min a call
#   validate       the SFT model (step 0) and every saved checkpoint not scored yet on data/val.jsonl
#                  (greedy) until EVAL_BUDGET (480 s); writes the best one's path, or "sft" when no
#                  checkpoint beats the SFT model (best EM, earliest on ties)                          ~1.5 min a checkpoint
#   eval-trained   the best checkpoint on validation (else the last; the SFT model when it was
#                  "sft") on the eval set                                                              ~3 min
#   (train, validate and eval-trained act on the run RUN_NAME, default ds: see below)
#   (train takes CREDIT=turn: a turn-credit run that validate and eval-trained treat as any other, and
#   SEED: train.sh's 42 by default; two runs of other seeds and names side by side give the spread)
# The robustness check of issue 30 (eval --shifts SHIFTS, default all: each phrasing shift of the set beside
# the original, alarms against a reference eval; benchmarks/deepsearch/issue30.sh runs them in this order):
#   shifts-sft     the SFT model on test and on val, each under every shift: eval-sft-shifts.json (the
#                  reference of every trained model's shifts) and val-sft-shifts.json (of validation's)  ~2.5 min
#   validate-shifts  RUN_NAME's saved checkpoints not scored yet, on val under every shift, one engine,
#                  alarms against the SFT model's; with CHOOSE=1 then the best of them and of the SFT model
#                  itself by its worst shift (eval/choose.py worst-shift, a tie to the SFT model)
#                  -> chosen-<name>.json, /tmp/<name>-chosen.txt                                    ~1.5 min a checkpoint
#   eval-chosen    that checkpoint on the eval set (reference: eval-sft.json) and on test under every
#                  shift (reference: eval-sft-shifts.json), side by side: eval-chosen-<name>.json and
#                  eval-chosen-<name>-shifts.json; the SFT model chosen: copies of its files, no engine ~2.5 min
#   credit-train MODE / credit-eval MODE (MODE = trajectory | turn): item 4 of issue 15, the same data,
#                  seed and steps from the SFT model with env_grpo.yaml's `credit:` set to MODE; the
#                  trajectory arm is the train phase's own run (/tmp/ds), credit-eval scores each arm's
#                  last checkpoint                                                                    ~9 / ~3 min
# Knobs for sharing the GPU between phases (benchmarks/gpu_pipeline/pipeline.sh runs several at once):
# VLLM_UTIL, MICRO_BATCH, GRAD_ACC (train.sh, sft.sh) and GPU_UTIL (eval.sh), passed through the environment;
# START_GAP (10 s) between two engines a phase starts side by side; TRAIN_FLAGS: extra swift rlhf flags of
# train (later flags win).
# The recipe is base -> warm-start SFT (sft.sh, merged into /tmp/qwen05-sft) -> GRPO from the SFT model.
# SFT demonstrations come from the first 1,000 train questions; GRPO trains on the questions of the pool
# (POOL_FILE: data/pool.jsonl, 42 % two-hop; without it the other 1,000 train questions) that the SFT
# model solves in some but not all of 4 samples (`swift-rlfactory select`), the only groups GRPO gets a
# gradient from.
# Each eval phase scores, in one run, the test split, the never-committed holdout questions, the OOD split
# (a phrasing family never trained on) and every file of EXTRA_EVAL=a.jsonl,b.jsonl (our rows or FlashRAG
# {question, golden_answers}; give it to `prepare`), reported per split, per hops, per family and per
# split x hops (`cell`, e.g. test/2: two-hop test questions) in each eval-*.json.
set -euo pipefail
phase=${1:?phase}; out=${2:?out dir}
source /tmp/device_env.sh >/dev/null
source benchmarks/vllm_start.sh  # vllm_start LOG CMD: once more when vLLM's start-up lost a memory race
export PYTHONPATH="$PWD:$PYTHONPATH" RLFACTORY_CACHE=/tmp/rlf-cache
# MODEL_TYPE, TEMPLATE and ENGINE may be set for a dry run on the CPU (a tiny model as /tmp/qwen05-sft, ENGINE=transformers)
export MODEL=/tmp/qwen05 MODEL_TYPE=${MODEL_TYPE:-qwen2} TEMPLATE=${TEMPLATE:-qwen2_5} ENGINE=${ENGINE:-vllm}
mkdir -p "$out"
# EXTRA_EVAL is read by `prepare` alone, into /tmp/eval-sets.jsonl; the other phases' eval.sh must not merge
# it again (every extra question counted twice, and validate's EM would mix held-out files into val.jsonl)
extra_eval=${EXTRA_EVAL:-}; unset EXTRA_EVAL
# SHIFTS (all) is read by the shift phases alone, which hand it to eval.sh; every other evaluation (eval-sft,
# select's 4,000 episodes, validate) must not score its set again under each shift
shifts=${SHIFTS:-all}; unset SHIFTS REFERENCE CHOOSE_BY
# A GRPO run is named by RUN_NAME (default ds): /tmp/<name> holds it and /tmp/val-<name> its validation
# scores; a run not named ds writes its files with a -<name> suffix (eval-trained-<name>.json, ...), so
# several runs (e.g. two learning rates) can train and be scored side by side.
name=${RUN_NAME:-ds}; RUN=/tmp/$name; VAL=/tmp/val-$name; sfx=$([ "$name" = ds ] || echo "-$name")

evaluate() {  # NAME MODEL [ADAPTERS]: the eval set in one run (one vLLM start-up), scored per group
  rm -f "$out/eval-$1.log"
  MODEL=$2 ADAPTERS=${3:-} DATASET=/tmp/eval-sets.jsonl GROUP_BY="split hops family cell" \
    vllm_start "$out/eval-$1.log" bash examples/deepsearch/eval.sh "/tmp/eval-$1"
  cp "/tmp/eval-$1/metrics.json" "$out/eval-$1.json"  # by_split, by_hops, by_family, by_cell
  # every episode, for reading the failures on the CPU machine (900 episodes: well under 1 MB compressed)
  gzip -c "/tmp/eval-$1/trajectories.jsonl" > "$out/trajectories-$1.jsonl.gz"
}
evaluate_shifts() {  # NAME DATASET [ADAPTERS] [REFERENCE]: DATASET and each shift of it, one engine -> OUT/NAME.json
  local name=$1 dataset=$2 adapters=${3:-} reference=${4:-}; rm -f "$out/$name.log"
  MODEL=/tmp/qwen05-sft ADAPTERS=$adapters DATASET=$dataset GROUP_BY="hops family" SHIFTS=$shifts \
    REFERENCE=$reference vllm_start "$out/$name.log" bash examples/deepsearch/eval.sh "/tmp/$name"
  keep_shifts "/tmp/$name" "$name"
}
keep_shifts() {  # FOLDER NAME: an eval with shifts -> OUT/NAME.json, each shift's OUT/NAME-<shift>.json, the episodes
  cp "$1/metrics.json" "$out/$2.json"
  gzip -c "$1/trajectories.jsonl" > "$out/trajectories-$2.jsonl.gz"
  local shift; for shift in "$1"/shifts/*/; do
    [ -f "$shift/metrics.json" ] || continue
    cp "$shift/metrics.json" "$out/$2-$(basename "$shift").json"
    gzip -c "$shift/trajectories.jsonl" > "$out/trajectories-$2-$(basename "$shift").jsonl.gz"
  done
}
last_checkpoint() {  # RUN's highest step (sort -V: checkpoint-100 after checkpoint-80)
  ls -d "${1:-/tmp/ds}"/v*/checkpoint-* | sort -V | tail -1
}
train_grpo() {  # RUN ENV_FILE: train.sh from the SFT model on the selected questions, resumable
  local run=$1 env_file=$2
  # Resuming restores the LoRA weights and the step count but not the optimizer: on the H200, loading the
  # saved fused-AdamW state crashed the first step after a resume ("params, grads, exp_avgs, and
  # exp_avg_sqs must have same dtype, device, and layout", RESULTS.md, "Why checkpoint 80").
  local last; last=$(last_checkpoint "$run" 2>/dev/null || true)
  local resume=(); [ -n "$last" ] && resume=(--resume_from_checkpoint "$last" --resume_only_model true)
  copy_logs() { for d in "$run"/v*; do cp "$d/logging.jsonl" "$out/logging-${run##*/}-${d##*/}.jsonl" 2>/dev/null || true; done; }
  # Copy the step logs every 15 s: a device command cut short (time limit, budget) still returns them.
  (while sleep 15; do copy_logs; done) > /dev/null 2>&1 & local copier=$!
  local log; log="$out/train-${run##*/}-$(date +%s).log"
  local rc=0 flags; read -ra flags <<< "${TRAIN_FLAGS:-}"
  RLFACTORY_ENV=$env_file BETA=${BETA:-0.04} MODEL=/tmp/qwen05-sft DATASET=/tmp/split/grpo.jsonl OUTPUT=$run \
    timeout "${TRAIN_TIMEOUT:-540}" bash examples/deepsearch/train.sh "${resume[@]}" \
    --save_steps "${SAVE_STEPS:-20}" --save_total_limit 20 ${SEED:+--seed "$SEED"} "${flags[@]}" > "$log" 2>&1 || rc=$?
  kill "$copier"; copy_logs
  # 124: stopped at TRAIN_TIMEOUT, resumable; anything else is a crash and must not pass for a finished run
  # (2026-12-01: two runs died at start-up on a busy MASTER_PORT and the phase still said "done").
  [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || { echo "train.sh failed (exit $rc): $(grep -m1 -E 'Error' "$log")" >&2; return "$rc"; }
}
credit_env() {  # MODE PATH: env_grpo.yaml with `credit: {mode: MODE}`, written to PATH
  case "$1" in trajectory|turn) ;; *) echo "credit mode must be trajectory or turn, not '$1'" >&2; return 2 ;; esac
  python3 - "$1" "$2" <<'PY'
import os, sys, yaml
mode, path = sys.argv[1:]
config = yaml.safe_load(open("examples/deepsearch/env_grpo.yaml"))
config["credit"] = {**config.get("credit", {}), "mode": mode}
for term in config["reward"]:  # the file is written to /tmp: reward files beside env_grpo.yaml by absolute path
    file, sep, func = term["name"].partition(".py:")
    if sep:
        term["name"] = f"{os.path.abspath('examples/deepsearch/' + file)}.py:{func}"
yaml.safe_dump(config, open(path, "w"), sort_keys=False)
PY
}
case "$phase" in
  prepare)  # the held-out questions (never committed), the eval set, the SFT/GRPO halves of train, the BM25 index
    python3 examples/deepsearch/build_data.py --holdout 300 --train 0 --val 0 --test 0 --ood 0 --out /tmp/holdout
    extra=(); [ -n "$extra_eval" ] && IFS=, read -ra extra <<< "$extra_eval"
    python3 examples/deepsearch/eval_sets.py /tmp/eval-sets.jsonl examples/deepsearch/data/test.jsonl \
      holdout=/tmp/holdout/holdout.jsonl examples/deepsearch/data/ood.jsonl "${extra[@]}"
    python3 - <<'PY'  # cell = split/hops: two-hop test questions are their own group (test/2)
import json
rows = [json.loads(line) for line in open("/tmp/eval-sets.jsonl")]
with open("/tmp/eval-sets.jsonl", "w") as out:
    for row in rows:
        out.write(json.dumps({**row, "cell": f"{row['split']}/{row.get('hops', '-')}"}) + "\n")
PY
    mkdir -p /tmp/split
    # SFT_ROWS (1000): the train questions SFT demonstrates; fewer leave GRPO more of the skill to learn
    head -n "${SFT_ROWS:-1000}" examples/deepsearch/data/train.jsonl > /tmp/split/sft.jsonl
    # GRPO's pool: POOL_FILE, by default data/pool.jsonl (build_data.py --pool: 418 two-hop questions of
    # 1,000, against ~175 in train's second half, where select found only 46 mixed two-hop ones on 2026-12-01)
    pool_file=${POOL_FILE:-examples/deepsearch/data/pool.jsonl}
    if [ -n "${POOL_FILE:-}" ] || [ -f "$pool_file" ]; then cp "$pool_file" /tmp/split/pool.jsonl
    else tail -n +1001 examples/deepsearch/data/train.jsonl > /tmp/split/pool.jsonl; fi
    python3 -m swift_rlfactory.retrieval.server build --backend bm25 ;;
  eval-base) evaluate base /tmp/qwen05 ;;
  sft)
    DATASET=/tmp/split/sft.jsonl OUTPUT=/tmp/sft bash examples/deepsearch/sft.sh > "$out/sft.log" 2>&1
    rm -rf /tmp/qwen05-sft && mv /tmp/sft/merged /tmp/qwen05-sft
    cp /tmp/sft/v*/logging.jsonl "$out/logging-sft.jsonl" ;;
  eval-sft) evaluate sft /tmp/qwen05-sft ;;
  select)  # GRPO's questions: the pool questions the SFT model solves sometimes, balanced over hops x family
    # The pool's 1,000 questions x 4 samples: ~4,000 episodes, ~4 min of device time. The 6 (hops, family)
    # cells at PER_STRATUM=60 keep up to ~360 questions: 80 steps x 4 questions see each about once, so
    # GRPO cannot memorise a few templated questions over ~8 epochs (issue 15), and a cell with many mixed
    # questions (two-hop, from data/pool.jsonl) is no longer cut to 25.
    rm -f "$out/eval-pool.log"
    MODEL=/tmp/qwen05-sft DATASET=/tmp/split/pool.jsonl SAMPLES=4 TEMPERATURE=1.0 LIMIT=${LIMIT:-1000} CONCURRENCY=128 \
      vllm_start "$out/eval-pool.log" bash examples/deepsearch/eval.sh /tmp/eval-pool
    cp /tmp/eval-pool/metrics.json "$out/eval-pool.json"
    python3 -m swift_rlfactory.cli select --eval /tmp/eval-pool --dataset /tmp/split/pool.jsonl \
      --out /tmp/split/grpo.jsonl --stratify "${STRATIFY:-hops,family}" --per-stratum "${PER_STRATUM:-60}" | tee "$out/select.log"
    python3 -c "import json,collections; r=[json.loads(l) for l in open('/tmp/split/grpo.jsonl')]; print(collections.Counter((x['hops'], x['family']) for x in r))" \
      | tee -a "$out/select.log" ;;
  train)  # CREDIT (trajectory | turn; empty: env_grpo.yaml's own, trajectory): the run's credit mode. A
    # turn-credit run named by RUN_NAME is validated and scored like any other: on 2026-12-02b the turn arm
    # of credit-train was the best model of the run, but only its last checkpoint could be scored.
    env_file=${ENV_FILE:-examples/deepsearch/env_grpo.yaml}
    if [ -n "${CREDIT:-}" ]; then
      [ -z "${ENV_FILE:-}" ] || { echo "give CREDIT or ENV_FILE, not both: CREDIT rewrites env_grpo.yaml" >&2; exit 2; }
      env_file=/tmp/env-$name-credit-$CREDIT.yaml; credit_env "$CREDIT" "$env_file"
    fi
    train_grpo "$RUN" "$env_file" ;;
  validate)  # score the SFT model and saved checkpoints on the validation split; the best -> /tmp/<name>-best.txt
    # Step 0 is the SFT model itself: the curve starts where GRPO did (2026-12-01d could not say what GRPO
    # gained on validation), and a run whose checkpoints never beat it is scored as the SFT model. It is
    # scored once for all runs (/tmp/eval-val-sft.json): every arm starts from the same SFT model.
    # Checkpoints saved and not scored yet go through one engine first (eval --adapters A B ...): vLLM's
    # start-up, most of a checkpoint's 65 s on 2026-12-01d (the episodes took 9 s), is paid once. If that
    # run fails, the loop below scores them one engine each, as before.
    mkdir -p "$VAL"; start=$(date +%s); batch=/tmp/eval-val-$name-batch-$start pending=()
    checkpoints=$(ls -d "$RUN"/v*/checkpoint-* 2>/dev/null | sort -V || true)
    for ckpt in $checkpoints; do
      [ -f "$VAL/step-${ckpt##*-}.json" ] || [ ! -f "$ckpt/trainer_state.json" ] || pending+=("$ckpt")
    done
    if [ "${#pending[@]}" -gt 1 ]; then
      MODEL=/tmp/qwen05-sft ADAPTERS="${pending[*]}" DATASET=examples/deepsearch/data/val.jsonl GROUP_BY="hops family" \
        vllm_start "$out/validate$sfx.log" bash examples/deepsearch/eval.sh "$batch" || {
          echo "one engine for ${#pending[@]} checkpoints failed (see validate$sfx.log): scoring them one by one"
          # A failed run still writes each checkpoint's metrics.json, its failed episodes counted 0 (the
          # engine died after the first checkpoint on 2026-12-02): only those with none failed are kept.
          for m in "$batch"/*/metrics.json; do
            [ -f "$m" ] || continue
            python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1])).get('failed_episodes', 0) > 0)" "$m" \
              || rm -rf "$(dirname "$m")"
          done; }
    fi
    for ckpt in sft $checkpoints; do
      step=${ckpt##*-}; [ "$ckpt" = sft ] && step=0
      [ -f "$VAL/step-$step.json" ] && continue
      [ "$ckpt" = sft ] || [ -f "$ckpt/trainer_state.json" ] || continue  # still being written (validate runs beside train)
      metrics=/tmp/eval-val-$name-$step/metrics.json
      if [ "$ckpt" = sft ] && [ -f /tmp/eval-val-sft.json ]; then metrics=/tmp/eval-val-sft.json  # another run's
      elif [ -f "$batch/${ckpt##*/}/metrics.json" ]; then metrics=$batch/${ckpt##*/}/metrics.json  # scored above
      else
        [ $(( $(date +%s) - start )) -lt "${EVAL_BUDGET:-480}" ] || { echo "budget spent: run validate again"; break; }
        MODEL=/tmp/qwen05-sft ADAPTERS=$([ "$ckpt" = sft ] || echo "$ckpt") DATASET=examples/deepsearch/data/val.jsonl \
          GROUP_BY="hops family" vllm_start "$out/validate$sfx.log" bash examples/deepsearch/eval.sh "/tmp/eval-val-$name-$step"
        [ "$ckpt" = sft ] && cp "$metrics" /tmp/eval-val-sft.json
      fi
      python3 -c "import json,sys; m=json.load(open(sys.argv[1])); json.dump({'step': int(sys.argv[2]), 'checkpoint': sys.argv[3], 'em': m['em'], 'tool_calls': m['tool_calls'], 'by_hops': m['by_hops'], 'by_family': m['by_family']}, open(sys.argv[4], 'w'))" \
        "$metrics" "$step" "$ckpt" "$VAL/step-$step.json"
    done
    python3 - "$out" "$VAL" "$RUN-best.txt" "validation$sfx.json" <<'PY'  # the best: highest val EM, earliest on ties
import json, pathlib, sys
out, val, best_file, report = sys.argv[1:]
if not list(pathlib.Path(val).glob("step-*.json")):
    sys.exit(print("no checkpoint scored yet"))
scores = sorted((json.loads(p.read_text()) for p in pathlib.Path(val).glob("step-*.json")), key=lambda s: s["step"])
best = max(scores, key=lambda s: (s["em"], -s["step"]))
for s in scores:
    print(f"step {s['step']:>4}  val EM {s['em']:.3f}  searches {s['tool_calls']:.2f}{'  <- best' if s is best else ''}")
pathlib.Path(best_file).write_text(best["checkpoint"] + "\n")
(pathlib.Path(out) / report).write_text(json.dumps({"best": best, "scores": scores}, indent=1))
PY
    ;;
  eval-trained)  # the checkpoint validation chose ("sft": none beat the SFT model); the last one when validate has not run
    ckpt=$(cat "$RUN-best.txt" 2>/dev/null || last_checkpoint "$RUN")
    echo "$ckpt" > "$out/checkpoint$sfx.txt"
    evaluate "trained$sfx" /tmp/qwen05-sft "$([ "$ckpt" = sft ] || echo "$ckpt")" ;;
  shifts-sft)  # the SFT model on test and val under every shift, side by side: the references of issue 30's alarms
    GPU_UTIL=${GPU_UTIL:-0.08} evaluate_shifts eval-sft-shifts examples/deepsearch/data/test.jsonl & test=$!
    sleep "${START_GAP:-10}"  # vLLM start-ups apart (vllm_start.sh)
    GPU_UTIL=${GPU_UTIL:-0.08} evaluate_shifts val-sft-shifts examples/deepsearch/data/val.jsonl
    wait "$test" ;;
  validate-shifts)  # RUN's checkpoints on val under every shift; CHOOSE=1: then the best by its worst shift
    folder=/tmp/val-shifts-$name all=() pending=()
    for ckpt in $(ls -d "$RUN"/v*/checkpoint-* 2>/dev/null | sort -V); do
      [ -f "$ckpt/trainer_state.json" ] || continue  # still being written (validation runs beside training)
      all+=("$ckpt"); [ -f "$folder/${ckpt##*/}/metrics.json" ] || pending+=("$ckpt")
    done
    [ "${#all[@]}" -gt 0 ] || { echo "no checkpoint of $RUN to score"; exit 0; }
    # One engine for the checkpoints not scored yet: eval --adapters A B scores each into OUT/<folder name>/;
    # one checkpoint alone is scored into OUT itself, which is then its folder's name. The choice (CHOOSE=1)
    # is eval/choose.py's over those folders and the SFT model's, without an engine.
    scoring=("${pending[@]}")
    if [ "${#scoring[@]}" -gt 0 ]; then
      target=$folder; [ "${#scoring[@]}" -gt 1 ] || target=$folder/${scoring[0]##*/}
      reference=$out/val-sft-shifts.json; [ -f "$reference" ] || reference=  # alarms against step 0, once scored
      MODEL=/tmp/qwen05-sft ADAPTERS="${scoring[*]}" \
        DATASET=examples/deepsearch/data/val.jsonl GROUP_BY="hops family" SHIFTS=$shifts REFERENCE=$reference \
        vllm_start "$out/validate-shifts$sfx.log" bash examples/deepsearch/eval.sh "$target" \
        || echo "eval exited $? (failed episodes count as wrong; see validate-shifts$sfx.log)"
      for ckpt in "${pending[@]}"; do keep_shifts "$folder/${ckpt##*/}" "val-$name-${ckpt##*-}"; done
    fi
    [ "${CHOOSE:-0}" = 1 ] || exit 0
    # The SFT model (step 0, scored on val by shifts-sft into /tmp/val-sft-shifts) is the incumbent: the recipe
    # ships it unless a checkpoint beats it on the worst shift by more than val's noise (eval/choose.py; on
    # 2026-12-06 its 0.720 beat checkpoint 20's 0.695; on 2026-12-07 checkpoint 15's 0.750 against its 0.735,
    # 3 of 200 questions, lost on test: RESULTS.md "Issue 30").
    python3 - "$folder" "$out/chosen-$name.json" "${all[@]}" <<'PY'
import json, pathlib, sys
from swift_rlfactory.eval.choose import choose
folder, target, checkpoints = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:]
candidates = {c: folder / pathlib.Path(c).name for c in checkpoints}
sft = pathlib.Path("/tmp/val-sft-shifts")
if (sft / "metrics.json").is_file():
    candidates = {"/tmp/qwen05-sft": sft, **candidates}
try:
    chosen = choose(candidates, "worst-shift", "/tmp/qwen05-sft" if "/tmp/qwen05-sft" in candidates else None)
except ValueError as exc:  # no candidate has shift scores (e.g. failed evals): the last checkpoint
    print(exc)
    chosen = {"by": "worst-shift", "checkpoint": checkpoints[-1], "scores": {}}
target.write_text(json.dumps(chosen, indent=1))
PY
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['checkpoint'])" "$out/chosen-$name.json" > "$RUN-chosen.txt"
    echo "chosen: $(cat "$RUN-chosen.txt") ($(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('scores'))" "$out/chosen-$name.json"))" ;;
  eval-chosen)  # the checkpoint validate-shifts chose on the eval set and on test's shifts, against the SFT model's
    ckpt=$(cat "$RUN-chosen.txt" 2>/dev/null || last_checkpoint "$RUN")
    echo "$ckpt" > "$out/checkpoint-chosen-$name.txt"
    if [ "$ckpt" = /tmp/qwen05-sft ]; then  # the SFT model was chosen: its scores are eval-sft's, no engine
      for f in "$out"/eval-sft.json "$out"/eval-sft-shifts*.json; do cp "$f" "$out/eval-chosen-$name${f#"$out"/eval-sft}"; done
      cp "$out/trajectories-sft.jsonl.gz" "$out/trajectories-chosen-$name.jsonl.gz" 2>/dev/null || true
      exit 0
    fi
    GPU_UTIL=${GPU_UTIL:-0.1} evaluate_shifts "eval-chosen-$name-shifts" examples/deepsearch/data/test.jsonl "$ckpt" \
      "$out/eval-sft-shifts.json" & test=$!
    sleep "${START_GAP:-10}"
    rm -f "$out/eval-chosen-$name.log"
    MODEL=/tmp/qwen05-sft ADAPTERS=$ckpt DATASET=/tmp/eval-sets.jsonl GROUP_BY="split hops family cell" REFERENCE=$out/eval-sft.json \
      vllm_start "$out/eval-chosen-$name.log" bash examples/deepsearch/eval.sh "/tmp/eval-chosen-$name"
    cp "/tmp/eval-chosen-$name/metrics.json" "$out/eval-chosen-$name.json"
    gzip -c "/tmp/eval-chosen-$name/trajectories.jsonl" > "$out/trajectories-chosen-$name.jsonl.gz"
    wait "$test" ;;
  credit-train|credit-eval)  # MODE in $3: trajectory or turn; same data (grpo.jsonl), seed 42 and STEPS
    mode=${3:?credit mode: trajectory or turn}
    run=/tmp/ds-credit-$mode; env_file=/tmp/env-credit-$mode.yaml
    [ "$mode" = trajectory ] && run=/tmp/ds  # env_grpo.yaml is trajectory credit: the train phase's run
    credit_env "$mode" "$env_file"
    if [ "$phase" = credit-train ]; then
      STEPS=${STEPS:-100} train_grpo "$run" "$env_file"
    else
      ckpt=${CHECKPOINT:-$(last_checkpoint "$run")}; echo "$ckpt" > "$out/checkpoint-credit-$mode.txt"
      evaluate "credit-$mode" /tmp/qwen05-sft "$ckpt"
    fi ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
