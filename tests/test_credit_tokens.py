"""Token-level proof of turn-level credit with the real Qwen3 tokenizer, through ms-swift's own code.

One GRPO group of three scripted trajectories (call ``add`` then answer; a failing call then a wrong
answer; an answer straight away) runs through ms-swift's multi-turn driver with our scheduler (the tool
really runs), is turned into ``GRPOSample``s, encoded (``encode_sample``) and collated
(``collate_to_grpo_micro_batch``) exactly as ``GRPOTrainer._prepare_batch_inputs`` does, and then
``_postprocess_batch`` of the stock trainer and of ``CreditGRPOTrainer`` write the per-token advantages
the loss reads. Only the model's text is scripted; the subject is where each advantage lands.
"""

from __future__ import annotations

import asyncio
import copy
import statistics
from collections import defaultdict, deque
from types import SimpleNamespace

import pytest
import torch
from swift.infer_engine.protocol import (
    RequestConfig,
    RolloutInferRequest,
)
from swift.model import get_processor
from swift.rl_core.data import GRPOSample
from swift.rlhf_trainers import GRPOTrainer
from swift.rlhf_trainers.utils import collate_to_grpo_micro_batch, encode_sample
from swift.rollout.agent_loop import run_multi_turn
from swift.template import get_template
from transformers import Qwen3Config

from swift_rlfactory.adapters.swift import RUN, RLFactoryScheduler
from swift_rlfactory.adapters.swift_credit import CreditGRPOTrainer
from swift_rlfactory.adapters.swift_run import build_trajectories
from swift_rlfactory.trajectory import Trajectory

from .conftest import ROOT
from .faults.driver import response_prefix, scripted_output

GOOD_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 4000, "b": 242}}\n</tool_call>'
BAD_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": "many"}}\n</tool_call>'
RIGHT, WRONG = "<answer>4242</answer>", "<answer>17</answer>"
# (turns the model writes, scalar outcome reward, per-turn reward totals)
SCRIPT = [
    ([GOOD_CALL, RIGHT], 1.0, [1.0, 1.0]),
    ([BAD_CALL, WRONG], 0.0, [0.0, 0.5]),
    ([RIGHT], 1.0, [1.0]),
]
GAMMA, TURN_WEIGHT = 0.5, 0.8


@pytest.fixture(scope="module")
def template(qwen3_tokenizer_dir, tmp_path_factory):
    """ms-swift's qwen3 template around the real tokenizer (a config.json lets ms-swift load it alone)."""
    folder = tmp_path_factory.mktemp("qwen3")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((qwen3_tokenizer_dir / name).read_bytes())
    Qwen3Config(vocab_size=151936, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, intermediate_size=32, head_dim=16).save_pretrained(folder)  # fmt: skip
    processor = get_processor(str(folder), model_type="qwen3", check_model=False)
    template = get_template(processor, template_type="qwen3", max_length=4096)
    template.set_mode("train")
    return template


@pytest.fixture
def env_path(tmp_path, monkeypatch):
    path = tmp_path / "env.yaml"
    path.write_text(
        "system_prompt: Use the tools, then answer in <answer></answer>.\n"
        f"tools: {{python: ['{ROOT / 'tests' / 'environments' / 'agent' / 'tools.py'}']}}\n"
        "reward: [{name: em}, {name: turn_tool_success}]\n"
        f"credit: {{mode: turn, gamma: {GAMMA}, turn_weight: {TURN_WEIGHT}}}\n"
    )
    monkeypatch.setenv("RLFACTORY_ENV", str(path))
    return path


def _samples(template) -> list[GRPOSample]:
    """The scripted group through ms-swift's driver and our scheduler, as the trainer's samples."""
    tokenizer = template.tokenizer
    scheduler = RLFactoryScheduler(max_turns=3, tokenizer=tokenizer, template=template)
    prefix = response_prefix(template)
    samples = []
    for i, (turns, _, _) in enumerate(SCRIPT):
        request = RolloutInferRequest(
            messages=[{"role": "user", "content": "What is 4000 + 242?"}], uuid=f"r{i}"
        )
        asyncio.run(scheduler.on_trajectory_start([request]))
        replies = iter(turns[1:])
        [out] = run_multi_turn(
            [request],
            [scripted_output(tokenizer, prefix, turns[0])],
            scheduler,
            lambda reqs, cfg, replies=replies: [
                scripted_output(tokenizer, prefix, next(replies)) for _ in reqs
            ],
            RequestConfig(),
            max_turns=3,
        )
        sample = GRPOSample(messages=[], prompt_id="p0", request_id=f"r{i}")
        sample.apply_rollout_output(rollout_output=out)
        samples.append(sample)
    return samples


def _batch(samples, template) -> list[dict]:
    """What ``GRPOTrainer._prepare_batch_inputs`` builds, minus the model forward."""
    for s in samples:
        s.encoded = encode_sample(s, template)
        s.encoded.pop("_extra_kwargs", None)
    model_inputs, grpo_batch = collate_to_grpo_micro_batch(
        samples, template, device=torch.device("cpu"), use_logits_to_keep=True
    )
    return [{"model_inputs": model_inputs, "grpo_batch": grpo_batch}]


def _trainer(cls, template):
    """A trainer object with the state ``_postprocess_batch`` reads (no model, no accelerator)."""
    trainer = object.__new__(cls)
    trainer.__dict__.update(
        _has_teacher=False, use_teacher_api=False, model=SimpleNamespace(training=True), kl_in_reward=False,
        beta=0.0, reward_weights=torch.tensor([1.0]), reward_func_names=["rlfactory"],
        num_generations=len(SCRIPT), num_generations_eval=len(SCRIPT), dynamic_num_samples=False,
        advantage_estimator="grpo", scale_rewards="group", advantage_reweight=None, sdar_loss_coef=0.0,
        teacher_kl_coef=0.0, template=template, args=SimpleNamespace(steps_per_generation=1),
        accelerator=SimpleNamespace(num_processes=1, process_index=0, device=torch.device("cpu")),
        _metrics=defaultdict(lambda: defaultdict(list)),
        _logs={"advantages": deque(maxlen=64), "rewards": defaultdict(lambda: deque(maxlen=64))},
        _rewards_per_func=torch.tensor([[r] for _, r, _ in SCRIPT]),
        _credit_checked=True, _warned_no_turn_rewards=False,
    )  # fmt: skip
    return trainer


def _advantages(cls, template, samples, turn_rewards: bool):
    samples = copy.deepcopy(samples)
    batch = _batch(samples, template)
    RUN.turn_rewards.clear()
    if turn_rewards:  # what RLFactoryReward hands over for a `credit: {mode: turn}` environment
        RUN.turn_rewards.update({s.request_id: list(r) for s, (_, _, r) in zip(samples, SCRIPT, strict=True)})
    trainer = _trainer(cls, template)
    cls._postprocess_batch(trainer, samples, batch)
    return batch[0], trainer


def _expected() -> list[list[float]]:
    """The formula of rewards/credit.py, written out for this group."""
    outcomes = [r for _, r, _ in SCRIPT]
    a_out = [(r - statistics.fmean(outcomes)) / (statistics.stdev(outcomes) + 1e-4) for r in outcomes]
    returns = [
        [sum(GAMMA**k * r[t + k] for k in range(len(r) - t)) for t in range(len(r))] for _, _, r in SCRIPT
    ]
    expected = []
    for i, g in enumerate(returns):
        row = []
        for t, value in enumerate(g):
            peers = [other[t] for other in returns if len(other) > t]
            turn = (
                (value - statistics.fmean(peers)) / (statistics.stdev(peers) + 1e-4)
                if len(peers) > 1
                else 0.0
            )
            row.append(a_out[i] + TURN_WEIGHT * turn)
        expected.append(row)
    return expected


@pytest.mark.timeout(120)
def test_each_turn_gets_its_advantage_and_observations_get_none(template, env_path):
    samples = _samples(template)
    encoded, trainer = _advantages(CreditGRPOTrainer, template, samples, turn_rewards=True)
    grpo_batch, input_ids = encoded["grpo_batch"], encoded["model_inputs"]["input_ids"]
    tokenizer = template.tokenizer
    width = grpo_batch.completion_mask.shape[1]
    expected = _expected()
    for row, (turns, _, _) in enumerate(SCRIPT):
        ids = input_ids[row, -width:]
        mask = grpo_batch.completion_mask[row]
        advantages = grpo_batch.advantages[row]
        # Trained tokens, grouped by the advantage they carry, are exactly the model's turns.
        by_value: dict[float, list[int]] = defaultdict(list)
        for token, trained, value in zip(ids.tolist(), mask.tolist(), advantages.tolist(), strict=True):
            if trained:
                by_value[round(value, 5)].append(token)
        texts = {value: tokenizer.decode(tokens) for value, tokens in by_value.items()}
        want = {
            round(expected[row][t], 5): text + ("<|im_end|>\n" if t < len(turns) - 1 else "<|im_end|>")
            for t, text in enumerate(turns)
        }
        assert texts == want, (row, texts, want)
        # Observations and the prompt carry neither loss nor advantage.
        untrained = [
            (t, v) for t, m, v in zip(ids.tolist(), mask.tolist(), advantages.tolist(), strict=True) if not m
        ]
        assert all(v == 0.0 for _, v in untrained)
        if len(turns) > 1:
            observation = tokenizer.decode([t for t, _ in untrained])
            assert "<tool_response>" in observation
            assert ("4242" if turns[0] == GOOD_CALL else "invalid arguments") in observation
    # The tool-call turns really differ: the good call is credited above the bad one.
    assert expected[0][0] > expected[1][0]
    metrics = trainer._metrics["train"]
    assert metrics["credit/unlocated_turns"] == [0.0]
    assert metrics["credit/turns_per_trajectory"] == [pytest.approx(5 / 3)]
    assert metrics["credit/turn_advantage_abs_mean"][0] > 0


@pytest.mark.timeout(120)
def test_mode_trajectory_is_stock_ms_swift(template, env_path):
    samples = _samples(template)
    stock, _ = _advantages(GRPOTrainer, template, samples, turn_rewards=False)
    ours, trainer = _advantages(CreditGRPOTrainer, template, samples, turn_rewards=False)
    assert torch.equal(stock["grpo_batch"].advantages, ours["grpo_batch"].advantages)
    assert not any(key.startswith("credit/") for key in trainer._metrics["train"])
    # ... and the turn mode does change them, so the comparison above can fail.
    turned, _ = _advantages(CreditGRPOTrainer, template, samples, turn_rewards=True)
    assert not torch.equal(stock["grpo_batch"].advantages, turned["grpo_batch"].advantages)


@pytest.mark.timeout(120)
def test_turn_rewards_of_groups_dynamic_sampling_dropped_do_not_pile_up(template, env_path):
    samples = _samples(template)
    RUN.turn_rewards.clear()
    for step in range(3):
        kept = copy.deepcopy(samples)
        for sample in kept:
            sample.request_id = f"{sample.request_id}-{step}"
        # --dynamic_sample: the reward scored two rounds; the first round's groups had one reward and
        # were regenerated, so only the second round's samples reach the postprocess
        for round_ids, rewards in (
            ([f"dropped-{step}-{i}" for i in range(6)], [[0.0]] * 6),
            ([s.request_id for s in kept], [r for _, _, r in SCRIPT]),
        ):
            scored = [Trajectory(messages=[], turns=len(r), turn_rewards={"total": r}) for r in rewards]
            RUN.keep_turn_rewards(round_ids, scored)
        trainer = _trainer(CreditGRPOTrainer, template)
        CreditGRPOTrainer._postprocess_batch(trainer, kept, _batch(kept, template))
        assert trainer._metrics["train"]["credit/turns_per_trajectory"] == [pytest.approx(5 / 3)]
        assert RUN.turn_rewards == {}  # nothing left behind for samples no postprocess will take


def test_without_our_scheduler_the_turns_are_the_generated_ones_not_the_rows_history():
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<answer>hello</answer>"}]
    messages = [*history, {"role": "user", "content": "4000 + 242?"}]
    kwargs = {
        "messages": [  # ms-swift's: the row's messages, then the generated turns (ids for earlier ones)
            [*messages, {"role": "assistant", "content": RIGHT}],
            [
                *messages,
                {"role": "assistant", "content": GOOD_CALL},
                {"role": "tool", "content": "4242"},
                {"role": "assistant", "content": RIGHT},
            ],
            [*messages, {"role": "assistant", "content": RIGHT}],
        ],  # fmt: skip
        "response_token_ids": [[1, 2], [[1, 2], [3]], []],  # one turn flat, two turns, none recorded
    }
    single, multi, unknown = build_trajectories([RIGHT] * 3, kwargs, tokenizer=None)
    assert (single.turns, single.assistant_turns) == (1, [RIGHT])
    assert (multi.turns, multi.assistant_turns) == (2, [GOOD_CALL, RIGHT])
    assert unknown.turns == 2  # without token ids every assistant message is taken for a turn


@pytest.mark.parametrize(
    "setting, flag",
    [
        ({"loss_type": "real"}, "--loss_type real"),
        ({"use_liger_loss": True}, "--use_liger_kernel"),
        ({"teacher_model_server": "http://127.0.0.1:1"}, "--teacher_model"),
        ({"off_policy_sequence_mask_delta": 0.5}, "--off_policy_sequence_mask_delta"),
    ],
)
def test_unsupported_flags_are_refused_by_name(template, env_path, setting, flag):
    trainer = _trainer(CreditGRPOTrainer, template)
    trainer.__dict__.update(loss_type="grpo", use_liger_loss=False, off_policy_sequence_mask_delta=None)
    trainer._check_credit(None)  # the supported default passes
    trainer.__dict__.update(setting)
    with pytest.raises(ValueError, match=flag):
        trainer._check_credit(None)


def test_turn_credit_without_a_per_turn_reward_is_refused(template, tmp_path, monkeypatch):
    path = tmp_path / "no_turns.yaml"
    path.write_text("reward: [{name: em}]\ncredit: {mode: turn}\n")
    monkeypatch.setenv("RLFACTORY_ENV", str(path))
    trainer = _trainer(CreditGRPOTrainer, template)
    trainer.__dict__.update(loss_type="grpo", use_liger_loss=False, off_policy_sequence_mask_delta=None)
    with pytest.raises(ValueError, match="credit.mode turn needs a per-turn reward"):
        trainer._check_credit(None)
