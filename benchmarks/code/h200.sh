#!/usr/bin/env bash
# One short GRPO run of examples/code (colocated vLLM, LoRA) on one H200; logs and metrics go to OUT_DIR.
#
# Once, on the CPU machine, in the repository root (the sandbox's bubblewrap, in case the GPU image lacks it):
#   mkdir -p .bwrap && (cd .bwrap && apt-get download bubblewrap libcap2 libselinux1)
# On the GPU machine, after the GPU kit of benchmarks/README.md ("The kit in 10 calls") is installed (/tmp/site, /tmp/qwen05),
# as one device command with carry [".bwrap"]:
#   bash benchmarks/code/h200.sh "$OUT"
# STEPS (default 15) and TRAIN_TIMEOUT (default 540 s) bound the run inside one 10-minute command.
#
# run_python runs every call in bubblewrap. If the machine cannot (no user namespaces, e.g. under some
# container runtimes), the probe below fails, the script says why in OUT_DIR/probe.log and exits 3:
# nothing trains without a working sandbox.
set -euo pipefail
out=${1:?out dir}
mkdir -p "$out"
source /tmp/device_env.sh >/dev/null
export PYTHONPATH="$PWD:$PYTHONPATH" RLFACTORY_CACHE=/tmp/rlf-cache

source benchmarks/bwrap.sh  # bubblewrap from the carried .bwrap/*.deb when the image has none
bwrap_probe examples/code/env.yaml "$out/probe.log" || exit 3

copy_logs() {
  for d in /tmp/code/v*; do
    [ -d "$d" ] || continue
    cp "$d/logging.jsonl" "$out/logging.jsonl" 2>/dev/null || true
    tail -n 64 "$d/trajectories.jsonl" > "$out/trajectories-tail.jsonl" 2>/dev/null || true
  done
}
(while sleep 15; do copy_logs; done) > /dev/null 2>&1 & copier=$!
start=$(date +%s)
MODEL=/tmp/qwen05 OUTPUT=/tmp/code STEPS=${STEPS:-15} timeout "${TRAIN_TIMEOUT:-540}" bash examples/code/train.sh \
  --save_strategy no \
  > "$out/train.log" 2>&1 || echo "train.sh exited $?" >> "$out/train.log"
kill "$copier" 2>/dev/null || true
copy_logs
echo "wall_s $(( $(date +%s) - start ))" >> "$out/train.log"
python3 - "$out" <<'PY'  # one line per step: reward, hidden-test score, tool calls and errors, step time
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
log = out / "logging.jsonl"
rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
keys = ["reward", "rlfactory/rewards.py:hidden_tests", "tools/calls_per_trajectory", "tools/error_rate", "step_time"]
lines = []
for row in rows:
    if "reward" in row:
        values = " ".join(f"{k.split('/')[-1]}={row[k]:.3f}" for k in keys if isinstance(row.get(k), (int, float)))
        lines.append(f"step {row.get('global_step/max_steps')} {values}")
(out / "summary.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines) or "no steps logged; see train.log")
PY
