"""What a transport is given of its session and what it reports back: nothing else of the session."""

from __future__ import annotations

from dataclasses import dataclass, field

from anyio.abc import Process

from ..config import McpServerConfig


@dataclass
class TransportContext:
    """The narrow view of a session a transport works with.

    Args:
        label: names the session in logs (``server#0``).
        config: how to start or reach the server.
        http_errors: filled by the HTTP transports: ``"HTTP 401 Unauthorized"`` by the id of each request
            whose POST was refused, until its error reply passes (the SDK's own error omits the status).
        process: set by the stdio transport: the server's process, for its pid and how it ended.
    """

    label: str
    config: McpServerConfig
    http_errors: dict[int | str, str] = field(default_factory=dict)
    process: Process | None = None

    @property
    def cap(self) -> int:
        """The most bytes one reply may have (``max_result_mb``)."""
        return int(self.config.max_result_mb * 2**20)
