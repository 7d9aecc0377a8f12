"""Start ``bayesldp serve`` in a subprocess on the loopback address (the load tests and
``benchmarks/serve_load.py``)."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(spec: Path, data: Path, port: int, log: Path) -> subprocess.Popen:
    """``python -m bayesldp serve SPEC`` on ``port`` (output appended to ``log``), returned once
    it accepts connections; an AssertionError with its output if it exits or takes 120 s."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("a") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bayesldp", "serve", str(spec), "--port",
                                 str(port), "--data-dir", str(data)], stdout=out,
                                stderr=subprocess.STDOUT, env=env)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(log.read_text()) from None
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the server did not start within 120 s: {log.read_text()}")
