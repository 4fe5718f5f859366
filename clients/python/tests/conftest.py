"""The real gateway the integration tests (test_integration.py, test_keys.py) run against, once per session."""

import json
import os
import select
import subprocess
import sys
import time
from typing import Any, Dict, Iterator

import pytest

# The package from this checkout, installed or not.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

# The real gateway of the integration tests (tests/gateway_server.ts), shared by every test module of the session.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SERVER = os.path.join("clients", "python", "tests", "gateway_server.ts")


@pytest.fixture(scope="session")
def gateway() -> Iterator[Dict[str, Any]]:
    """Starts the real gateway once for the session; it stops when its stdin closes."""
    proc = subprocess.Popen(
        ["node", "-r", "ts-node/register/transpile-only", SERVER],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    deadline = time.monotonic() + 60
    line = ""
    while time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            break
    if not line:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"the test gateway did not start: {err[-2000:]}")
    info = json.loads(line)
    try:
        yield info
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
