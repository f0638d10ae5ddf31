"""A server listing thousands of tools puts their schemas into every prompt: start-up says so, with the
numbers, and the size is there for a check against the prompt's room (``McpProvider.schema_chars``)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from swift_rlfactory.tools.mcp import LARGE_SCHEMA_CHARS, McpProvider, McpServerConfig, schema_chars
from tests.test_mcp import ROOT

MANY_TOOLS_SERVER = ROOT / "tests" / "servers" / "many_tools_server.py"


def started(tools: int) -> tuple[McpProvider, list]:
    """A provider of a server listing ``tools`` tools, started and closed again, and the tools it gave."""
    provider = McpProvider(
        "many", McpServerConfig(command="python", args=[str(MANY_TOOLS_SERVER), str(tools)])
    )

    async def run() -> list:
        try:
            return await provider.start()
        finally:
            await provider.close()

    return provider, asyncio.run(run())


@pytest.mark.timeout(120)
def test_a_server_listing_5000_tools_warns_with_the_numbers(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="swift_rlfactory.tools.mcp"):
        provider, tools = started(5000)
    assert len(tools) == 5000
    assert provider.schema_chars == schema_chars(t.spec for t in tools)
    assert provider.schema_chars > 1_000_000 > LARGE_SCHEMA_CHARS
    [warning] = [r.getMessage() for r in caplog.records if "into every prompt" in r.getMessage()]
    assert "'many' lists 5000 tools" in warning and f"{provider.schema_chars} characters" in warning, warning


@pytest.mark.timeout(60)
def test_a_server_with_a_few_tools_starts_without_a_word(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="swift_rlfactory.tools.mcp"):
        provider, tools = started(12)
    assert len(tools) == 12 and 0 < provider.schema_chars < LARGE_SCHEMA_CHARS
    assert not [r for r in caplog.records if "into every prompt" in r.getMessage()]
