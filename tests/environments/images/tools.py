"""Python tools of the image test environment: a picture as a PIL image, and one too large to show."""

import random

from PIL import Image

from swift_rlfactory.tools import tool


@tool
def snapshot(color: str) -> list:
    """Take an 8x8 picture of one colour.

    Args:
        color: a colour name PIL knows, such as "red"
    """
    return [f"a {color} square:", Image.new("RGB", (8, 8), color)]


@tool
def panorama() -> Image.Image:
    """Take a large picture of noise (more bytes than the environment's limits.max_image_bytes)."""
    return Image.frombytes("RGB", (64, 64), random.Random(0).randbytes(64 * 64 * 3))
