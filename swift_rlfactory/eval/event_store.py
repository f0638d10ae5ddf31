"""serve-agent's resumable HTTP streams: the SSE events it sent, kept in memory and bounded, so that a client
whose connection dropped during a call reconnects with ``Last-Event-ID`` and receives what it missed (the MCP
spec's resumability; the SDK streams resumably only when given a store)."""

from __future__ import annotations

import secrets
from collections import OrderedDict

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage


class MemoryEventStore(EventStore):
    """The last ``max_events`` events of every stream, oldest dropped first. Event IDs carry a per-process
    prefix, so an ID from before a restart is unknown rather than another event's."""

    def __init__(self, max_events: int = 1000):
        self.max_events = max_events
        self._prefix = secrets.token_hex(4)
        self._count = 0
        self._events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None]] = OrderedDict()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        self._count += 1
        event_id = f"{self._prefix}-{self._count}"
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self.max_events:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the stream's events after ``last_event_id`` (priming events carry no message); ``None`` when
        that ID is unknown or already dropped."""
        if last_event_id not in self._events:
            return None
        stream_id = self._events[last_event_id][0]
        later = False
        for event_id, (stream, message) in list(self._events.items()):
            if later and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            later = later or event_id == last_event_id
        return stream_id
