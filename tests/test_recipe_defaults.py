"""The example recipes (examples/<name>/train.sh over the shared examples/grpo.sh): colocate vLLM defaults of
CUDA graphs and sleep level 1 (benchmarks/generation/RESULTS.md), each recipe's own settings, the knobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

RECIPES = ["arithmetic", "booking", "code", "customer_service", "deepsearch"]
KNOBS = (
    "VLLM_EAGER",
    "SLEEP_LEVEL",
    "DYNAMIC_SAMPLE",
    "MAX_RESAMPLE",
    "SEED",
    "STEPS",
    "USE_VLLM",
    "BETA",
    "LR",
)


def recipe_argv(example: str, tmp_path: Path, *extra: str, **env: str) -> list[str]:
    """The argv the recipe hands `swift rlhf` (a stub that records it), ``extra`` after the recipe's own."""
    argv, stub = tmp_path / "argv", tmp_path / "swift.py"
    stub.write_text(f"import json, sys\njson.dump(sys.argv[1:], open({str(argv)!r}, 'w'))\n")
    environ = {k: v for k, v in os.environ.items() if k not in KNOBS and k != "RLFACTORY_ENV"}
    environ.update(MODEL="m", SWIFT=f"{sys.executable} {stub}", **env)
    subprocess.run(["bash", f"examples/{example}/train.sh", *extra], cwd=ROOT, env=environ, check=True)
    return json.loads(argv.read_text())


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.parametrize("example", RECIPES)
def test_recipes_default_to_cuda_graphs_and_sleep_level_1_and_take_overrides(example: str, tmp_path: Path):
    args = recipe_argv(example, tmp_path)
    assert (flag(args, "--vllm_enforce_eager"), flag(args, "--sleep_level")) == ("false", "1")
    args = recipe_argv(example, tmp_path, VLLM_EAGER="true", SLEEP_LEVEL="0")
    assert (flag(args, "--vllm_enforce_eager"), flag(args, "--sleep_level")) == ("true", "0")


# each recipe's own settings, as its committed GPU runs used them: max turns, lengths, LoRA, beta, batch
OWN = {
    "arithmetic": {
        "--max_turns": "4",
        "--max_length": "2048",
        "--lora_rank": "16",
        "--lora_alpha": "32",
        "--learning_rate": "5e-5",
        "--per_device_train_batch_size": "32",
        "--save_steps": "25",
    },
    "booking": {
        "--max_turns": "6",
        "--max_completion_length": "1024",
        "--beta": "0.02",
        "--vllm_gpu_memory_utilization": "0.3",
        "--save_total_limit": "10",
    },
    "code": {"--max_completion_length": "384", "--lora_alpha": "64", "--save_total_limit": "3"},
    "customer_service": {
        "--max_turns": "16",
        "--max_length": "6144",
        "--vllm_max_model_len": "6144",
        "--beta": "0.04",
        "--save_steps": "20",
    },
    "deepsearch": {"--max_completion_length": "256", "--beta": "0", "--gradient_accumulation_steps": "4"},
}


@pytest.mark.parametrize("example", RECIPES)
def test_each_recipe_keeps_its_own_settings_and_its_env_and_takes_every_knob(example: str, tmp_path: Path):
    args = recipe_argv(example, tmp_path, "--max_steps", "3")
    flags = dict(zip(args[::2], args[1::2], strict=True))  # every flag of the recipes takes one value
    assert {name: flags[name] for name in OWN[example]} == OWN[example]
    assert flags["--dataset"] == f"examples/{example}/data/train.jsonl" and flags["--seed"] == "42"
    assert args[-2:] == ["--max_steps", "3"]  # the caller's flags come last (later flags win)
    assert "--save_total_limit" in flags or example == "arithmetic"  # arithmetic keeps every checkpoint
    args = recipe_argv(example, tmp_path, SEED="7", BETA="0.5", USE_VLLM="false")
    assert (flag(args, "--seed"), flag(args, "--beta"), flag(args, "--use_vllm")) == ("7", "0.5", "false")
    assert "--vllm_mode" not in args  # a CPU check: no colocated engine flags
