"""LiteLLM's proxy as a real OpenAI-compatible server on loopback (CPU, canned replies).

The proxy lives in its own virtualenv (``<repo>/.venv-litellm``, built on first use from the
``vlm-proxy`` extra's pin in pyproject.toml) because its dependency pins clash with robosafe's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv-litellm"


def pinned_requirement() -> str:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    (req,) = doc["project"]["optional-dependencies"]["vlm-proxy"]
    assert "1.107.0" not in req
    return req


def ensure_proxy() -> Path:
    """The ``litellm`` executable, installing the pinned proxy once if it is missing.

    Under an exclusive lock: scripts/ci-tests.sh builds the venv in the background while the
    tests run, and two test workers (pytest -n) may both need it; whoever comes second waits
    for the finished venv instead of using or building a half-built one."""
    exe = VENV / "bin" / "litellm"
    with open(REPO / ".venv-litellm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.exists():
            # scripts/install.py makes the venv with the interpreter running it
            subprocess.run([sys.executable, str(REPO / "scripts" / "install.py"), str(VENV),
                            pinned_requirement()], check=True, timeout=900)
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mock_proxy(tmp: Path, model: str, reply: dict) -> Iterator[str]:
    """Run the proxy serving ``model`` with ``reply`` (as JSON text) to every chat request;
    yields its base URL and always stops it."""
    exe = ensure_proxy()
    port = _free_port()
    cfg = tmp / "litellm.yaml"
    cfg.write_text(json.dumps({"model_list": [{"model_name": model, "litellm_params": {
        "model": f"openai/{model}", "api_key": "sk-none",
        "mock_response": json.dumps(reply)}}]}))      # JSON is YAML
    with open(tmp / "litellm.log", "w") as log:
        # offline: the bundled model-cost map, no telemetry
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "LITELLM_TELEMETRY": "False"}
        proc = subprocess.Popen([str(exe), "--config", str(cfg), "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                cwd=tmp, env=env)
        try:
            yield _wait_ready(proc, f"http://127.0.0.1:{port}", tmp / "litellm.log")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait_ready(proc: subprocess.Popen, url: str, log: Path) -> str:
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health/liveliness", timeout=2):
                return f"{url}/v1"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("LiteLLM proxy did not start:\n" +
                                   log.read_text()[-2000:]) from None
            time.sleep(0.5)


if __name__ == "__main__":  # scripts/ci-tests.sh: build the proxy's venv ahead of the tests
    print(ensure_proxy())
