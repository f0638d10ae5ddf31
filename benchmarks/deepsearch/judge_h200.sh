#!/usr/bin/env bash
# DeepSearch GRPO with a model judge, all on one H200: `swift deploy` serves Qwen2.5-Coder-0.5B-Instruct as
# the judge (vLLM, 12% of the GPU) while a short colocated GRPO run (vLLM at 30%, LoRA) trains the same
# base model on examples/deepsearch/env_judge.yaml (em + format + judge). One device command, from the
# repository root, after the GPU kit of ../shared/gpu/README.md is installed (/tmp/site, /tmp/qwen05) and
# the project wheels (.whl: mcp, bm25s, the corpus) are in /tmp/site:
#   bash benchmarks/deepsearch/judge_h200.sh OUT_DIR        # ~6-8 min: judge up ~1.5 min, 15 steps
# Writes to OUT_DIR: judge-deploy.log, judge-smoke.json (one judged trajectory through our client),
# train.log, logging.jsonl (per step: reward, rlfactory/judge, judge/calls, judge/cache_hit_rate,
# judge/errors, judge/latency_p50_s, ...), trajectories-head.jsonl (the first 64 trajectories, judged),
# summary.txt (the judge metrics per step).
set -euo pipefail
out=${1:?out dir}
source /tmp/device_env.sh >/dev/null
export PYTHONPATH="$PWD:$PYTHONPATH" RLFACTORY_CACHE=/tmp/rlf-cache
port=${JUDGE_PORT:-8011}
export JUDGE_BASE_URL="http://127.0.0.1:$port/v1" JUDGE_MODEL=judge
mkdir -p "$out"

python3 -m swift_rlfactory.retrieval.server build --backend bm25 > "$out/prepare.log" 2>&1

# The judge. No --check_model here: DeployArguments does not take it (swift rejects unknown flags).
source benchmarks/served_port.sh
port_free "$port"  # JUDGE_BASE_URL names it: swift deploy would move off a port still held
python3 -m swift.cli.deploy --model /tmp/qwen05 --model_type qwen2 --template qwen2_5 \
  --infer_backend vllm --vllm_gpu_memory_utilization 0.12 --vllm_max_model_len 4096 --vllm_enforce_eager true \
  --host 127.0.0.1 --port "$port" --served_model_name "$JUDGE_MODEL" --max_new_tokens 96 \
  > "$out/judge-deploy.log" 2>&1 &
judge=$!
trap 'kill "$judge" 2>/dev/null || true' EXIT
served_up "$JUDGE_BASE_URL" 300 "$judge" "the judge's swift deploy"  # until the judge answers (or its process dies)

python3 - "$out/judge-smoke.json" <<'PY'  # one right and one wrong answer through our judge client
import json, sys, time
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.trajectory import Trajectory
env = Environment.load("examples/deepsearch/env_judge.yaml")
def traj(answer):
    return Trajectory(
        messages=[{"role": "user", "content": "What is the capital of Myanmar?"},
                  {"role": "assistant", "content": f"<answer>{answer}</answer>"}],
        row={"golden_answers": ["Naypyidaw"]},
    )
batch = [traj("Naypyidaw"), traj("Nay Pyi Taw"), traj("Yangon")]
t0 = time.time()
env.reward.score(batch)
result = {"seconds": round(time.time() - t0, 2), "scores": [t.rewards for t in batch],
          "errors": [t.reward_errors for t in batch], "metrics": env.reward.drain_metrics()}
env.close()
json.dump(result, open(sys.argv[1], "w"), indent=1)
print(json.dumps(result))
PY

rm -rf /tmp/ds-judge
RLFACTORY_ENV=examples/deepsearch/env_judge.yaml MODEL=/tmp/qwen05 OUTPUT=/tmp/ds-judge STEPS="${STEPS:-15}" \
  timeout "${TRAIN_TIMEOUT:-420}" bash examples/deepsearch/train.sh \
  --vllm_gpu_memory_utilization 0.3 --save_strategy no > "$out/train.log" 2>&1 || echo "train exited $?"
cp /tmp/ds-judge/v*/logging.jsonl "$out/logging.jsonl" 2>/dev/null || true
log=$(ls /tmp/ds-judge/trajectories.jsonl /tmp/ds-judge/v*/trajectories.jsonl 2>/dev/null | head -1 || true)
[ -n "$log" ] && head -n 64 "$log" > "$out/trajectories-head.jsonl"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/logging.jsonl")] if len(sys.argv) > 1 else []
keys = ["reward", "rlfactory/em", "rlfactory/judge", "judge/calls", "judge/cache_hit_rate", "judge/errors",
        "judge/latency_p50_s", "rewards/timeouts", "step_time"]
for row in rows:
    if "reward" in row:
        print(row.get("global_step/max_steps"), {k: row[k] for k in keys if k in row})
PY
