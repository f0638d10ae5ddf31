"""`swift-rlfactory train` without training: the dataset, the swift rlhf command, the progress lines, the report.

The full run (fetching the 0.5B model and a few CPU GRPO steps) takes minutes; the e2e test of the plugin
is tests/test_swift_rlhf.py.
"""

from __future__ import annotations

import ast
import io
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from swift_rlfactory.bundled.arithmetic import arithmetic_problems, build_dataset
from swift_rlfactory.bundled.models import DEFAULT_MODEL, MODELS, UnknownModelError, choose_model, model_dir
from swift_rlfactory.cli import main
from swift_rlfactory.run_config import CPU, DEFAULT_ENV, GPU, RunConfig
from swift_rlfactory.runs.folder import last_checkpoint
from swift_rlfactory.runs.log import read_steps
from swift_rlfactory.train import (
    _run,
    format_step,
    phase_of,
    pick_trajectory,
    plan_run,
    render_trajectory,
)

ROOT = Path(__file__).resolve().parents[1]


def test_arithmetic_problems_are_seeded_and_correct(tmp_path: Path):
    rows = arithmetic_problems(50, seed=3)
    assert rows == arithmetic_problems(50, seed=3) and rows != arithmetic_problems(50, seed=4)
    for row in rows:
        [message] = row["messages"]
        assert message["role"] == "user" and message["content"].startswith("What is ")
        expression = message["content"].removeprefix("What is ").removesuffix("?")
        assert set(expression) <= set("0123456789 +-*")
        assert row["solution"] == str(eval(compile(ast.parse(expression, mode="eval"), "", "eval")))
    path = build_dataset(tmp_path / "d" / "train.jsonl", n=5, seed=3)
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows[:5]


def _plan(use_vllm: bool, tmp_path: Path | None = None, **options):
    if "model" not in options:  # a local model folder
        folder = tmp_path / "m"
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text("{}")
        options["model"] = str(folder)
    opts = RunConfig(**options)
    choice = choose_model(opts.model)
    return plan_run(opts, choice, Path("/d/train.jsonl"), Path("/runs/r"), use_vllm=use_vllm, env_max_turns=3)


def _flags(command: list[str]) -> dict[str, str]:
    start = command.index("--rlhf_type")
    return {command[i]: command[i + 1] for i in range(start, len(command) - 1) if command[i].startswith("--")}


def test_cpu_command_runs_our_plugin_with_transformers_generation():
    plan = _plan(False, model=DEFAULT_MODEL)
    flags = _flags(plan.command)
    assert flags["--model"] == str(model_dir(MODELS[DEFAULT_MODEL]))
    assert plan.command[1:3] == ["-m", "swift.cli.rlhf"]
    assert flags["--model_type"] == "qwen2" and flags["--template"] == "qwen2_5"
    assert flags["--use_vllm"] == "false" and "--vllm_mode" not in flags
    assert flags["--external_plugins"].endswith("swift_rlfactory/plugin.py")
    assert flags["--multi_turn_scheduler"] == flags["--reward_funcs"] == flags["--callbacks"] == "rlfactory"
    assert flags["--max_turns"] == str(CPU.max_turns) and flags["--torch_dtype"] == "float32"
    assert flags["--output_dir"] == "/runs/r" and flags["--add_version"] == "false"
    assert plan.env_vars["RLFACTORY_ENV"] == str(DEFAULT_ENV) and plan.env_vars["HF_HUB_OFFLINE"] == "1"


def test_gpu_command_uses_colocated_vllm_and_the_envs_turns():
    plan = _plan(True, model="Qwen/Qwen3-4B", template="qwen3")
    flags = _flags(plan.command)
    assert (flags["--use_vllm"], flags["--vllm_mode"]) == ("true", "colocate")
    assert flags["--vllm_max_model_len"] == flags["--max_length"] == str(GPU.max_length)
    assert flags["--torch_dtype"] == "bfloat16" and flags["--max_turns"] == "3"
    assert flags["--template"] == "qwen3" and "--model_type" not in flags
    assert "HF_HUB_OFFLINE" not in plan.env_vars  # a hub id must be downloadable


def test_flags_override_the_profile_and_pass_through_comes_last(tmp_path: Path):
    plan = _plan(
        False,
        tmp_path,
        steps=7,
        num_generations=3,
        batch_size=8,
        max_turns=9,
        swift_args=["--output_dir", "/x"],
    )
    flags = _flags(plan.command)
    assert flags["--max_steps"] == "7" and flags["--num_generations"] == "3"
    assert flags["--per_device_train_batch_size"] == "6"  # whole groups only
    assert flags["--max_turns"] == "3"  # never past the environment's limit
    assert plan.command[-2:] == ["--output_dir", "/x"] and plan.run_dir == Path("/x")


def test_only_train_takes_flags_after_double_dash(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plugin-path", "--", "--x"])
    assert exit_info.value.code == 2 and "only `train`" in capsys.readouterr().err


LOGGED = {
    "loss": 0.0,
    "tools/calls_per_trajectory": 0.75,
    "turns": 1.75,
    "rlfactory/tool_use": 0.75,
    "rlfactory/em": 0.5,
    "rlfactory/format": 0.5,
    "reward": 0.675,
    "reward_std": 0.5,
    "step_time": 81.2,
    "global_step/max_steps": "2/3",
}


def test_steps_are_read_from_logging_jsonl_and_printed_on_one_line(tmp_path: Path):
    log = tmp_path / "logging.jsonl"
    log.write_text(json.dumps(LOGGED) + "\n" + json.dumps({"train_runtime": 1.0}) + "\n" + '{"reward": 0.')
    [record] = read_steps(log)  # the summary line and a half-written line are skipped
    line = format_step(record)
    assert line.startswith("step   2/3 · reward 0.675 ± 0.500 · em 0.50 format 0.50 tool_use 0.75")
    assert "tool calls/traj 0.75" in line and line.endswith("81 s")
    assert read_steps(tmp_path / "missing.jsonl") == []


def _trajectory(step: int, total: float, calls: int) -> dict:
    call = {"tool": "calculate", "arguments": {"expression": "37 * 12"}, "observation": "444", "error": None}
    return {
        "step": step,
        "messages": [
            {"role": "system", "content": "prompt"},
            {"role": "user", "content": "What is 37 * 12?"},
            *(
                [{"role": "assistant", "content": "<tool_call>..."}, {"role": "tool", "content": "444"}]
                * calls
            ),
            {"role": "assistant", "content": "<answer>444</answer>"},
        ],
        "tool_calls": [{**call, "turn": 1, "latency_s": 0.001}] * calls,
        "stop_reason": "answer",
        "row": {"solution": "444"},
        "rewards": {"em": 1.0, "format": 1.0, "tool_use": float(calls > 0), "total": total},
    }


def test_last_checkpoint_is_the_highest_step_not_the_last_name(tmp_path: Path):
    assert last_checkpoint(tmp_path) is None
    for step in (20, 80, 100):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "adapter_model.safetensors").touch()
    (tmp_path / "checkpoint-120").mkdir()  # being written: no adapter yet
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-100"


def test_the_sample_is_from_the_last_step_and_prefers_tool_use():
    trajectories = [
        _trajectory(0, 1.3, 1),
        _trajectory(2, 1.2, 0),
        _trajectory(2, 0.1, 1),
        _trajectory(1, 1.3, 1),
    ]
    assert pick_trajectory(trajectories) is trajectories[2]
    assert pick_trajectory([]) is None
    console = Console(record=True, width=120)
    console.print(render_trajectory(trajectories[3]))
    text = console.export_text()
    assert "step 1 " in text and 'calculate({"expression": "37 * 12"}) → 444' in text
    assert "<answer>444</answer>" in text and "solution   444" in text and "reward     1.30" in text


def test_model_names_are_decided_before_anything_loads(tmp_path: Path):
    bundled = choose_model("Qwen2.5-0.5B")  # any letter case
    assert bundled.bundled is MODELS[DEFAULT_MODEL] and bundled.local and bundled.template == "qwen2_5"
    hub = choose_model("Qwen/Qwen3-4B")
    assert hub.hub_id == "Qwen/Qwen3-4B" and not hub.local and hub.model_type is None
    (tmp_path / "m").mkdir()
    with pytest.raises(UnknownModelError, match="no config.json"):
        choose_model(str(tmp_path / "m"))
    (tmp_path / "m" / "config.json").write_text("{}")
    assert choose_model(str(tmp_path / "m")).path == tmp_path / "m"
    with pytest.raises(UnknownModelError, match="Did you mean 'qwen2.5-0.5b'") as typo:
        choose_model("qwen-0.5b")
    assert "Qwen/Qwen3-4B" in str(typo.value)  # says what is accepted
    with pytest.raises(UnknownModelError, match="no such folder"):
        choose_model("./models/missing")


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--model", "qwen-0.5b", "--dry-run"],
        ["eval", "--env", str(DEFAULT_ENV), "--model", "qwen-0.5b", "--dataset", "d.jsonl", "--output", "o"],
    ],
)
def test_a_model_typo_fails_at_once_naming_what_is_accepted(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "qwen-0.5b" in err and "qwen2.5-0.5b" in err and "Traceback" not in err


def test_a_missing_dataset_fails_before_swift_starts(tmp_path: Path, capsys):
    env = ROOT / "examples" / "calculator" / "env.yaml"
    argv = ["train", "--env", str(env), "--dataset", str(tmp_path / "missing.jsonl"), "--dry-run"]
    assert main(argv) == 2
    assert "missing.jsonl: no such file" in capsys.readouterr().err
    assert not (tmp_path / "output").exists()


def test_a_row_with_a_broken_env_fails_at_start_naming_the_row(tmp_path: Path, capsys):
    (tmp_path / "bad.yaml").write_text("limits: {max_turns: 0}\n")
    rows = [{"messages": [{"role": "user", "content": "q"}], "env": str(DEFAULT_ENV)}] * 3
    rows.append({"messages": [{"role": "user", "content": "q"}], "env": str(tmp_path / "bad.yaml")})
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["train", "--dataset", str(dataset), "--dry-run", "--output-dir", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "row 4" in err and "bad.yaml" in err and "max_turns" in err
    rows[-1]["env"] = str(DEFAULT_ENV)
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(argv) == 0  # the same dataset with good envs passes the check


def test_the_phase_before_the_first_step_is_read_off_swift_log():
    assert phase_of("") is None
    log = "[INFO:swift] Successfully imported external_plugins: [...]\n[INFO:swift] Global seed set to 0\n"
    assert phase_of(log) == "loading the model"
    log += "[INFO:swift] train_dataset: Dataset({...})\n[INFO:swift] The logging file will be saved in: x\n"
    assert phase_of(log).startswith("step 1: first rollout")


def test_phases_are_printed_as_lines_when_the_console_is_no_terminal(tmp_path: Path):
    """`swift-rlfactory train | tee run.log` or a CI job: the live status line is not drawn there, so each
    phase ms-swift enters is printed as a line of its own, else the minutes before step 1 are silent."""
    swift = "import time\nfor line in ('Global seed set to 0', 'train_dataset: ...'):\n    print(line, flush=True)\n"
    swift += "    time.sleep(1.5)\n"
    plan = replace(_plan(False, tmp_path), command=[sys.executable, "-c", swift], run_dir=tmp_path)
    out = io.StringIO()
    code, _ = _run(plan, verbose=False, console=Console(file=out, width=200))
    printed = out.getvalue()
    assert code == 0 and (tmp_path / "swift.log").read_text().startswith("Global seed set")
    assert "loading the model" in printed and "encoding the dataset" in printed, printed


def test_after_the_last_step_the_phase_is_not_a_step_past_the_end(tmp_path: Path):
    """Once the last step is logged, ms-swift saves the adapter and exits: that is what the phase says, not
    "step 2/1"."""
    record = json.dumps({**LOGGED, "global_step/max_steps": "1/1"})
    log = str(tmp_path / "logging.jsonl")
    swift = f"import time\nopen({log!r}, 'w').write({record!r} + '\\n')\ntime.sleep(2.5)\n"
    plan = replace(_plan(False, tmp_path, steps=1), command=[sys.executable, "-c", swift], run_dir=tmp_path)
    out = io.StringIO()
    code, _ = _run(plan, verbose=False, console=Console(file=out, width=200))
    printed = out.getvalue()
    assert code == 0 and "step   1/1 · reward" in printed, printed
    assert "step 2/1" not in printed and "saving the LoRA adapter" in printed, printed


def test_a_tool_error_is_printed_once_as_the_model_reads_it(tmp_path: Path, capsys):
    env = str(ROOT / "examples" / "calculator" / "env.yaml")
    assert main(["tools", "call", env, "calculate", '{"expression": "1 +"}']) == 1
    out, err = capsys.readouterr()
    assert out.count("Error:") == 1 and "failed" in out and "tool call failed" not in out + err
    (tmp_path / "tools.py").write_text(
        "from swift_rlfactory.tools import tool\n\n@tool\ndef echo(text: str) -> str:\n"
        '    """Echo.\n\n    Args:\n        text: what to echo\n    """\n    return text\n'
    )
    (tmp_path / "env.yaml").write_text("tools: {python: [tools.py]}\n")
    assert main(["tools", "call", str(tmp_path / "env.yaml"), "echo", '{"text": ":x: [b]x[/b]"}']) == 0
    assert ":x: [b]x[/b]" in capsys.readouterr().out  # no emoji codes or markup in what the model reads


def test_a_misspelled_env_says_no_such_file(tmp_path: Path, capsys):
    argv = [
        "train",
        "--env",
        "examples/calculater/env.yaml",
        "--dry-run",
        "--output-dir",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--env examples/calculater/env.yaml: no such file" in err and "give --dataset" not in err


def test_a_dry_run_leaves_no_run_folder_behind(tmp_path: Path, capsys):
    assert main(["train", "--dry-run", "--output-dir", str(tmp_path / "out")]) == 0
    assert "--torch_dtype" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_a_mistyped_hub_id_fails_at_once_in_one_line(tmp_path: Path, capsys):
    """Neither a folder nor a bundled name: the hub is asked (or found unreachable) before anything else,
    dry run included, instead of 34 s and a 40-line traceback from ms-swift."""
    import time

    start = time.monotonic()
    argv = ["train", "--model", "Qwenn/Qwen3-4B-typo", "--dry-run", "--output-dir", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - start < 20
    assert "Qwenn/Qwen3-4B-typo: neither a local folder nor a bundled model" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3
    assert not (tmp_path / "out").exists()


def test_ctrl_c_says_where_the_partial_run_is_and_how_to_go_on(tmp_path: Path):
    import os
    import signal
    import subprocess
    import time

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "swift_rlfactory.cli",
        "train",
        "--model",
        str(model),
        "--output-dir",
        str(out),
    ]
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # Ctrl-C at its default, as in a terminal: an ignored SIGINT (left by an earlier test in this process)
        # would be inherited across exec, and ms-swift would run on to its own error.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - no threads started here
    )
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("*/swift.log")):  # ms-swift is starting: a Ctrl-C from the terminal
            assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read()
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        printed, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    [run_dir] = out.iterdir()
    assert proc.returncode == 130, printed
    assert f"the partial run is in {run_dir}" in printed
    assert "no adapter was saved" in printed and f"start again with: {run_dir / 'command.sh'}" in printed


def test_the_stop_note_names_the_saved_adapter_and_the_command_to_resume(tmp_path: Path):
    from swift_rlfactory.train import stopped_note

    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-2" / "adapter_model.safetensors").touch()
    rows = [{**LOGGED, "global_step/max_steps": f"{n}/3"} for n in (1, 2)]
    (tmp_path / "logging.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    console = Console(record=True, width=400)
    console.print(stopped_note(tmp_path, tmp_path / "command.sh", 3))
    text = console.export_text()
    assert f"interrupted after 2 of 3 logged steps; the partial run is in {tmp_path}" in text
    assert f"adapter saved: {tmp_path / 'checkpoint-2'}" in text
    assert f"{tmp_path / 'command.sh'} --resume_from_checkpoint {tmp_path / 'checkpoint-2'}" in text
