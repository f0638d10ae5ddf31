"""benchmarks/served_port.sh, for the scripts that start `swift deploy` / `swift rollout`: ms-swift moves a
server to the next port when its own cannot be bound, and the sockets of a server stopped a moment ago are
enough to move it (shown here with ms-swift's own function); ``port_free`` waits until the port binds as
ms-swift binds it, ``served_port`` reads the port a started server names."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

import pytest

from .conftest import ROOT


def helper(call: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f"source benchmarks/served_port.sh; {call}"], cwd=ROOT, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def port_left_in_time_wait() -> int:
    """A port whose server, like uvicorn, closed a connection first and then stopped."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server side closes first: its socket waits in TIME_WAIT for up to 60 s
    time.sleep(0.1)
    client.close()
    server.close()
    return port


@pytest.mark.timeout(60)
def test_a_port_a_stopped_server_left_moves_ms_swift_and_port_free_says_so():
    from swift.utils import find_free_port

    port = port_left_in_time_wait()
    assert find_free_port(port) != port  # what `swift deploy --port PORT` would do now, without a word
    started = time.monotonic()
    done = helper(f"port_free {port} 2")
    assert done.returncode != 0 and time.monotonic() - started < 10
    assert f"port {port} could not be bound within 2 s" in done.stderr


@pytest.mark.timeout(60)
def test_port_free_waits_until_the_holder_lets_go():
    holder = socket.socket()
    holder.bind(("", 0))
    holder.listen()
    port = holder.getsockname()[1]
    threading.Timer(1.5, holder.close).start()
    started = time.monotonic()
    done = helper(f"port_free {port} 20")
    assert done.returncode == 0, done.stderr
    assert 1.0 < time.monotonic() - started < 15


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "line",
    [
        "[WARNING:swift] The rollout server is listening on 0.0.0.0:8013 without an API key",  # swift rollout
        "INFO:     Uvicorn running on http://127.0.0.1:8013 (Press CTRL+C to quit)",  # swift deploy
    ],
)
def test_served_port_reads_the_port_either_server_names(tmp_path, line):
    log = tmp_path / "server.log"
    log.write_text("INFO: loading\n")
    server = f"(sleep 1; echo '{line}' >> {log}) & sleep 30 >/dev/null 2>&1 & pid=$!"
    done = helper(f"{server}; served_port {log} $pid; kill $pid")
    assert done.returncode == 0 and done.stdout.strip() == "8013", done.stderr


def serve_models_after(delay: float) -> tuple[int, threading.Event]:
    """A stand-in OpenAI-compatible server that answers `GET /v1/models` once `delay` seconds have passed."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    ready_at, stop = time.monotonic() + delay, threading.Event()

    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            up = time.monotonic() >= ready_at and self.path == "/v1/models"
            self.send_response(200 if up else 503)
            self.end_headers()
            self.wfile.write(b'{"data": []}' if up else b"")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Thread(target=lambda: (stop.wait(), server.shutdown()), daemon=True).start()
    return server.server_address[1], stop


@pytest.mark.timeout(60)
def test_served_up_waits_until_the_server_lists_its_models():
    port, stop = serve_models_after(1.5)
    try:
        started = time.monotonic()
        done = helper(f"sleep 30 & pid=$!; served_up http://127.0.0.1:{port}/v1 20 $pid; kill $pid")
        assert done.returncode == 0, done.stderr
        assert 1.0 < time.monotonic() - started < 15
    finally:
        stop.set()


@pytest.mark.timeout(60)
def test_served_up_fails_at_once_when_the_server_has_exited_and_at_its_limit_otherwise():
    port = port_left_in_time_wait()  # nothing listens there
    started = time.monotonic()
    done = helper(f"true & pid=$!; wait $pid; served_up http://127.0.0.1:{port}/v1 20 $pid")
    assert done.returncode != 0 and time.monotonic() - started < 10
    assert "exited before it answered" in done.stderr
    done = helper(f"served_up http://127.0.0.1:{port}/v1 2")
    assert done.returncode != 0 and "did not answer within 2 s" in done.stderr
