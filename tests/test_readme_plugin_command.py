"""The README's "How it plugs into ms-swift" command, written out as the README says for a machine without a
GPU, runs: one GRPO step of the tiny Qwen3 through the real `swift rlhf` with our plugin."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import AGENT_PAIRS, ROOT

pytestmark = pytest.mark.timeout(900)


def readme_cpu_command() -> tuple[str, list[str]]:
    """The README's command block (``...`` left out) and the flags its text adds on a CPU machine."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## How it plugs into ms-swift", 1)[1]
    block = re.match(r"\s*\n((?:    .*\n)+)", section).group(1)
    command = " ".join(line.strip().rstrip("\\") for line in block.splitlines()).replace(" ...", "")
    cpu = re.search(r"On a machine without a GPU add `([^`]+)`", section)
    assert cpu, "the README says nothing about running the command without a GPU"
    return command, shlex.split(cpu.group(1))


def test_the_readme_plugin_command_runs_on_a_cpu(agent_model: Path, tmp_path: Path):
    command, cpu_flags = readme_cpu_command()
    assert "--torch_dtype" in cpu_flags
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(
        "".join(
            json.dumps(
                {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
            )
            + "\n"
            for a, b in AGENT_PAIRS
        )
    )
    command = command.replace("Qwen/Qwen3-4B", shlex.quote(str(agent_model)))
    command = command.replace("data.jsonl", shlex.quote(str(dataset)))
    cut = [  # one short step of the tiny model, into this test's folder
        "--model_type", "qwen3", "--template", "qwen3", "--max_steps", "1", "--num_generations", "2",
        "--per_device_train_batch_size", "2", "--max_completion_length", "32", "--max_length", "1024",
        "--save_strategy", "no", "--report_to", "none", "--check_model", "false",
        "--dataloader_num_workers", "0", "--dataset_num_proc", "1", "--output_dir", str(tmp_path / "out"),
    ]  # fmt: skip
    line = f"{command} {shlex.join(cpu_flags + cut)}"
    bin_dir = Path(sys.executable).parent  # swift and swift-rlfactory, as the install put them
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    done = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=840
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    [logs] = list((tmp_path / "out").glob("**/logging.jsonl"))
    assert any("reward" in json.loads(row) for row in logs.read_text().splitlines() if row.strip())
