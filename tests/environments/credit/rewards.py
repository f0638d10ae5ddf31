"""A per-turn reward of the turn-level credit test environment."""

from swift_rlfactory.trajectory import Trajectory


def turn_brevity(trajectory: Trajectory) -> list[float]:
    """Per turn: shorter is better, ``1 / (1 + characters / 100)``; sampled turns differ, so it always varies."""
    return [1.0 / (1.0 + len(text) / 100) for text in trajectory.assistant_turns]
