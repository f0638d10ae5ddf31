"""ms-swift's own colocate rollout path, with scripted model text instead of a model.

The GRPO trainer's colocate multi-turn rollout (``RolloutTrainerMixin._infer_single_or_multi_turn``) is:
``invoke_async_hook(scheduler.on_trajectory_start(requests))``, one generation for the batch, then
``swift.rollout.agent_loop.run_multi_turn`` with a per-turn generate function. :func:`run_batch` makes
exactly those calls; only generation is replaced, by each request's script of replies, because the subject
of these tests is the scheduler and the tools, not the model. Everything else (tools, MCP servers, the
real Qwen3 tokenizer and template) is real.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from swift.infer_engine.protocol import (
    ChatCompletionResponse,
    ChatCompletionResponseChoice,
    ChatMessage,
    RequestConfig,
    RolloutInferRequest,
    RolloutOutput,
    UsageInfo,
)
from swift.model import get_processor
from swift.rlhf_trainers.utils import get_response_prefix_ids
from swift.rollout import invoke_async_hook, run_multi_turn
from swift.template import get_template

from swift_rlfactory.adapters import swift as adapter
from swift_rlfactory.adapters import swift_reward, swift_run
from swift_rlfactory.run_config import ENV_VAR

ENV_DIR = Path(__file__).parent / "scheduler_env"
ENV = ENV_DIR / "env.yaml"
ANSWER = "<answer>done</answer>"


def qwen3_template(model_dir: Path, max_length: int = 8192, agent_template: str | None = None):
    """ms-swift's qwen3 template around the real Qwen3 tokenizer of the tiny test model (with another
    agent template, as ``--agent_template`` gives it)."""
    processor = get_processor(str(model_dir), model_type="qwen3", check_model=False)
    return get_template(
        processor, template_type="qwen3", max_length=max_length, agent_template=agent_template
    )


@contextmanager
def fresh_run(tokenizer) -> Iterator[swift_run._Run]:
    """A process state of the plugin of its own (loaded environments, tokenizer), closed afterwards, with
    ``$RLFACTORY_ENV`` pointing at the scheduler test environment."""
    with pytest.MonkeyPatch.context() as patch:
        state = swift_run._Run()
        state.tokenizer = tokenizer
        for module in (adapter, swift_reward):  # the scheduler's and the reward's view of the process
            patch.setattr(module, "RUN", state)
        patch.setenv(ENV_VAR, str(ENV))
        try:
            yield state
        finally:
            for env in state.envs.values():
                env.close()


def call(name: str, **arguments) -> str:
    """One tool call as Qwen3 writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@dataclass
class Reply:
    """One scripted assistant turn."""

    text: str
    finish_reason: str = "stop"


def request(uuid: str, question: str = "Go.", env: str | None = None) -> RolloutInferRequest:
    """A dataset row as the trainer hands it to the scheduler (``env`` is the per-row column)."""
    return RolloutInferRequest(
        messages=[{"role": "user", "content": question}], uuid=uuid, data_dict={"env": env}
    )


def response_prefix(template) -> str:
    """The text ms-swift's template puts before every response (e.g. an empty think block), or ""."""
    prefix_ids = get_response_prefix_ids(template)
    return template.tokenizer.decode(prefix_ids) if prefix_ids else ""


def scripted_output(tokenizer, prefix: str, text: str, finish_reason: str = "stop") -> RolloutOutput:
    """What an engine would return for the reply ``text``: its token ids (``<|im_end|>`` after a stop) and
    the message ms-swift's driver reads, the template's response ``prefix`` included."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if finish_reason == "stop":
        ids.append(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    choice = ChatCompletionResponseChoice(
        index=0,
        message=ChatMessage(role="assistant", content=prefix + text),
        finish_reason=finish_reason,
        token_ids=ids,
    )
    response = ChatCompletionResponse(model="scripted", choices=[choice], usage=UsageInfo(0, 0, 0))
    return RolloutOutput(response=response)


def run_batch(
    scheduler,
    template,
    requests: Sequence[RolloutInferRequest],
    scripts: dict[str, list[Reply | str]],
    max_turns: int | None,
) -> dict[str, RolloutOutput]:
    """Roll the batch out through ms-swift's driver; each request answers ``ANSWER`` once its script ends."""
    prefix = response_prefix(template)
    queues = {uuid: list(script) for uuid, script in scripts.items()}

    def generate(reqs: Sequence[RolloutInferRequest], _config=None) -> list[RolloutOutput]:
        outputs = []
        for req in reqs:
            queue = queues.get(req.uuid) or []
            reply = queue.pop(0) if queue else ANSWER
            reply = reply if isinstance(reply, Reply) else Reply(reply)
            outputs.append(scripted_output(template.tokenizer, prefix, reply.text, reply.finish_reason))
        return outputs

    requests = list(requests)
    invoke_async_hook(scheduler.on_trajectory_start(requests))
    outputs = run_multi_turn(
        requests, generate(requests), scheduler, generate, RequestConfig(), max_turns=max_turns
    )
    return {req.uuid: out for req, out in zip(requests, outputs, strict=True)}


class ServerEngine:
    """What the scheduler awaits in server mode (``infer_async``), replying from each request's script; a
    request whose script holds ``None`` there waits until its task is cancelled (``waiting`` is set)."""

    def __init__(self, template, scripts: dict[str, list[str | None]]):
        self.template = template
        self.prefix = response_prefix(template)
        self.scripts = {uuid: list(script) for uuid, script in scripts.items()}
        self.waiting = asyncio.Event()

    async def infer_async(self, request, request_config=None, **kwargs):
        await asyncio.sleep(0)  # let the other trajectories' turns interleave
        queue = self.scripts.get(request.uuid) or []
        reply = queue.pop(0) if queue else ANSWER
        if reply is None:
            self.waiting.set()
            await asyncio.Event().wait()  # generation that never ends: only cancellation stops it
        return scripted_output(self.template.tokenizer, self.prefix, reply).response


def serve_cutting_one(
    scheduler,
    engine: ServerEngine,
    requests: dict[str, RolloutInferRequest],
    cut: str,
    settled: Callable[[], bool],
) -> dict[str, RolloutOutput]:
    """Serve every request at once as ``swift rollout`` does, cancel ``cut`` once its script reaches
    ``None``, and wait (30 s at most) until ``settled()``: a rollout server's loop outlives its requests,
    and the ends started there run on it. The other requests' outputs, by uuid."""
    config = RequestConfig(max_tokens=96, temperature=0.0, return_details=True)
    served = [uuid for uuid in requests if uuid != cut]

    async def serve() -> dict[str, RolloutOutput]:
        cancelled = asyncio.create_task(scheduler.run(requests[cut], config))
        rest = asyncio.gather(*(scheduler.run(requests[uuid], config) for uuid in served))
        await asyncio.wait_for(engine.waiting.wait(), 60)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        outputs = dict(zip(served, await asyncio.wait_for(rest, 60), strict=True))
        deadline = time.monotonic() + 30
        while not settled() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return outputs

    return asyncio.run(serve())
