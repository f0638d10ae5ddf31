"""Turn-level credit inside ms-swift 4.6's GRPO trainer: a subclass that rewrites per-token advantages.

Stock ms-swift GRPO until an environment sets ``credit: {mode: turn}``; then, right after ms-swift's
``_postprocess_batch``, each turn's ``A_out + turn_weight * A_turn[t]`` lands on its trained tokens. Where it
hooks in and which ms-swift options it covers or refuses:
docs/rewards.md#inside-ms-swifts-grpo-trainer.
"""

from __future__ import annotations

import logging
import os
import statistics
from dataclasses import dataclass
from typing import Any

import torch
from accelerate.utils import gather_object
from swift.rlhf_trainers import GRPOTrainer
from swift.rlhf_trainers.utils import get_even_process_data

from ..rewards.credit import Scale, discounted_returns, token_advantages, trained_token_turns, turn_advantages
from ..run_config import ENV_VAR
from .swift_run import RUN

logger = logging.getLogger("swift_rlfactory")

TOKEN_LEVEL_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "fipo")


@dataclass
class _TurnCredit:
    """One trajectory's per-turn rewards and its environment's credit settings (gathered across ranks)."""

    env_path: str | None
    rewards: list[float]
    returns: list[float]
    turn_weight: float


class CreditGRPOTrainer(GRPOTrainer):
    """ms-swift's GRPO trainer with per-turn advantages for ``credit: {mode: turn}`` environments."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._credit_checked = False
        self._warned_no_turn_rewards = False
        if os.environ.get(ENV_VAR):
            self._check_credit(None)

    def _check_credit(self, env_path: str | None) -> None:
        """Refuse a turn-credit environment without per-turn rewards, and the ms-swift options whose loss
        cannot take one advantage per token; ``env_path`` ``None`` is ``$RLFACTORY_ENV``."""
        env = RUN.env(env_path)
        where = env_path or os.environ.get(ENV_VAR)
        if env.config.credit.mode != "turn":
            return
        if not env.reward.per_turn_names:
            raise ValueError(
                f"{where}: credit.mode turn needs a per-turn reward (a turn_* built-in, or a reward term "
                "with per_turn: true); without one every turn advantage is 0"
            )
        problems = []
        if self.loss_type not in TOKEN_LEVEL_LOSSES:
            problems.append(f"--loss_type {self.loss_type} (use one of {', '.join(TOKEN_LEVEL_LOSSES)})")
        if self.use_liger_loss:
            problems.append("--use_liger_kernel true (its fused loss takes one advantage per sequence)")
        if self._has_teacher_explicit():
            problems.append(
                "--teacher_model / --teacher_model_server (OPD-RL, RLSD and SDAR set per-token advantages)"
            )
        if self.off_policy_sequence_mask_delta is not None:
            problems.append("--off_policy_sequence_mask_delta (it masks sequences by one advantage's sign)")
        if self.template.sequence_parallel_size > 1:
            problems.append("--sequence_parallel_size > 1 (samples are regrouped across ranks)")
        if problems:
            raise ValueError(
                f"{where}: credit.mode turn does not work with "
                + "; ".join(problems)
                + ". Drop the flag or set credit.mode: trajectory."
            )
        self._credit_checked = True

    def _postprocess_batch(self, samples: list[Any], batch_encoded_inputs: list[dict[str, Any]]) -> None:
        super()._postprocess_batch(samples, batch_encoded_inputs)
        # On several GPUs dynamic sampling gathers the kept samples of every rank and slices them out
        # again, so a rank may train samples another rank scored: every rank's per-turn totals are pooled.
        scored: dict[str, list[float]] = {}
        for store in gather_object([RUN.drain_turn_rewards()]):
            scored.update(store)
        kept = [scored.get(sample.request_id) for sample in samples]
        local = [self._turn_credit(sample, rewards) for sample, rewards in zip(samples, kept, strict=True)]
        everyone: list[_TurnCredit | None] = gather_object(local)
        if all(credit is None for credit in everyone):
            return  # mode trajectory: ms-swift's advantages stay exactly as they are
        if not self._credit_checked:  # a turn-credit environment named by a dataset row's `env` column
            self._check_credit(next(credit.env_path for credit in everyone if credit))
        if self.dynamic_num_samples:
            raise ValueError(
                "credit.mode turn needs one training sample per trajectory; this multi-turn scheduler "
                "splits trajectories into several samples"
            )
        mode = "train" if self.model.training else "eval"
        size = self.num_generations if mode == "train" else self.num_generations_eval
        groups = [range(start, start + size) for start in range(0, len(everyone), size)]
        advantages = turn_advantages(
            [credit.returns if credit else None for credit in everyone], groups, self._turn_scale()
        )
        mine = get_even_process_data(self, list(zip(everyone, advantages, strict=True)))
        unlocated = self._write_token_advantages(samples, batch_encoded_inputs, mine)
        self._log_credit(mode, everyone, advantages, unlocated)

    def _turn_credit(self, sample: Any, rewards: list[float] | None) -> _TurnCredit | None:
        if rewards is None:
            return None
        env_path = sample.extra.get("env")
        config = RUN.env(env_path).config.credit
        if not rewards and not self._warned_no_turn_rewards:
            logger.warning(
                "credit.mode is turn but the reward spec gave no per-turn rewards: turn advantages are 0 "
                "(add a turn_* built-in or a reward term with per_turn: true)"
            )
            self._warned_no_turn_rewards = True
        return _TurnCredit(env_path, rewards, discounted_returns(rewards, config.gamma), config.turn_weight)

    def _turn_scale(self) -> Scale:
        return self.scale_rewards if self.scale_rewards in ("group", "batch", "none") else "group"

    def _write_token_advantages(
        self,
        samples: list[Any],
        batch_encoded_inputs: list[dict[str, Any]],
        mine: list[tuple[_TurnCredit | None, list[float]]],
    ) -> int:
        """Put each turn's advantage on its trained tokens; returns how many turns were not found."""
        position = {id(sample): i for i, sample in enumerate(samples)}
        unlocated = 0
        for batch, encoded in zip(self.split_by_mini_batches(samples), batch_encoded_inputs, strict=True):
            grpo_batch = encoded["grpo_batch"]
            if grpo_batch.teacher_per_token_logps is not None:
                raise ValueError(
                    "credit.mode turn does not work with a teacher signal (the dataset's teacher_prompt "
                    "column turns on ms-swift's self-distillation); drop the column or use mode trajectory"
                )
            for row, sample in enumerate(batch):
                credit, turn_advantage = mine[position[id(sample)]]
                if credit is None:
                    continue
                turns, masks = _nested(sample.response_token_ids), _nested(sample.response_loss_mask)
                token_turns = trained_token_turns(
                    list(sample.encoded["input_ids"]), list(sample.encoded["labels"]), turns, masks
                )
                trained_turns = {
                    t for t, ids in enumerate(turns) if ids and (t >= len(masks) or any(masks[t]))
                }
                unlocated += len(trained_turns - set(token_turns))
                trained = grpo_batch.completion_mask[row].nonzero(as_tuple=True)[0]
                if len(trained) != len(token_turns):  # not the frame we expect: keep ms-swift's advantage
                    logger.warning("credit: %d trained tokens but %d labels", len(trained), len(token_turns))
                    continue
                values = token_advantages(
                    float(sample.advantages), turn_advantage, token_turns, credit.turn_weight
                )
                row_advantages = torch.zeros_like(grpo_batch.advantages[row])
                row_advantages[trained] = torch.tensor(
                    values, dtype=row_advantages.dtype, device=row_advantages.device
                )
                grpo_batch.advantages[row] = row_advantages
        return unlocated

    def _log_credit(
        self, mode: str, everyone: list[_TurnCredit | None], advantages: list[list[float]], unlocated: int
    ) -> None:
        weighted = [
            abs(credit.turn_weight * a)
            for credit, turn in zip(everyone, advantages, strict=True)
            if credit
            for a in turn
        ]
        rewards = [r for credit in everyone if credit for r in credit.rewards]
        credited = [credit for credit in everyone if credit]
        metrics = self._metrics[mode]
        metrics["credit/turn_advantage_abs_mean"].append(statistics.fmean(weighted) if weighted else 0.0)
        metrics["credit/turn_reward_mean"].append(statistics.fmean(rewards) if rewards else 0.0)
        metrics["credit/turns_per_trajectory"].append(len(rewards) / len(credited))
        metrics["credit/unlocated_turns"].append(float(unlocated))


def _nested(values: list) -> list[list]:
    """ms-swift keeps a single-turn rollout's ids flat and a multi-turn one's per turn; always per turn."""
    if values and not isinstance(values[0], list):
        return [list(values)]
    return [list(v) for v in values]
