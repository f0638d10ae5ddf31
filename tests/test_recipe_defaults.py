"""The example recipes' colocate vLLM defaults: CUDA graphs and sleep level 1 (benchmarks/generation/RESULTS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT


def recipe_argv(example: str, tmp_path: Path, **env: str) -> list[str]:
    """The argv the recipe hands `swift rlhf` (a stub that records it)."""
    argv, stub = tmp_path / "argv", tmp_path / "swift.py"
    stub.write_text(f"import json, sys\njson.dump(sys.argv[1:], open({str(argv)!r}, 'w'))\n")
    environ = {k: v for k, v in os.environ.items() if k not in ("VLLM_EAGER", "SLEEP_LEVEL")}
    environ.update(MODEL="m", SWIFT=f"{sys.executable} {stub}", **env)
    subprocess.run(["bash", f"examples/{example}/train.sh"], cwd=ROOT, env=environ, check=True)
    return json.loads(argv.read_text())


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.parametrize("example", ["arithmetic", "code", "deepsearch"])
def test_recipes_default_to_cuda_graphs_and_sleep_level_1_and_take_overrides(example: str, tmp_path: Path):
    args = recipe_argv(example, tmp_path)
    assert (flag(args, "--vllm_enforce_eager"), flag(args, "--sleep_level")) == ("false", "1")
    args = recipe_argv(example, tmp_path, VLLM_EAGER="true", SLEEP_LEVEL="0")
    assert (flag(args, "--vllm_enforce_eager"), flag(args, "--sleep_level")) == ("true", "0")
