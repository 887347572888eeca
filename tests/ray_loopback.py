"""A Ray cluster on this machine for the tests and benchmarks/bench_ray.py (a test helper: it
lives with the tests, not in the package)."""

from __future__ import annotations

import os
import socket
from typing import Self


class LoopbackCluster:
    """A Ray cluster of ``nodes`` nodes on this machine, started with ``ray start`` as on a real
    cluster (a head, then nodes joining it; each its own temp dir and raylet, so Ray sees
    distinct nodes). For trying the cluster path, the tests and the benchmark::

        with LoopbackCluster(nodes=2) as c:
            run(..., ray_address=c.address)

    ``kill(i)`` SIGKILLs every process of node ``i`` (its raylet and workers), as a machine that
    loses power. Token authentication is off: the cluster listens on 127.0.0.1 only.
    """

    def __init__(self, nodes: int = 2, cpus_per_node: int = 1):
        import tempfile

        self.nodes, self.cpus = nodes, cpus_per_node
        self.root = tempfile.mkdtemp(prefix="rsray")  # short: Ray's socket paths are limited
        self.dirs = [f"{self.root}/n{i}" for i in range(nodes)]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
        for k in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            self.env.pop(k, None)

    def _ray(self, *args: str) -> None:
        import subprocess
        import sys
        from pathlib import Path

        subprocess.run([str(Path(sys.executable).parent / "ray"), "start", *args,
                        "--node-ip-address", "127.0.0.1", "--num-cpus", str(self.cpus),
                        "--disable-usage-stats"], env=self.env, check=True,
                       capture_output=True, timeout=180)

    def __enter__(self) -> Self:
        try:
            self._ray("--head", "--port", str(self.port), "--temp-dir", self.dirs[0],
                      "--include-dashboard=false")
            for d in self.dirs[1:]:
                self._ray("--address", self.address, "--temp-dir", d)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def kill(self, node: int) -> int:
        """SIGKILL node ``node``'s processes; how many there were."""
        import signal
        from pathlib import Path

        killed = 0
        mark = self.dirs[node].encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if mark not in (proc / "cmdline").read_bytes():
                    continue
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
            except (OSError, ProcessLookupError):
                continue
        return killed

    def close(self) -> None:
        import shutil

        for i in reversed(range(self.nodes)):
            self.kill(i)
        shutil.rmtree(self.root, ignore_errors=True)
