"""A test plugin for ``swift rlhf --external_plugins``: appends the shape of every batch of pixels the CLIP
vision tower is given to the file named by ``$VISION_PROBE``, one JSON list a line."""

import json
import os

from transformers import CLIPVisionModel

_forward = CLIPVisionModel.forward


def _recorded(self, pixel_values=None, *args, **kwargs):
    with open(os.environ["VISION_PROBE"], "a") as probe:
        probe.write(json.dumps(list(pixel_values.shape)) + "\n")
    return _forward(self, pixel_values, *args, **kwargs)


CLIPVisionModel.forward = _recorded
