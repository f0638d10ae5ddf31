"""One ``reward:`` entry of an environment file, validated at load time.

The config type that both the environment file and the reward registry read, so it lives below both;
the fields are tabled in docs/rewards.md#reward-terms.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TIMEOUT_S = 60.0


class RewardTerm(BaseModel):
    """One weighted reward component: a built-in name, a registered name, or a ``module:function`` path.

    Attributes:
        name: what to score with (resolved when the environment loads, so a typo fails at start-up).
        weight: factor of this component in the total (finite).
        args: keyword arguments passed to the reward function.
        per_turn: the function returns one score per assistant turn.
        timeout_s: seconds one score may take before it counts as failed.
        fallback: the score given when the reward fails, times out or returns a bad value.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    weight: float = 1.0
    args: dict[str, Any] = Field(default_factory=dict)
    per_turn: bool = False
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    fallback: float = 0.0
