"""What the JSON clients share: a server's ``Retry-After`` read as seconds, in both of its forms."""

from __future__ import annotations

import email.utils
import time

import pytest

from swift_rlfactory.runtime.json_api import RETRY_AFTER_MAX_S, retry_after


def test_retry_after_reads_seconds_and_http_dates_and_caps_the_wait():
    assert retry_after({"retry-after": " 2 "}) == 2.0
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert retry_after({"retry-after": in_ten}) == pytest.approx(10, abs=1.5)
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert retry_after({"retry-after": past}) == 0.0
    assert retry_after({"retry-after": "3600"}) == RETRY_AFTER_MAX_S  # an hour would hold the run
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None
