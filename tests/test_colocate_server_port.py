"""benchmarks/colocate_h200.sh in server mode with stand-ins for ``swift rollout`` and ``swift rlhf``: the trainer
is sent to the port the rollout server says it took (ms-swift moves to the next free port when the asked-for
one is busy: on the H100 a run sent to 8000 while its server sat on 8001 waited until its deadline), and each
run's server ends with its whole process group (vLLM's engine core is a child of it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_mcp import alive

ROLLOUT = r"""import os, subprocess, sys, time
args = sys.argv[1:]
if os.environ.get("FAKE_ROLLOUT") == "die":
    sys.exit("model not found")
port = int(args[args.index("--port") + 1]) + int(os.environ.get("FAKE_SHIFT", "0"))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # the engine core
with open(os.environ["FAKE_CHILDREN"], "a") as f:
    f.write(f"{child.pid}\n")
if os.environ.get("FAKE_ROLLOUT") != "mute":
    print(f"[WARNING:swift] The rollout server is listening on 0.0.0.0:{port} without an API key", flush=True)
time.sleep(300)
"""
RLHF = r"""import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(json.dumps(args) + "\n")
out = args[args.index("--output_dir") + 1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "logging.jsonl"), "w") as f:
    for step in (1, 2):
        f.write(json.dumps({"step_time": 1.0, "global_step/max_steps": f"{step}/2"}) + "\n")
"""


def run_server_mode(
    tmp_path: Path, **env: str
) -> tuple[subprocess.CompletedProcess, list[list[str]], list[int]]:
    fake = tmp_path / "fake" / "swift" / "cli"
    fake.mkdir(parents=True)
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "rollout.py").write_text(ROLLOUT)
    (fake / "rlhf.py").write_text(RLHF)
    calls, children = tmp_path / "calls.jsonl", tmp_path / "children"
    environ = {
        **os.environ, "PYTHONPATH": str(tmp_path / "fake"), "FAKE_CALLS": str(calls), "FAKE_CHILDREN": str(children),
        "DEVICE_ENV": "/nonexistent", "WORKLOAD": "lookup", "SCHEDULERS": "rlfactory", "SERVER_GPUS": "0 0",
        "ROLLOUT_WAIT": "20", **env,
    }  # fmt: skip
    done = subprocess.run(
        ["bash", "benchmarks/colocate_h200.sh", "0", "2", str(tmp_path / "out"), "server"], cwd=ROOT, env=environ,
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    argvs = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    pids = [int(line) for line in children.read_text().split()] if children.exists() else []
    return done, argvs, pids


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shift", [0, 1, 7])
def test_the_trainer_goes_to_the_port_the_server_took_and_the_server_group_ends(tmp_path, shift):
    done, argvs, pids = run_server_mode(tmp_path, FAKE_SHIFT=str(shift), ROLLOUT_PORT="8100")
    assert done.returncode == 0, done.stdout + done.stderr
    [argv] = argvs
    assert argv[argv.index("--vllm_server_port") + 1] == str(8100 + shift)
    assert ("was busy, it took" in done.stdout) == (shift != 0)
    assert pids and not any(alive(pid) for pid in pids)  # the engine-core stand-in went with its server


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("behaviour", "says"), [("die", "exited before it listened"), ("mute", "named no port within 3 s")]
)
def test_a_server_that_dies_or_never_listens_fails_the_run_naming_its_log_without_starting_a_trainer(
    tmp_path, behaviour, says
):
    done, argvs, pids = run_server_mode(tmp_path, FAKE_ROLLOUT=behaviour, ROLLOUT_WAIT="3")
    assert done.returncode != 0
    assert says in done.stderr and "rollout-server-rlfactory-0.log" in done.stderr
    assert argvs == []  # no trainer waited on a server that is not there
    assert not any(alive(pid) for pid in pids)
