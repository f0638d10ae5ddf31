#!/usr/bin/env bash
# DeepSearch GRPO on several nodes: run this on every node with the same MASTER_ADDR (node 0's address)
# and MASTER_PORT, NNODES the number of nodes and NODE_RANK 0, 1, ... NOT RUN YET (docs/scaling.md).
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 MODEL=... bash examples/deepsearch/train_multi_node.sh  # node 0
#   NNODES=2 NODE_RANK=1 MASTER_ADDR=10.0.0.1 MODEL=... bash examples/deepsearch/train_multi_node.sh  # node 1
# Share the tool cache across nodes through Redis (RLFACTORY_ENV=an env with cache.redis_url, docs/cache.md);
# OUTPUT should be one folder on a shared disk, or collect each node's trajectories.jsonl afterwards.
set -euo pipefail
export NNODES=${NNODES:?set NNODES to the number of nodes}
export NODE_RANK=${NODE_RANK:?set NODE_RANK to the index of this node, 0 on the master}
export MASTER_ADDR=${MASTER_ADDR:?set MASTER_ADDR to the address of node 0}
export MASTER_PORT=${MASTER_PORT:-29500}
export NPROC_PER_NODE=${NPROC_PER_NODE:-8}
export RLFACTORY_RUN_ID=${RLFACTORY_RUN_ID:-deepsearch-${NNODES}x${NPROC_PER_NODE}-$MASTER_PORT}
exec bash "$(dirname "$0")/train_multi_gpu.sh" "$@"
