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
