"""serve-agent's streams over HTTP are resumable: a client (protocol 2025-11-25) gets a priming event with an
ID and a retry field first, and a client whose stream dropped during a long agent call reconnects with
``Last-Event-ID`` and receives the answer it missed. The event store itself: bounded, per stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.server.streamable_http import EventMessage
from mcp.types import JSONRPCNotification

from swift_rlfactory.eval.event_store import MemoryEventStore

from .conftest import AGENT_ENV, ScriptedChat
from .test_serve_agent import http_server, served_flags

VERSION = "2025-11-25"


async def slow_answer(body: dict[str, Any]) -> str:
    """A model that thinks for a while, then answers without a tool."""
    await asyncio.sleep(2.0)
    return "<answer>42</answer>"


def events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """SSE events (id, data, retry) from a stream's lines."""
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
            continue
        field, _, value = line.partition(":")
        event[field] = event.get(field, "") + value.removeprefix(" ")


def open_session(client: httpx.Client, url: str) -> tuple[dict[str, str], str]:
    """Initialize at 2025-11-25: the headers of later requests, and the agent's tool name."""
    accept = {"Accept": "application/json, text/event-stream"}
    hello = {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "resume-test", "version": "1"},
    }
    reply = client.post(
        url, headers=accept, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    )
    assert reply.status_code == 200, reply.text
    headers = {**accept, "mcp-session-id": reply.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    with client.stream(
        "POST", url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    ) as r:
        listed = next(json.loads(e["data"]) for e in events(r.iter_lines()) if e.get("data"))
    return headers, listed["result"]["tools"][0]["name"]


@pytest.mark.timeout(120)
def test_a_dropped_stream_resumes_with_last_event_id_and_gets_the_answer():
    with (
        ScriptedChat(slow_answer) as endpoint,
        http_server(AGENT_ENV, served_flags(endpoint.port)) as url,
        httpx.Client(timeout=30) as client,
    ):
        headers, tool = open_session(client, url)
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": tool, "arguments": {"task": "What is 6 times 7?"}}}  # fmt: skip
        with client.stream("POST", url, headers=headers, json=call) as stream:
            first = next(events(stream.iter_lines()))
        # the priming event: an ID to resume from, no message, and when to come back (ms)
        assert first["id"] and first.get("data", "") == "" and first["retry"] == "1000"
        # the stream was closed while the agent was still thinking; the answer waits in the store
        resume = {**headers, "Accept": "text/event-stream", "Last-Event-ID": first["id"]}
        with client.stream("GET", url, headers=resume) as stream:
            assert stream.status_code == 200
            answer = next(
                json.loads(e["data"]) for e in events(stream.iter_lines()) if '"id":3' in e.get("data", "")
            )
    assert not answer["result"].get("isError"), answer
    assert "42" in json.dumps(answer["result"]["content"])


def note(n: int) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": n})


def test_the_store_replays_only_its_streams_later_events_and_keeps_the_last_ones():
    async def scenario() -> None:
        store = MemoryEventStore(max_events=4)
        prime = await store.store_event("a", None)
        ids = [await store.store_event(stream, note(n)) for n, stream in enumerate("abab")]
        sent: list[EventMessage] = []

        async def send(event: EventMessage) -> None:
            sent.append(event)

        # the priming event was the oldest of five: dropped, so resuming from it is refused, not guessed
        assert await store.replay_events_after(prime, send) is None and sent == []
        assert await store.replay_events_after(ids[0], send) == "a"
        assert [(e.event_id, e.message.params) for e in sent] == [
            (ids[2], {"n": 2})
        ]  # stream a, after ids[0]
        assert await store.replay_events_after("elsewhere-1", send) is None  # another process's ID
        assert MemoryEventStore()._prefix != store._prefix

    asyncio.run(scenario())
