# Sourced by the scripts that start `swift deploy` or `swift rollout`: the port a server really listens on.
#
# ms-swift 4.6 (DeployArguments, RolloutArguments: `find_free_port(self.port)`) moves to the next free port,
# without a word, when it cannot bind --port, and it binds without SO_REUSEADDR, so the sockets a server
# stopped a moment ago leave behind (TIME_WAIT, up to 60 s on Linux) are enough to move it. On an H100
# (2026-12-06) the second of three back-to-back rollout servers took 8001, and its trainer, sent to 8000,
# waited until the device time was gone. Two ways out, one per kind of caller:
#
#   port_free PORT [SECONDS]     # before a server whose URL is fixed (exported to other processes): until PORT
#                                # binds as ms-swift binds it; fails after SECONDS (75) naming the port
#   served_port LOG PID          # after starting a server: the port its LOG names ("listening on", Uvicorn's
#                                # "running on"); fails when PID exits first or after ROLLOUT_WAIT s (600)
#   served_up URL SECONDS [PID [NAME]]  # until an OpenAI-compatible server at URL answers URL/models; fails
#                                # after SECONDS, or at once when PID (the server) has exited; NAME names it
port_free() {
  python3 - "$1" "${2:-75}" <<'PY'
import socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + seconds
while True:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
            break
        except OSError as error:
            if time.monotonic() >= end:
                sys.exit(f"port {port} could not be bound within {seconds:.0f} s ({error.strerror}): another "
                         "server holds it; ms-swift would move to another port without a word")
    time.sleep(1)
PY
}

served_port() {
  local log=$1 pid=$2 waited=0 port
  while [ "$waited" -lt "${ROLLOUT_WAIT:-600}" ]; do
    port=$(grep -oE 'listening on [^ ]*:[0-9]+|running on [^ ]*:[0-9]+' "$log" 2>/dev/null | head -1 | grep -oE '[0-9]+$')
    if [ -n "$port" ]; then echo "$port"; return; fi
    kill -0 "$pid" 2>/dev/null || { echo "the server exited before it listened: $log" >&2; return 1; }
    sleep 1; waited=$((waited + 1))
  done
  echo "the server named no port within ${ROLLOUT_WAIT:-600} s: $log" >&2; return 1
}

served_up() {
  python3 - "$1" "$2" "${3:-}" "${4:-the server}" <<'PY'
import os, sys, time, urllib.request
url, seconds, pid, name = sys.argv[1].rstrip("/") + "/models", float(sys.argv[2]), sys.argv[3], sys.argv[4]
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        urllib.request.urlopen(url, timeout=2)
        sys.exit(print(f"{name} is up at {url}"))
    except OSError:
        try:
            pid and os.kill(int(pid), 0)
        except OSError:
            sys.exit(f"{name} (pid {pid}) exited before it answered {url}; see its log")
        time.sleep(1)
sys.exit(f"{name} at {url} did not answer within {seconds:.0f} s")
PY
}
