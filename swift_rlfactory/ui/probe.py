"""Gradio's check that its own server answers, given the time a busy machine needs (gradio gives up after
3 s; why that is too short: docs/ui.md#the-launch-probe).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator

import httpx
from gradio import networking

ANSWERED = (200, 401, 301, 302, 303, 307, 308)  # what gradio's own check accepts (a login page redirects)


def answers(url: str, timeout_s: float) -> bool:
    """Whether ``url`` answers a HEAD request with a page or a redirect within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore")  # an unverified https certificate: gradio's check allows it
                status = httpx.head(url, timeout=max(1.0, min(10.0, left)), verify=False, trust_env=False)
            if status.status_code in ANSWERED:
                return True
        except httpx.HTTPError:
            pass
        if time.monotonic() + 0.5 >= deadline:
            return False
        time.sleep(0.5)


@contextlib.contextmanager
def patient_probe(timeout_s: float = 60.0) -> Iterator[None]:
    """Within the block, gradio's localhost check waits up to ``timeout_s`` for the server to answer."""
    original = networking.url_ok
    networking.url_ok = lambda url: answers(url, timeout_s)
    try:
        yield
    finally:
        networking.url_ok = original
