"""Gradio's localhost check, made patient: a server slower than 3 s to its first answer is still up."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

networking = pytest.importorskip("gradio.networking", reason="the ui extra is not installed")

from swift_rlfactory.ui.probe import answers, patient_probe  # noqa: E402


class Slow(http.server.BaseHTTPRequestHandler):
    """Answers 200, the first request only after 3.5 s (a large app's first page on a loaded machine)."""

    first = threading.Event()

    def do_HEAD(self):  # noqa: N802 (http.server's name)
        if not Slow.first.is_set():
            Slow.first.set()
            time.sleep(3.5)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_url() -> Iterator[str]:
    Slow.first.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_gradio_gives_up_on_a_slow_first_answer_and_the_patient_probe_does_not(slow_url):
    assert networking.url_ok(slow_url) is False  # gradio 6.31's own check: the first timeout ends it
    Slow.first.clear()
    original = networking.url_ok
    with patient_probe(timeout_s=20):
        assert networking.url_ok is not original
        assert networking.url_ok(slow_url) is True
    assert networking.url_ok is original  # restored after the launch


def test_a_port_nobody_listens_on_fails_within_the_timeout():
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow) as closed:
        url = f"http://127.0.0.1:{closed.server_address[1]}/"
    start = time.monotonic()
    assert answers(url, timeout_s=2) is False
    assert time.monotonic() - start < 4
