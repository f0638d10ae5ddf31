"""Every command block of the README runs as written on this CPU machine, or is listed in SKIP saying why.

The blocks are the README's 4-space indented blocks and its ```bash/```sh fences; YAML and Python fences are
files, not commands (FENCES), and an indented block that is not a command is listed in NOT_COMMANDS. Each
block is one case named by its first line, and a block no table knows fails the test. What a case changes
in its block is written out in its ``replace`` calls, so the rest of each line is the README's:
- ``pip install ...`` commands are left out: this test session's install stands in for them;
- a command that trains runs one step (``--steps 1``), and a model CI cannot download (the bundled 0.5B of
  ``swift-rlfactory train``, ``PATH``) becomes the tests' tiny Qwen3 (``conftest.agent_model``, with
  ``--model-type qwen3 --template qwen3``, which ms-swift cannot guess for a random folder); an eval of the
  DeepSearch test set scores two questions (``--limit 2``);
- placeholders (``ENV.yaml``, ``output/run/...``, ``<timestamp>``, ``pool.jsonl``, ``...``) become this
  test's files and the main job's run folder, outputs go to a temporary folder;
- servers (``web-ui``, ``view``) get a free port, are asked for their page and stopped.
  ``serve-agent`` is served over stdio and on a free HTTP port, and its tool called once on each.
The one real training step is the main job's; the evals, ``rewards`` and ``view`` read what it wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from .conftest import AGENT_PAIRS, ROOT

pytestmark = pytest.mark.timeout(600)

README = ROOT / "README.md"
FENCES = {"yaml": "an environment file", "python": "a Python module"}
NOT_COMMANDS = {
    "G[i,t]      = sum_{k>=t} gamma^(k-t) * r[i,k]": "the turn-level credit formula",
}
SKIP = {
    'pip install torch==2.13.0 && pip install -e ".[test,ui]" && bash scripts/test.sh': (
        "installs the test extras and runs the whole test suite, this file included"
    ),
    "RLFACTORY_ENV=examples/calculator/env.yaml \\": (
        "tests/test_readme_plugin_command.py runs it: one step of the tiny Qwen3 with the flags the README "
        "adds on a machine without a GPU"
    ),
    "RLFACTORY_ENV=examples/deepsearch/env.yaml swift rlhf --rlhf_type grpo \\": (
        "needs a GPU: colocated vLLM (--use_vllm true) in bfloat16"
    ),
    "CUDA_VISIBLE_DEVICES=0 RLFACTORY_ENV=env.yaml swift rollout --model MODEL \\": (
        "needs GPUs: swift rollout serves the model with vLLM"
    ),
    "NPROC_PER_NODE=8 RLFACTORY_ENV=examples/deepsearch/env.yaml swift rlhf --rlhf_type grpo \\": (
        "needs 8 GPUs; tests/test_swift_rlhf_ranks.py runs the same launcher on two CPU ranks"
    ),
}
MAIN_JOB = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu   # CPU-only machine"


def readme_blocks() -> dict[str, str]:
    """The README's shell blocks by first line (a fence of another language must be in FENCES)."""
    text = README.read_text()
    blocks = {}
    for language, body in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S):
        assert language in FENCES or language in ("bash", "sh"), f"README: a ```{language} fence"
        if language not in FENCES:
            blocks[body.splitlines()[0]] = body
    unfenced = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    for match in re.finditer(r"(?:^|\n)\n((?: {4}.*\n)+)", unfenced):
        body = "".join(line[4:] + "\n" for line in match.group(1).splitlines())
        blocks[body.splitlines()[0]] = body
    return blocks


def without_installs(block: str) -> str:
    """The block with its ``pip install`` commands left out (``a && b`` keeps the commands that are not)."""
    kept = []
    for line in block.replace("\\\n", " ").splitlines():
        commands = [c for c in line.split("&&") if not c.strip().startswith("pip install")]
        if commands:
            kept.append("&&".join(commands).strip())
    return "\n".join(kept) + "\n"


def shell_env() -> dict[str, str]:
    bin_dir = Path(sys.executable).parent  # swift-rlfactory and swift, as the install put them
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "200",
    }


def run(script: str, cwd: Path = ROOT, codes: tuple[int, ...] = (0,)) -> str:
    """Run ``script`` with bash (stopping at the first failure); its output, asserted to have exited with
    one of ``codes``."""
    done = subprocess.run(
        ["bash", "-ec", script], cwd=cwd, env=shell_env(), capture_output=True, text=True, timeout=560
    )
    output = done.stdout + done.stderr
    assert done.returncode in codes, f"{script}\n{output[-4000:]}"
    return output


def tiny(model: Path) -> str:
    return f"--model {shlex.quote(str(model))} --model-type qwen3 --template qwen3"


@pytest.fixture(scope="module")
def main_job(agent_model: Path, tmp_path_factory) -> tuple[str, Path]:
    """The README's first block, cut to one step of the tiny Qwen3, in a folder of its own: its output
    and the run folder it made."""
    work = tmp_path_factory.mktemp("main-job")
    script = without_installs(readme_blocks()[MAIN_JOB])
    assert script == "swift-rlfactory train\n", script
    output = run(script.replace("train", f"train {tiny(agent_model)} --steps 1"), cwd=work)
    [run_dir] = (work / "output" / "rlfactory").iterdir()
    return output, run_dir


def case_main_job(main_job: tuple[str, Path]):
    output, run_dir = main_job
    assert re.search(r"step\s+1/1 · reward", output), output[-2000:]
    for name in ("command.sh", "swift.log", "logging.jsonl", "trajectories.jsonl"):  # as the README lists
        assert (run_dir / name).is_file(), name
    assert (run_dir / "checkpoint-1" / "adapter_model.safetensors").is_file()
    assert os.access(run_dir / "command.sh", os.X_OK)


def case_tools(block: str):
    output = run(block)
    assert "convert" in output
    assert "1.86" in output  # 3 km in miles, the observation of the real call


def case_eval(block: str, agent_model: Path, main_job: tuple[str, Path], tmp_path: Path):
    script = block.replace("--model PATH", tiny(agent_model))
    script = script.replace("[--adapters LORA]", f"--adapters {main_job[1] / 'checkpoint-1'}")
    script = script.replace("--output runs/eval", f"--output {tmp_path / 'eval'}").rstrip() + " --limit 2"
    output = run(script)
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["questions"] == 2 and "pass@4" in output, output[-2000:]


def case_select(block: str, agent_model: Path, tmp_path: Path):
    pool = tmp_path / "pool.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
        for a, b in AGENT_PAIRS[:2]
    ]
    pool.write_text("".join(json.dumps(row) + "\n" for row in rows))
    script = block.replace("eval ...", f"eval --env examples/calculator/env.yaml {tiny(agent_model)}")
    script = script.replace("pool.jsonl", str(pool)).replace("runs/pool", str(tmp_path / "pool"))
    output = run(script.replace("grpo.jsonl", str(tmp_path / "grpo.jsonl")), codes=(0, 1))
    # select exits 1 when no question is left to train on, as the tiny model may leave none
    kept = re.search(r"(\d+) of 2 scored questions have their em rate in \(0, 1\)", output)
    assert kept and (tmp_path / "grpo.jsonl").is_file(), output[-2000:]
    assert len((tmp_path / "grpo.jsonl").read_text().splitlines()) == int(kept.group(1))


def case_rewards(block: str, main_job: tuple[str, Path]):
    script = block.replace("ENV.yaml", "examples/calculator/env.yaml").replace("[--json]", "--json")
    report = json.loads(run(script.replace("output/run", str(main_job[1]))))
    assert report, report


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(line: str, log: Path) -> None:
    """Start the server ``line`` starts on a free port, fetch its page, stop it (its whole process group)."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {line} --port {port}"],
            cwd=ROOT,
            env=shell_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, f"{line} exited {proc.returncode}:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"{line} not up after 240 s:\n{log.read_text()[-4000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                    assert page.status == 200
                    return
            except OSError:
                time.sleep(1)
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


def case_web_ui(block: str, main_job: tuple[str, Path], tmp_path: Path):
    pytest.importorskip("gradio", reason="the ui extra is not installed: pip install -e '.[ui]'")
    lines = without_installs(block).replace("output/rlfactory/<timestamp>", str(main_job[1])).splitlines()
    assert [line.split()[1] for line in lines] == ["web-ui", "view"], lines
    for n, line in enumerate(lines):
        serve(line.split("#")[0].strip(), tmp_path / f"server-{n}.log")


async def ask_agent(client: Any) -> None:
    """List the served agent's one tool and give it a task: an answer (no error result) comes back."""
    async with client:
        [tool] = (await client.list_tools()).tools
        assert tool.name == "calculator", tool.name
        result = await client.call_tool(tool.name, {"task": "What is 2 + 3?"})
        assert not result.is_error and "answer" in result.structured_content, result.content


def case_serve_agent(block: str, agent_model: Path, main_job: tuple[str, Path], tmp_path: Path):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    script = block.replace("--model PATH", tiny(agent_model))
    script = script.replace("[--adapters LORA]", f"--adapters {main_job[1] / 'checkpoint-1'}")
    stdio, http = without_installs(script).splitlines()
    over_stdio = StdioServerParameters(
        command="bash", args=["-c", f"exec {stdio}"], env=shell_env(), cwd=ROOT
    )
    asyncio.run(ask_agent(Client(over_stdio, read_timeout_seconds=300)))
    port = free_port()
    log = tmp_path / "serve-agent.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", "exec " + http.replace("--port 8765", f"--port {port}")],
            cwd=ROOT, env=shell_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while f"127.0.0.1:{port}/mcp" not in log.read_text():
            assert proc.poll() is None, f"serve-agent exited {proc.returncode}:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"serve-agent not up after 240 s:\n{log.read_text()[-4000:]}"
            time.sleep(1)
        asyncio.run(ask_agent(Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=300)))
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


RUN = {
    MAIN_JOB: case_main_job,
    "swift-rlfactory tools list examples/unit_converter/env.yaml": case_tools,
    "swift-rlfactory eval --env examples/deepsearch/env.yaml --model PATH [--adapters LORA] \\": case_eval,
    "swift-rlfactory eval ... --dataset pool.jsonl --output runs/pool --samples 4 --temperature 1": case_select,
    "swift-rlfactory rewards ENV.yaml --trajectories output/run/trajectories.jsonl [--json]": case_rewards,
    "swift-rlfactory serve-agent examples/calculator/env.yaml --model PATH [--adapters LORA]": case_serve_agent,
    'pip install -e ".[ui]"                       # gradio 6.31 (5.x pins pydantic<2.12, which breaks mcp)': (
        case_web_ui
    ),
}


@pytest.mark.parametrize("first_line", list(readme_blocks()), ids=lambda line: line.strip(" \\"))
def test_readme_block(first_line: str, request):
    """Each block: run by its case in RUN, or skipped for the reason SKIP or NOT_COMMANDS gives."""
    if first_line in SKIP:
        pytest.skip(SKIP[first_line])
    if first_line in NOT_COMMANDS:
        pytest.skip(f"not a command: {NOT_COMMANDS[first_line]}")
    assert first_line in RUN, f"a README block no case runs nor skips: {first_line!r}"
    case = RUN[first_line]
    names = case.__code__.co_varnames[: case.__code__.co_argcount]
    kwargs = {name: request.getfixturevalue(name) for name in names if name != "block"}
    if "block" in names:
        kwargs["block"] = readme_blocks()[first_line].replace("\\\n", " ")
    case(**kwargs)


def test_every_case_names_a_block_the_readme_has():
    stale = (RUN.keys() | SKIP.keys() | NOT_COMMANDS.keys()) - readme_blocks().keys()
    assert not stale, f"cases for blocks the README no longer has: {stale}"
