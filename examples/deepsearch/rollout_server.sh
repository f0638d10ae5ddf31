#!/usr/bin/env bash
# Server mode: `swift rollout` generates (and runs the tool calls) on its own GPUs; train with
#   CUDA_VISIBLE_DEVICES=2,3 NPROC_PER_NODE=2 VLLM_SERVER=127.0.0.1 bash examples/deepsearch/train_multi_gpu.sh
# NOT RUN YET (docs/scaling.md). GPUS: the server's GPUs; ROLLOUT_DP x ROLLOUT_TP of them. PORT (8000): if it
# is busy, ms-swift takes the next free one and its log says which ("listening on"): pass that as VLLM_SERVER_PORT.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a model folder or hub id}
export CUDA_VISIBLE_DEVICES=${GPUS:-0,1}
export RLFACTORY_ENV=${RLFACTORY_ENV:-examples/deepsearch/env.yaml}
swift rollout --model "$MODEL" --template "${TEMPLATE:-qwen2_5}" \
  --vllm_data_parallel_size "${ROLLOUT_DP:-2}" --vllm_tensor_parallel_size "${ROLLOUT_TP:-1}" \
  --vllm_max_model_len 4096 --port "${PORT:-8000}" \
  --external_plugins swift_rlfactory/plugin.py --multi_turn_scheduler rlfactory --max_turns 4 "$@"
