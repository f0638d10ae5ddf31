#!/usr/bin/env bash
# GRPO rollout benchmark on H200s: the synchronous baseline (tools run one by one inside step(), as in
# ms-swift's example ToolCallScheduler) against the rlfactory scheduler, same GRPO config, same seed, run back
# to back at a given tool latency. Qwen2.5-Coder-0.5B-Instruct, LoRA r16, 32 completions per step
# (4 prompts x 8), <= 3 turns, MCP calculator whose every call sleeps LATENCY seconds.
#   bash benchmarks/colocate_h200.sh LATENCY STEPS OUT_DIR [MODE]     (after ../shared/gpu/README.md's setup)
# SCHEDULERS (default "sync_tools rlfactory") picks the schedulers, in order. LEARNING_RATE (default 1e-4):
# 0 freezes the policy, so every latency sees the same mix of tool calls (with learning, runs at different
# latencies can drift apart, e.g. to a policy that stops calling the tool and makes the latency moot).
# MODE colocate (default, one GPU): vLLM inside the trainer. MODE server (two GPUs): `swift rollout` on
# GPU 0 generates and runs the tools (the scheduler lives there), `swift rlhf --vllm_mode server` trains on
# GPU 1; the issue's server-mode target compares rlfactory's median step at 0.5 s with the one at 0 s.
# MODE server-async: the same with `--async_generate true`, the rollout of step n+1 (tools included) runs
# while step n trains, one step off-policy: the way tool time can hide behind training as well.
# SERVER_GPUS (default "0 1": rollout GPU, trainer GPU). "0 0" runs both on one GPU: the rollout server gets
# 0.35 of its memory, and the two processes get different NCCL_HOSTIDs, so NCCL's weight-sync communicator
# takes them for two hosts (it refuses two ranks on one device of one host) and talks over loopback sockets.
# ROLLOUT_EAGER (true): the rollout server's --vllm_enforce_eager (false: CUDA graphs, as colocate's default).
# ROLLOUT_PORT (8000): the port asked of the server; the trainer is given the one the server's log names
# (ms-swift takes the next free port when that one is busy), and the server's process group ends with each run.
# VLLM_ARGS (default none): extra colocate vLLM flags, after the defaults, so they override them (e.g.
# "--vllm_enforce_eager false --sleep_level 1"); TAG names such a variant: runs are then TAG_<sched>-<latency>.
# WORKLOAD: arith (default: the calculator, slow_calc) or lookup (every question needs two lookups,
# environments/lookup). Each run also keeps its trajectories.jsonl in OUT/traj/ and, where nvidia-smi
# exists, the GPU's used memory every 0.5 s in OUT/mem/ (MiB, one line a sample).
# MODEL (/tmp/qwen05), MODEL_TYPE (qwen2), TEMPLATE (qwen2_5): the policy (the lookup workload's warm-start
# model, say). A CPU check: USE_VLLM=false (colocate: the trainer's own model generates), TRAIN_FLAGS (extra
# swift rlhf flags, last: later flags win), DEVICE_ENV (/tmp/device_env.sh, sourced when present).
set -euo pipefail
latency=${1:?latency}; steps=${2:?steps}; out=${3:?out}; mode=${4:-colocate}
DEVICE_ENV=${DEVICE_ENV:-/tmp/device_env.sh}
if [ -f "$DEVICE_ENV" ]; then source "$DEVICE_ENV" >/dev/null; fi
MODEL=${MODEL:-/tmp/qwen05} MODEL_TYPE=${MODEL_TYPE:-qwen2} TEMPLATE=${TEMPLATE:-qwen2_5}
read -r -a train_flags <<< "${TRAIN_FLAGS:-}"
workload=${WORKLOAD:-arith}
case "$workload" in arith) envdir=slow_calc ;; lookup) envdir=lookup ;; *) echo "unknown WORKLOAD $workload" >&2; exit 2 ;; esac
export PYTHONPATH="$PWD:${PYTHONPATH:-}" RLFACTORY_ENV=$PWD/benchmarks/environments/$envdir/env.yaml
export RLFACTORY_BENCH_LATENCY=$latency
read -r -a vllm_extra <<< "${VLLM_ARGS:-}"
prefix=${TAG:+${TAG}_}
mkdir -p "$out/traj" "$out/mem" /tmp/bench
data=/tmp/bench/$workload.jsonl
if [ "$workload" = lookup ]; then python3 benchmarks/environments/lookup/data.py "$data"; else python3 - <<'PY'; fi
import json, random
rng = random.Random(0)
with open("/tmp/bench/arith.jsonl", "w") as f:
    for _ in range(2000):
        a, b, c = rng.randint(10, 999), rng.randint(10, 999), rng.randint(2, 99)
        f.write(json.dumps({"messages": [{"role": "user", "content": f"What is ({a} + {b}) * {c}?"}],
                            "solution": str((a + b) * c)}) + "\n")
PY
server= sampler=
stop_server() {  # its whole process group (vLLM's engine core too); its exit status must not end the script
  if [ -n "$server" ]; then kill -- -"$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; fi
  server= sampler=
}
trap stop_server EXIT
source benchmarks/served_port.sh  # served_port LOG PID: the port the rollout server took
read -r rollout_gpu train_gpu <<< "${SERVER_GPUS:-0 1}"
rollout_mem=0.8 rollout_env=() train_env=()
if [ "$rollout_gpu" = "$train_gpu" ]; then
  rollout_mem=0.35
  export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_MNNVL_ENABLE=0
  rollout_env=(NCCL_HOSTID=rlfactory-rollout) train_env=(NCCL_HOSTID=rlfactory-trainer)
fi
for sched in ${SCHEDULERS:-sync_tools rlfactory}; do
  case "$mode" in
    colocate)
      name=$prefix$sched-$latency
      rollout=(--multi_turn_scheduler "$sched" --max_turns 3
               --use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization 0.3 --vllm_enforce_eager true
               --vllm_max_model_len 4096 "${vllm_extra[@]}")
      [ "${USE_VLLM:-true}" = true ] || rollout=(--multi_turn_scheduler "$sched" --max_turns 3 --use_vllm false) ;;
    server|server-async)
      name=$prefix$mode-$sched-$latency
      setsid env "${rollout_env[@]}" CUDA_VISIBLE_DEVICES="$rollout_gpu" python3 -m swift.cli.rollout \
        --model "$MODEL" --model_type "$MODEL_TYPE" --template "$TEMPLATE" \
        --external_plugins benchmarks/baseline_plugin.py --multi_turn_scheduler "$sched" --max_turns 3 \
        --vllm_gpu_memory_utilization "$rollout_mem" --vllm_max_model_len 4096 --vllm_enforce_eager "${ROLLOUT_EAGER:-true}" \
        --port "${ROLLOUT_PORT:-8000}" > "$out/rollout-$name.log" 2>&1 &
      server=$!
      port=$(served_port "$out/rollout-$name.log" "$server")
      [ "$port" = "${ROLLOUT_PORT:-8000}" ] || echo "rollout server $name: port ${ROLLOUT_PORT:-8000} was busy, it took $port"
      export CUDA_VISIBLE_DEVICES=$train_gpu
      rollout=(--use_vllm true --vllm_mode server --vllm_server_host 127.0.0.1 --vllm_server_port "$port"
               --vllm_server_timeout 600 --vllm_server_pass_dataset true)
      [ "$mode" = server-async ] && rollout+=(--async_generate true) ;;
    *) echo "unknown mode $mode (colocate, server or server-async)" >&2; exit 2 ;;
  esac
  dir=/tmp/bench/$name
  rm -rf "$dir"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$out/mem/$name.csv" &
    sampler=$!
  fi
  env "${train_env[@]}" python3 -m swift.cli.rlhf --rlhf_type grpo \
    --model "$MODEL" --model_type "$MODEL_TYPE" --template "$TEMPLATE" \
    --dataset "$data" --external_plugins benchmarks/baseline_plugin.py \
    --reward_funcs rlfactory --callbacks rlfactory "${rollout[@]}" \
    --tuner_type lora --lora_rank 16 --lora_alpha 32 --target_modules all-linear \
    --torch_dtype bfloat16 --learning_rate "${LEARNING_RATE:-1e-4}" --beta 0.0 --temperature 1.0 \
    --num_generations 8 --per_device_train_batch_size 32 \
    --max_completion_length 256 --max_length 2048 --max_steps "$steps" --logging_steps 1 --save_strategy no \
    --output_dir "$dir" --add_version false --dataloader_num_workers 0 --dataset_num_proc 1 \
    --report_to none --check_model false --seed 42 "${train_flags[@]}" > "$out/$name.log" 2>&1
  cp "$dir/logging.jsonl" "$out/$name.jsonl"
  cp "$dir/trajectories.jsonl" "$out/traj/$name.jsonl" 2>/dev/null || true
  stop_server
done
python3 benchmarks/summarize_colocate.py "$out"/*.jsonl
