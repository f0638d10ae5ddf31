"""Tool metrics of a training batch: what a run's log says about tool use."""

from swift_rlfactory.rollout.metrics import tool_metrics
from swift_rlfactory.trajectory import Trajectory


def _call(turn: int, latency: float, error: str | None = None) -> dict:
    return {"name": "calculate", "turn": turn, "latency_s": latency, "error": error, "cache_hit": False}


def test_max_tool_turns_counts_turns_in_sequence_not_calls():
    """Two calls in one turn overlap, so they count once; the trajectory with three tool turns sets the floor."""
    batch = [
        Trajectory(messages=[], tool_calls=[_call(0, 0.5), _call(0, 0.5)], turns=2, stop_reason="answer"),
        Trajectory(
            messages=[],
            tool_calls=[_call(0, 0.5), _call(1, 0.5), _call(2, 0.5, "timeout")],
            turns=3,
            stop_reason="max_turns",
        ),
        Trajectory(messages=[], turns=1, stop_reason="answer"),
    ]
    metrics = tool_metrics(batch)
    assert metrics["tools/max_tool_turns"] == 3.0
    assert metrics["tools/calls_per_trajectory"] == 5 / 3
    assert metrics["tools/error_rate"] == 1 / 5
    assert metrics["stop/max_turns"] == 1 / 3


def test_a_batch_without_calls_has_no_chain_and_no_call_rates():
    metrics = tool_metrics([Trajectory(messages=[], turns=1, stop_reason="answer")])
    assert metrics["tools/max_tool_turns"] == 0.0
    assert "tools/error_rate" not in metrics and "tools/latency_p50_s" not in metrics
