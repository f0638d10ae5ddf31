"""The one description of a run: its folders, the command it runs and the ``command.sh`` it leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from swift_rlfactory.bundled.models import choose_model
from swift_rlfactory.run_config import (
    CPU,
    PLUGIN,
    RunConfig,
    SwiftCommand,
    swift_rlhf,
    write_command_sh,
)
from swift_rlfactory.runs.folder import new_run_dir

# A stand-in for swift rlhf: it writes where it ran, from which directory, with which arguments.
RECORDER = """
import json, os, sys
out = sys.argv[sys.argv.index("--output_dir") + 1]
with open(os.path.join(out, "ran.json"), "w") as f:
    json.dump({"cwd": os.getcwd(), "argv": sys.argv[1:], "env": os.environ.get("RLFACTORY_ENV")}, f)
"""


def _flags(argv: list[str]) -> dict[str, str]:
    return {flag: value for flag, value in zip(argv, argv[1:], strict=False) if flag.startswith("--")}


def test_two_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path: Path):
    folders = [new_run_dir(tmp_path) for _ in range(3)]
    assert len(set(folders)) == 3 and all(f.is_dir() and f.parent == tmp_path for f in folders)


def test_command_sh_runs_from_anywhere_and_each_rerun_gets_its_own_folder(tmp_path: Path):
    run_dir = new_run_dir(tmp_path / "runs")
    env_file = tmp_path / "env.yaml"
    command = SwiftCommand(
        [sys.executable, "-c", RECORDER, "--model", "m", "--output_dir", str(run_dir), "--seed", "0"],
        {"RLFACTORY_ENV": str(env_file)},
    )
    script = write_command_sh(run_dir, command)
    assert os.access(script, os.X_OK)
    for extra in ([], ["--resume_from_checkpoint", str(run_dir / "checkpoint-3")]):
        done = subprocess.run([str(script), *extra], cwd="/", capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert not (run_dir / "ran.json").exists()  # the first run's folder is left as it was
    reruns = sorted(p for p in run_dir.parent.iterdir() if p != run_dir)
    assert len(reruns) == 2
    records = [json.loads((folder / "ran.json").read_text()) for folder in reruns]
    assert all(r["cwd"] == "/" and r["env"] == str(env_file) for r in records)
    assert records[1]["argv"][-2:] == ["--resume_from_checkpoint", str(run_dir / "checkpoint-3")]


def test_cpu_flags_come_from_the_device_not_from_the_caller(tmp_path: Path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    config = RunConfig(model=str(tmp_path / "m"), mode="cpu").resolved(gpu=False)
    flags = _flags(swift_rlhf(config, choose_model(config.model), "d.jsonl", tmp_path / "run").argv)
    assert flags["--torch_dtype"] == "float32" and flags["--use_vllm"] == "false"
    assert flags["--dataloader_num_workers"] == "0" and flags["--max_steps"] == str(CPU.steps)
    assert flags["--external_plugins"] == str(PLUGIN)
    gpu = RunConfig(model=str(tmp_path / "m")).resolved(gpu=True)
    flags = _flags(swift_rlhf(gpu, choose_model(gpu.model), "d", tmp_path).argv)
    assert flags["--torch_dtype"] == "bfloat16" and flags["--vllm_mode"] == "colocate"
    # the fastest setting measured that fits (benchmarks/generation/RESULTS.md): CUDA graphs, vLLM asleep
    assert (flags["--vllm_enforce_eager"], flags["--sleep_level"]) == ("false", "1")


def test_docs_run_md_lists_every_field_as_run_config_declares_it():
    from swift_rlfactory.run_config import fields_table

    assert fields_table() in (Path(__file__).resolve().parents[1] / "docs" / "run.md").read_text()
