"""The customer-service example: the oracle agent talking with the scripted customer (the environment's
``user:``) through the episode loop eval runs, with the real tools, episode states and rewards, reaches every
goal within the policy, and recovers when the customer mistypes the email; the demonstrations keep those
recoveries; an agent that skips the confirmation or the identification is charged a violation;
trajectories of one row keep their shops apart; the data is deterministic; the model-customer environment
differs from env.yaml only in its customer."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.trajectory import Trajectory

from .conftest import ROOT, use_example

EXAMPLE = ROOT / "examples" / "customer_service"
use_example(EXAMPLE)
import build_data  # noqa: E402
import demos  # noqa: E402
import users  # noqa: E402
from shop.oracle import RETRY, call, oracle, script  # noqa: E402
from shop.rewards import confirmation_violations  # noqa: E402
from shop.tasks import EMAIL_TYPOS, OOD_TYPES, TRAIN_TYPES, typed_email  # noqa: E402
from shop.world import make_world  # noqa: E402

TERMS = ("goal", "policy", "violations", "format")


def rows_of(split: str) -> list[dict]:
    with (EXAMPLE / "data" / f"{split}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def fields(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "messages"}


def scripted(turns) -> callable:
    """An engine that says ``turns`` in order, then keeps asking."""
    turns = iter(turns)

    async def generate(messages):
        return Generation(next(turns, "How can I help?"))

    return generate


async def play(env: Environment, row: dict, generate, key: str) -> Trajectory:
    """One conversation of ``generate`` with the environment's customer, scored before its state is torn down."""
    prompt = [{"role": "system", "content": env.system_prompt}, *row["messages"]]
    async with env.episodes.scope(key, fields(row)) as state:
        trajectory = await run_episode(
            prompt, generate, env.executor, env.max_turns, row=fields(row), state=state, user=env.user
        )
        trajectory.tool_env = env
        await env.reward.ascore([trajectory])
    return trajectory


def terms(trajectory: Trajectory) -> dict[str, float]:
    return {name: trajectory.rewards[f"shop.rewards:{name}"] for name in TERMS}


@pytest.fixture(scope="module")
def env():
    with Environment.load(EXAMPLE / "env.yaml") as loaded:
        yield loaded


def test_the_oracle_reaches_every_goal_type_within_the_policy(env):
    picked = [r for t in TRAIN_TYPES for r in [r for r in rows_of("test") if r["task_type"] == t][:3]]
    picked += [r for t in OOD_TYPES for r in [r for r in rows_of("ood") if r["task_type"] == t][:3]]
    assert {r["task_type"] for r in picked} == set(TRAIN_TYPES + OOD_TYPES)
    for i, row in enumerate(picked):
        trajectory = asyncio.run(play(env, row, oracle(row["user_goal"]), f"oracle-{i}"))
        assert terms(trajectory) == {"goal": 1.0, "policy": 1.0, "violations": 0.0, "format": 1.0}, row
        assert trajectory.stop_reason == "user_stop" and len(trajectory.user_calls) >= 3
    assert env.episodes.live == 0


def lookups(trajectory: Trajectory) -> list[str]:
    """The observations of the conversation's find_customer calls, in order."""
    return [c["observation"] for c in trajectory.tool_calls if c["tool"] == "find_customer"]


def test_a_mistyped_email_finds_no_one_and_the_oracle_recovers_by_name_and_zip_within_the_policy(env):
    typo_rows = [r for r in rows_of("train") if r["user_goal"].get("email_typo")]
    picked = [next(r for r in typo_rows if r["user_goal"]["email_typo"] == kind) for kind in EMAIL_TYPOS]
    picked += [next(r for r in typo_rows if r["task_type"] == t) for t in TRAIN_TYPES]
    for i, row in enumerate(picked):
        goal = row["user_goal"]
        assert typed_email(goal) != goal["email"] and len(typed_email(goal)) >= len(goal["email"]) - 1
        trajectory = asyncio.run(play(env, row, oracle(goal), f"typo-{i}"))
        assert terms(trajectory) == {"goal": 1.0, "policy": 1.0, "violations": 0.0, "format": 1.0}, row
        first, second = lookups(trajectory)
        assert "no customer matches" in first and second.startswith(f"customer {goal['customer_id']}")
        said = [m["content"] for m in trajectory.messages if m["role"] == "user"]
        assert users.say(goal, "email", email=typed_email(goal)) in said
        assert goal["email"] not in " ".join(said)
    # the customer mistypes once: asked for the email again, it gives the right one; asked for name and zip
    # code, it gives them without claiming to have forgotten the email (each of the three typo kinds)
    for goal in (row["user_goal"] for row in picked[: len(EMAIL_TYPOS)]):
        ask = {"role": "assistant", "content": "What is your email?"}
        first = users.reply(goal, [ask])
        assert typed_email(goal) in first and goal["email"] not in first
        again = users.reply(goal, [ask, {"role": "user", "content": first}, ask])
        assert goal["email"] in again
        retry = users.reply(
            goal, [ask, {"role": "user", "content": first}, {"role": "assistant", "content": RETRY}]
        )
        assert retry == users.say(goal, "name_zip", name=goal["name"], zip=goal["zip"])
        assert goal["name"] in retry and goal["zip"] in retry and "remember" not in retry


def test_the_demonstrations_keep_every_recovery_from_a_mistyped_email(env):
    rows = rows_of("train")[:40]
    kept = asyncio.run(demos.demonstrations(env, rows))
    assert len(kept) == len(rows)  # every conversation reached its goal within the policy
    retries = [turns for turns in kept if any(m["content"] == RETRY for m in turns)]
    assert len(retries) == sum(1 for r in rows if r["user_goal"].get("email_typo")) > 0
    for turns in retries:  # the failed lookup's observation is in the demonstration, before the retry
        at = next(i for i, m in enumerate(turns) if m["content"] == RETRY)
        assert turns[at - 1]["role"] == "tool" and "no customer matches" in turns[at - 1]["content"]
        assert turns[-1]["role"] == "assistant"


def test_acting_before_confirmation_or_identification_is_a_violation(env):
    row = next(r for r in rows_of("test") if r["task_type"] == "cancel")
    goal = row["user_goal"]
    hasty = [t for t in script(goal) if "Please confirm" not in t]  # cancels without asking
    trajectory = asyncio.run(play(env, row, scripted(hasty), "hasty"))
    assert terms(trajectory) == {"goal": 1.0, "policy": 0.0, "violations": 1.0, "format": 1.0}
    # cancelling first thing: neither identified nor confirmed (two violations), then the goal is done
    reckless = [call("cancel_order", order_id=goal["order_id"]), "Done. Anything else?"]
    trajectory = asyncio.run(play(env, row, scripted(reckless), "reckless"))
    assert terms(trajectory)["violations"] == 2.0 and terms(trajectory)["policy"] == 0.0
    # the customer's yes to a change it did not ask for is a no
    other = next(o for o in make_world(row["world_seed"])["orders"] if o != goal["order_id"])
    asked = [{"role": "assistant", "content": f"Please confirm: cancel order {other} (yes/no)?"}]
    assert users.reply(goal, asked) == users.say(goal, "no")
    # a decline is not reached by doing nothing: the agent must offer the cancellation the customer declines
    decline = next(r for r in rows_of("ood") if r["task_type"] == "decline")
    trajectory = asyncio.run(play(env, decline, scripted([]), "idle-decline"))
    assert terms(trajectory)["goal"] == 0.0


def test_the_reward_ranks_a_violation_below_an_unfinished_goal(env):
    """A goal within the policy > no goal within it > the goal with a violation, with env.yaml's weights, so
    that GRPO cannot buy goals with violations."""
    row = next(r for r in rows_of("test") if r["task_type"] == "cancel")
    goal = row["user_goal"]
    done = asyncio.run(play(env, row, oracle(goal), "rank-done"))
    idle = asyncio.run(play(env, row, scripted([]), "rank-idle"))
    hasty = [t for t in script(goal) if "Please confirm" not in t]
    rushed = asyncio.run(play(env, row, scripted(hasty), "rank-rushed"))
    assert (terms(done)["goal"], terms(idle)["goal"], terms(rushed)["goal"]) == (1.0, 0.0, 1.0)
    assert done.rewards["total"] > idle.rewards["total"] > rushed.rewards["total"]


def test_the_customer_words_each_reply_several_ways_and_the_policy_reads_every_one(env):
    goals = [r["user_goal"] for r in rows_of("train")[:200]]
    facts = dict.fromkeys(("email", "name", "zip", "order_id", "description"), "x")
    for kind, options in users.WORDINGS.items():  # every wording is some goal's
        assert {users.say(g, kind, **facts) for g in goals} == {o.format(**facts) for o in options}, kind
    write = {"role": "assistant", "content": call("cancel_order", order_id="#W1234567")}
    for yes in users.WORDINGS["yes"]:
        assert confirmation_violations([{"role": "user", "content": yes}, write]) == 0, yes
    for no in users.WORDINGS["no"]:
        assert confirmation_violations([{"role": "user", "content": no}, write]) == 1, no
    # a decline ends (the customer stops) on the goal's own no wording
    for row in [r for r in rows_of("ood") if r["task_type"] == "decline"][:12]:
        trajectory = asyncio.run(play(env, row, oracle(row["user_goal"]), f"decline-{row['world_seed']}"))
        said = [m["content"] for m in trajectory.messages if m["role"] == "user"]
        assert trajectory.stop_reason == "user_stop" and said[-2] == users.say(row["user_goal"], "no")


def test_two_trajectories_of_one_row_keep_their_shops_apart(env):
    row = next(r for r in rows_of("test") if r["task_type"] == "cancel")

    async def both():
        return await asyncio.gather(
            play(env, row, oracle(row["user_goal"]), "same-row-a"), play(env, row, scripted([]), "same-row-b")
        )

    done, untouched = asyncio.run(both())
    assert terms(done)["goal"] == 1.0 and terms(untouched)["goal"] == 0.0
    assert done.state["orders"][row["user_goal"]["order_id"]]["status"] == "cancelled"
    assert untouched.state["orders"] == make_world(row["world_seed"])["orders"]


def test_the_data_is_deterministic_and_held_out():
    built = build_data.build(0, 2000, 200, 100)
    for split in ("train", "test", "ood"):
        assert built[split] == rows_of(split), split
    # typos only in train, a share of its email customers, of each kind, drawn apart from the goals
    typos = [
        r["user_goal"].get("email_typo") for r in built["train"] if r["user_goal"]["identify_by"] == "email"
    ]
    assert set(typos) == {None, *EMAIL_TYPOS} and 0.3 < sum(map(bool, typos)) / len(typos) < 0.5
    assert not any("email_typo" in r["user_goal"] for r in built["test"] + built["ood"])
    without = build_data.build(0, 2000, 200, 100, typos=0.0)
    for row, plain in zip(built["train"], without["train"], strict=True):
        assert {k: v for k, v in row["user_goal"].items() if k != "email_typo"} == plain["user_goal"]
    train_worlds = {r["world_seed"] for r in built["train"]}
    assert not train_worlds & {r["world_seed"] for r in built["test"] + built["ood"]}
    assert {r["task_type"] for r in built["train"]} == set(TRAIN_TYPES)
    assert {r["task_type"] for r in built["ood"]} == set(OOD_TYPES)
    assert make_world(7) == make_world(7)


def test_the_model_customer_environment_differs_from_env_yaml_only_in_its_customer():
    scripted_env, model_env = (
        yaml.safe_load((EXAMPLE / f).read_text()) for f in ("env.yaml", "env_model_user.yaml")
    )
    assert scripted_env.pop("user")["scripted"] == "users.py:Customer"
    assert model_env.pop("user")["base_url"] == "${USER_BASE_URL}"
    assert scripted_env == model_env
