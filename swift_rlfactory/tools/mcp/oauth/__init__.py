"""OAuth for remote MCP servers, on the MCP SDK's own client (``mcp.client.auth``): the ``auth`` setting of
a server entry, the token store later runs reuse, the headless authorization-code flow and the one-time
interactive login. See docs/mcp.md, "OAuth"."""

from .flow import oauth_for
from .settings import OAuthSettings

__all__ = ["OAuthSettings", "oauth_for"]
