"""An MCP server over stdio whose one tool returns an image content block beside text."""

import io

from mcp.server.mcpserver import Image, MCPServer
from PIL import Image as PILImage

mcp = MCPServer("camera", log_level="WARNING")


@mcp.tool()
def photo() -> list:
    """Take a 16x8 blue picture."""
    buffer = io.BytesIO()
    PILImage.new("RGB", (16, 8), "blue").save(buffer, format="PNG")
    return ["a blue photo", Image(data=buffer.getvalue(), format="png")]


if __name__ == "__main__":
    mcp.run()
