"""Which images from a turn's tool results a vision-language model is shown, and where in the tool messages.

A pure decision: each image's note in its observation becomes the template's image tag, within the
trajectory's limits; past them the note says why the image is not shown. docs/tools.md ("Images from tools").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..tools.executor import ToolRecord
from ..tools.media import ToolImage


@dataclass
class ImageBudget:
    """What one trajectory may still be shown: ``left`` more images, each at most ``max_bytes``."""

    left: int
    max_bytes: int

    @classmethod
    def of(cls, limits: Any, shown: int = 0) -> ImageBudget:
        """What is left of an environment's ``limits`` (``max_images_per_trajectory``, ``max_image_bytes``)
        for a trajectory that was shown ``shown`` images so far."""
        return cls(left=limits.max_images_per_trajectory - shown, max_bytes=limits.max_image_bytes)

    def refusal(self, image: ToolImage) -> str | None:
        """Why ``image`` is not shown (``None``: it is, and counts against ``left``)."""
        if len(image.data) > self.max_bytes:
            return f"larger than limits.max_image_bytes ({self.max_bytes})"
        if self.left <= 0:
            return "limits.max_images_per_trajectory reached"
        self.left -= 1
        return None


def show_images(
    messages: Sequence[dict[str, Any]], records: Sequence[ToolRecord], budget: ImageBudget, tag: str
) -> list[ToolImage]:
    """Put the images of ``records`` into their tool ``messages`` (one each, in order), in place; returns the
    images shown, in the order their tags appear.

    An image's note in the observation becomes ``tag``; over ``budget`` the note stays, with the reason. An
    image whose note is not in the observation (cut away with the end of a long result) is not shown.

    >>> record = ToolRecord("snap", {}, "see [image: image/png, 3 B]", images=[ToolImage(b"abc")])
    >>> messages = [{"role": "tool", "content": record.observation}]
    >>> len(show_images(messages, [record], ImageBudget(left=1, max_bytes=100), "<image>")), messages
    (1, [{'role': 'tool', 'content': 'see <image>'}])
    """
    shown: list[ToolImage] = []
    for message, record in zip(messages, records, strict=True):
        text, start, parts = message["content"], 0, []
        for image in record.images:
            at = text.find(image.note, start)
            if at < 0:
                continue
            reason = budget.refusal(image)
            parts += [text[start:at], tag if reason is None else f"{image.note[:-1]}; not shown: {reason}]"]
            if reason is None:
                shown.append(image)
            start = at + len(image.note)
        message["content"] = "".join(parts) + text[start:]
    return shown
