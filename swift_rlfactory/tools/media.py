"""Images a tool returns: the :class:`ToolImage` a Python tool may return, and how any image shape is read.

An image reaches a vision-language model as an image and any other model as a short note of its type and
size (:func:`media_note`); which shapes count as images and the limits: docs/tools.md ("Images from tools").
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass, field
from typing import Any

# The first bytes of each image format a tool's bytes are recognised by, and its MIME type.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)


@dataclass(frozen=True)
class ToolImage:
    """An image a tool returns: its encoded bytes (PNG, JPEG, ...) and their MIME type.

    A Python tool may return one (alone, or in a list beside text); an MCP image block, a ``PIL.Image``
    and bytes that start like an image file are read as one too (:func:`image_of`).
    """

    data: bytes = field(repr=False)
    mime_type: str = "image/png"

    @property
    def note(self) -> str:
        """What a model that cannot see the image reads instead (:func:`media_note`)."""
        return media_note("image", self.mime_type, len(self.data))

    @property
    def data_uri(self) -> str:
        """The image as a ``data:`` URI, the form ms-swift's templates load an image string from."""
        return f"data:{self.mime_type};base64,{base64.b64encode(self.data).decode('ascii')}"


def image_of(value: Any) -> ToolImage | None:
    """``value`` as a :class:`ToolImage` when it is an image, else ``None``.

    Images are: a ``ToolImage``; an MCP ``ImageContent`` block (``type == "image"``, base64 ``data``, an
    ``image/*`` ``mime_type``); a
    ``PIL.Image.Image`` (saved as PNG); ``bytes`` starting with a PNG, JPEG, GIF, BMP or WebP signature.
    """
    if isinstance(value, ToolImage):
        return value
    if isinstance(value, (bytes, bytearray)):
        mime_type = _sniff(bytes(value[:12]))
        return None if mime_type is None else ToolImage(bytes(value), mime_type)
    if getattr(value, "type", None) == "image":
        data, mime_type = getattr(value, "data", None), getattr(value, "mime_type", None)
        if not (isinstance(data, str) and isinstance(mime_type, str) and mime_type.startswith("image/")):
            return None  # no image type or data: shown as its note, never as an image
        try:
            return ToolImage(base64.b64decode(data, validate=True), mime_type)
        except (binascii.Error, ValueError):
            return None
    if type(value).__module__.startswith("PIL.") and callable(getattr(value, "save", None)):
        buffer = io.BytesIO()
        value.save(buffer, format="PNG")
        return ToolImage(buffer.getvalue(), "image/png")
    return None


def _sniff(head: bytes) -> str | None:
    for magic, mime_type in _MAGIC:
        if head.startswith(magic):
            return mime_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def media_note(kind: str, mime_type: str | None, size: int) -> str:
    """What the model reads for an image or audio block or a binary resource it cannot see: its type and
    size in bytes, in square brackets, which no template reads as a media tag (``<image>`` would be one for
    ms-swift).

    >>> media_note("image", "image/png", 1200)
    '[image: image/png, 1.2 kB]'
    """
    shown = (
        f"{size} B" if size < 1000 else f"{size / 1000:.1f} kB" if size < 10**6 else f"{size / 1e6:.1f} MB"
    )
    return f"[{kind}: {mime_type or 'unknown type'}, {shown}]"


def base64_size(data: str | None) -> int:
    """Decoded bytes of base64 text (4 characters, 3 bytes); 0 for anything else."""
    return len(data.rstrip("=")) * 3 // 4 if isinstance(data, str) else 0
