"""The evaluation loop's bounds, against a served model: ``--concurrency`` episodes in flight at once, and
the ``context`` stop of :func:`~swift_rlfactory.rollout.episode.run_episode` at ``--max-length``.

The model is the scripted OpenAI-compatible server of ``conftest.ScriptedChat``; what is measured (requests
in flight, where an episode stopped) is counted on the server's side or read from the log the CLI wrote.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from swift_rlfactory.cli import main
from swift_rlfactory.runs.log import read_trajectories

from .conftest import ScriptedChat
from .test_eval import add_then_answer, served_eval, write_dataset

pytestmark = pytest.mark.timeout(120)


class Gauge:
    """A served model that calls ``add`` then answers, each reply after 0.3 s, counting the requests it is
    answering right now and the episodes open (asked their question, not yet their answer): the most of each
    at once. The client's connection pool is as large as ``--concurrency`` too, so requests alone would not
    show a loop that starts every episode at once; open episodes do."""

    def __init__(self) -> None:
        self.requests = self.most_requests = 0
        self.episodes = self.most_episodes = 0

    async def answer(self, body: dict) -> str:
        first = body["messages"][-1]["role"] == "user"
        self.requests += 1
        self.episodes += first
        self.most_requests = max(self.most_requests, self.requests)
        self.most_episodes = max(self.most_episodes, self.episodes)
        try:
            await asyncio.sleep(0.3)  # long enough for every episode the client lets in to arrive
            return add_then_answer(body)
        finally:
            self.requests -= 1
            self.episodes -= not first


@pytest.mark.parametrize("concurrency", [1, 3])
def test_eval_keeps_concurrency_episodes_in_flight_and_no_more(tmp_path: Path, capsys, concurrency):
    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4), (2, 5), (6, 1), (1, 6)])
    gauge = Gauge()
    with ScriptedChat(gauge.answer) as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out")
        code = main([*argv, "--samples", "2", "--concurrency", str(concurrency)])
    assert code == 0, capsys.readouterr().out
    assert len(server.requests) == 16  # 4 questions x 2 samples, two turns each
    assert gauge.most_requests == concurrency
    assert gauge.most_episodes == concurrency


def run_until(tmp_path: Path, max_length: int) -> dict:
    """One episode of add-then-answer with ``--max-tokens 20`` under ``--max-length max_length``: its record.

    The server reports 100 + 20 tokens for every turn and the observation ``7`` counts 0 + 12 (role markers
    and tags), so after the first turn the context needs 120 + 12 + a whole completion of 20 = 152."""
    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / f"out-{max_length}"
    with ScriptedChat(add_then_answer) as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out)
        assert main([*argv, "--max-tokens", "20", "--max-length", str(max_length)]) == 0
    [record] = read_trajectories(out / "trajectories.jsonl")
    return record


def test_an_episode_whose_next_turn_would_overflow_max_length_stops_with_context(tmp_path: Path):
    fits = run_until(tmp_path, 152)
    assert fits["stop_reason"] == "answer" and fits["turns"] == 2
    assert fits["messages"][-1]["content"] == "<answer>7</answer>"

    over = run_until(tmp_path, 151)
    assert over["stop_reason"] == "context" and over["turns"] == 1
    assert [c["observation"] for c in over["tool_calls"]] == ["7"]  # the call ran; the next turn did not
    assert [m["role"] for m in over["messages"]][-2:] == ["assistant", "tool"]
