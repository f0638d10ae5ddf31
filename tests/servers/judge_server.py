"""A small OpenAI-compatible judge for the judge-reward tests: ``POST /v1/chat/completions``.

The requested ``model`` picks the behaviour, so one server serves every test:

=============  ===============================================================================
``rule``       grade by rule: 1 when the ``<answer>`` equals a reference answer, else 0 (pointwise
               replies ``{"reason", "score"}``; group replies ``{"scores": [{"id", "score"}]}``)
``tagged``     the same, as ``<think>...</think>`` then ``<score>X</score>``
``scale``      scores out of 10, and 15 / -3 out of range (off a 0-1 or 0-10 scale: an error)
``verbatim``   the pointwise score is the trajectory's ``<answer>`` text as it is (``1e308``, ``7``, ``-5``)
``malformed``  a reply with no score in it
``hang``       never answers (the client's timeout must fire)
``trickle``    starts a reply and sends one byte every 0.1 s forever (a per-read timeout never fires)
``error500``   HTTP 500 every time
``flaky``      HTTP 500 for the first two requests of each prompt, then ``rule``
``slow``       ``rule`` after 0.3 s (to see requests overlap)
``hang_wrong`` never answers when the answer is wrong, else ``rule`` (abandoned judgments' slots)
``ratelimit``  HTTP 429 with ``Retry-After: 1`` for the first request of each prompt, then ``rule``
``echo401``    HTTP 401 whose body repeats the authorization header (as some gateways do)
``echo_late``  ``echo401``, the key at offset 190 of the body (where a 200-character excerpt cuts it)
``endless``    a 200 whose chat completion never ends, sent as fast as the socket takes it
``braces``     a megabyte-long reply of ``{"a": "`` repeated, no score in it
``redirect``   HTTP 307 to another path
``parts``      ``rule``'s reply as a list of content parts (text, then an image part)
``thinking``   ``content: null`` and ``finish_reason: length``, the reply spent on ``reasoning_content``
=============  ===============================================================================

``GET /stats`` returns the requests seen per model, the authorization headers seen, the most requests in
flight at once, the number of responses in each group request and the seconds between the first two
requests of each rate-limited prompt; ``POST /reset`` clears them. Run as ``python judge_server.py``: it binds
127.0.0.1 on a free port and prints ``PORT <n>`` on its first line.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import time
from collections import Counter

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

app = FastAPI()
_requests: Counter[str] = Counter()
_prompts: Counter[str] = Counter()
_auth: set[str] = set()
_group_sizes: list[int] = []
_in_flight = 0
_max_in_flight = 0
_first_seen: dict[str, float] = {}
_retry_gaps: list[float] = []

_REFERENCE = re.compile(r"Reference answers: (.*)")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_RESPONSE = re.compile(r'<response id="(\d+)">(.*?)</response>', re.DOTALL)


def _correct(text: str, references: list[str]) -> float:
    answers = _ANSWER.findall(text)
    return float(bool(answers) and answers[-1].strip().lower() in references)


def _grade(messages: list[dict]) -> tuple[list[float] | float, bool]:
    system, user = messages[0]["content"], messages[-1]["content"]
    found = _REFERENCE.search(system)
    references = [r.strip().lower() for r in found.group(1).split("|")] if found else []
    responses = _RESPONSE.findall(user)
    if responses:
        return [_correct(text, references) for _, text in responses], True
    return _correct(user, references), False


def _reply(model: str, messages: list[dict]) -> str:
    scores, group = _grade(messages)
    if model == "malformed":
        return "I think this answer is quite good, well done."
    if model == "verbatim":
        return '{"score": ' + _ANSWER.findall(" ".join(m["content"] for m in messages))[-1].strip() + "}"
    if model == "scale":
        scaled = [15.0 if s else -3.0 for s in scores] if group else (15.0 if scores else -3.0)
        return json.dumps({"scores": scaled} if group else {"score": scaled})
    if model == "tagged":
        if group:
            return "<think>comparing</think>" + "".join(f"<score>{s}</score>" for s in scores)
        return f"<think>the reference says so</think> verdict: <score>{scores}</score>"
    if group:
        return json.dumps({"scores": [{"id": k, "score": s} for k, s in enumerate(scores, start=1)]})
    return json.dumps({"reason": "compared with the reference", "score": scores})


async def _trickle():
    while True:
        yield b" "
        await asyncio.sleep(0.1)


async def _endless():
    yield b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "'
    chunk = b"x" * (1 << 20)
    while True:
        yield chunk
        await asyncio.sleep(0)


@app.post("/v1/chat/completions")
async def chat(request: Request):
    global _in_flight, _max_in_flight
    body = await request.json()
    model = body["model"]
    _requests[model] += 1
    if "authorization" in request.headers:
        _auth.add(request.headers["authorization"])
    prompt = json.dumps(body["messages"])
    responses = _RESPONSE.findall(body["messages"][-1]["content"])
    if responses:
        _group_sizes.append(len(responses))
    _prompts[prompt] += 1
    _in_flight += 1
    _max_in_flight = max(_max_in_flight, _in_flight)
    try:
        if model == "hang":
            await asyncio.sleep(3600)
        if model == "trickle":
            return StreamingResponse(_trickle(), media_type="application/json")
        if model == "endless":
            return StreamingResponse(_endless(), media_type="application/json")
        if model == "slow":
            await asyncio.sleep(0.3)
        if model == "hang_wrong" and not _grade(body["messages"])[0]:
            await asyncio.sleep(3600)
        if model == "ratelimit":
            if _prompts[prompt] == 1:
                _first_seen[prompt] = time.monotonic()
                return JSONResponse({"error": "slow down"}, status_code=429, headers={"Retry-After": "1"})
            if _prompts[prompt] == 2:
                _retry_gaps.append(time.monotonic() - _first_seen[prompt])
        seen = request.headers.get("authorization", "")
        if model == "echo401":
            return JSONResponse({"error": f"invalid credentials: {seen}"}, status_code=401)
        if model == "echo_late":
            text = json.dumps({"error": f"invalid credentials: {seen}"})
            text = text.replace("invalid", " " * (190 - text.index(seen.removeprefix("Bearer "))) + "invalid")
            return Response(text, status_code=401, media_type="application/json")
        if model == "redirect":
            return JSONResponse({}, status_code=307, headers={"Location": "/v2/chat/completions"})
        if model == "error500" or (model == "flaky" and _prompts[prompt] <= 2):
            return JSONResponse({"error": "judge overloaded"}, status_code=500)
        content = '{"a": "' * 150_000 if model == "braces" else _reply(model, body["messages"])
        if model == "parts":
            content = [{"type": "text", "text": content}, {"type": "image_url", "image_url": {"url": "x"}}]
    finally:
        _in_flight -= 1
    message = {"role": "assistant", "content": content}
    if model == "thinking":  # a reasoning parser moved everything out of content, and max_tokens ran out
        message = {"role": "assistant", "content": None, "reasoning_content": "Let me compare the"}
    finish = "length" if model == "thinking" else "stop"
    return {
        "id": "judge-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


@app.get("/stats")
async def stats():
    return {
        "requests": dict(_requests),
        "auth": sorted(_auth),
        "max_in_flight": _max_in_flight,
        "group_sizes": _group_sizes,
        "retry_gaps": _retry_gaps,
    }


@app.post("/reset")
async def reset():
    global _max_in_flight
    _requests.clear()
    _prompts.clear()
    _auth.clear()
    _group_sizes.clear()
    _first_seen.clear()
    _retry_gaps.clear()
    _max_in_flight = 0
    return {}


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
