"""Images from tools for a vision-language model in ms-swift's multi-turn rollout.

Whether the model sees images is read from its ms-swift template (``model_meta.is_multimodal``). For one that
does, a turn's images go into the request's ``images`` (the next turn's engine input) with ``<image>`` in
the tool message, and the trajectory's ``images`` into ``rollout_infos`` (the trainer's encode). A text-only
model reads each image's note. docs/tools.md ("Images from tools").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..env.config import LimitsConfig
from ..rollout.images import ImageBudget, show_images
from ..tools.executor import ToolRecord

IMAGE_TAG = "<image>"
"""ms-swift's image placeholder in messages: each template's ``replace_tag`` turns the n-th one into the
n-th image of the request."""


def sees_images(template: Any) -> bool:
    """Whether the model behind ``template`` (an ms-swift template, or ``None``) takes images."""
    meta = getattr(template, "model_meta", None)
    return bool(getattr(meta, "is_multimodal", False))


def attach_images(
    request: Any,
    messages: Sequence[dict[str, Any]],
    records: Sequence[ToolRecord],
    limits: LimitsConfig,
    shown: int,
) -> int:
    """Show the images of this turn's ``records`` in their tool ``messages`` and append them to the request's
    ``images`` (a ``RolloutInferRequest``); ``shown`` is how many this trajectory was shown before. Returns
    how many it has been shown now."""
    images = show_images(messages, records, ImageBudget.of(limits, shown), IMAGE_TAG)
    request.images.extend(image.data_uri for image in images)
    return shown + len(images)
