"""The ray backend: a run's cells as Ray tasks, on an existing cluster or a private one.

A cell runs wherever Ray schedules it and returns its outcome row and files (trace, actions,
frame videos in :data:`~robosafe.runner.worker.CHUNK_BYTES` pieces through the object store);
only the driver writes the run directory, so nothing assumes a shared filesystem and
``--resume`` works as with the local backend. Concurrency is capped at ``workers`` cells in
flight whatever the cluster's size.

Faults: Ray re-executes a task whose worker process or node died (``max_retries``); a cell whose
result cannot be fetched (the node holding it died after the task returned) is submitted again
by the driver, up to :data:`ATTEMPTS` times. The driver writes each cell once, when its result
is whole, so a lost node costs time, never an episode or a duplicate. Ctrl-C cancels the tasks
in flight.

Every node must have the same robosafe version installed as the driver (task files travel with
the cells, robosafe itself does not): checked once per node before any episode runs.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any

from robosafe.errors import RobosafeError
from robosafe.log import NOTE
from robosafe.redact import redact_url
from robosafe.runner.plan import robosafe_version
from robosafe.runner.worker import CellJob, CellResult, release_scratch, run_job

log = logging.getLogger(__name__)

#: how many times the driver submits one cell whose result was lost with its node
ATTEMPTS = 3
#: seconds to wait for a node's version check (a node starting its first worker is slow)
NODE_CHECK_S = 120.0


def _ray():
    try:
        import ray
    except ImportError:
        raise RobosafeError("the ray backend needs Ray: pip install 'robosafe[ray]'") from None
    return ray


#: the longest temporary folder a private cluster's session folder goes into (see connect)
SHORT_TMP = 30


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a Ray address: ``HOST:PORT`` or ``ray://HOST:PORT`` (Ray Client);
    None for ``auto`` (Ray finds the local cluster itself). Anything else is one line naming
    the address (credentials masked) and the forms Ray takes."""
    if address == "auto":
        return None
    client = address.lower().startswith("ray://")
    rest = address[len("ray://"):] if client else address
    rest = (rest.rsplit("@", 1)[-1] if client else rest).split("/", 1)[0]
    host, _, port = rest.rpartition(":")
    if (not port.isdigit() or not 0 < int(port) < 65536 or "://" in rest or "@" in rest
            or not host):
        raise RobosafeError(f"Ray address {_shown(address)!r}: expected HOST:PORT, "
                            "ray://HOST:PORT or auto (--ray-address / RAY_ADDRESS)")
    return host.strip("[]"), int(port)


def _shown(address: str) -> str:
    """``address`` as messages show it: the user information of a URL, or of a bare
    ``USER:PASSWORD@HOST:PORT`` (which no Ray address has, but a user may type), masked."""
    if "://" in address:
        return redact_url(address)
    return f"***@{address.rsplit('@', 1)[1]}" if "@" in address else address


def _reachable(address: str) -> None:
    """One line, before Ray's own minute of retries, when nothing listens at ``address``."""
    where = _host_port(address)
    if where is None:
        return
    try:
        with socket.create_connection(where, timeout=PROBE_S) as conn:
            grpc = _answers_grpc(conn)
    except OSError as exc:
        raise RobosafeError(f"cannot reach the Ray cluster at {_shown(address)!r} ({exc}); "
                            "start it with `ray start --head` or fix --ray-address / "
                            "RAY_ADDRESS") from None
    if not grpc:
        raise RobosafeError(f"{_shown(address)!r} answers but is not a Ray cluster (no gRPC "
                            "reply); fix --ray-address / RAY_ADDRESS")


#: seconds to wait for a named cluster to accept a connection, then to answer it
PROBE_S = 5.0
#: an HTTP/2 client's connection preface and an empty SETTINGS frame: every gRPC server, Ray's
#: GCS and Ray Client's server among them, answers with a SETTINGS frame of its own
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _answers_grpc(conn: socket.socket) -> bool:
    """Whether the listener on ``conn`` speaks HTTP/2 (gRPC, as Ray does). Ray itself would
    retry a listener that does not for two minutes and more; this takes one round trip, or
    PROBE_S of silence."""
    conn.settimeout(PROBE_S)
    conn.sendall(_H2_PREFACE)
    head = b""
    try:
        while len(head) < 9 and (chunk := conn.recv(9 - len(head))):
            head += chunk
    except TimeoutError:
        return False
    return len(head) == 9 and head[3] == 4  # a frame header whose type is SETTINGS


def preflight(address: str | None) -> None:
    """Before a run directory is touched: Ray is installed and a named cluster answers."""
    _ray()
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        _reachable(address)


def connect(ray, address: str | None, workers: int) -> str | bool:
    """Connect to the cluster at ``address`` / ``$RAY_ADDRESS``, or start a private one of
    ``workers`` CPUs when none is named. Truthy when this call started Ray (and must stop it):
    for a private cluster, the temporary folder its session lives in (removed with it)."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    if address is None:
        if not any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN",
                                             "RAY_AUTH_TOKEN_PATH")):
            # Ray protects a new local cluster with a token it would save to ~/.ray/auth_token,
            # where it changes how later `ray start` clusters authenticate; a private cluster
            # lives for one run, so its token lives in this process's environment only.
            os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
        import tempfile

        # Ray's session files (logs, sockets, spilled objects) in a folder of this run's own,
        # removed when it ends, instead of a session folder under /tmp/ray left behind. Its
        # sockets (.../session_<date>_<time>_<pid>/sockets/plasma_store, some 70 bytes) must
        # fit a Unix socket path's 107 bytes: a long temporary folder gives way to /tmp
        base = os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
        if len(base) > SHORT_TMP and os.path.isdir("/tmp"):
            base = "/tmp"
        temp = tempfile.mkdtemp(prefix="rsray", dir=base)
        ray.init(num_cpus=workers, _temp_dir=temp, **quiet)
        return temp
    _reachable(address)
    try:
        # an existing cluster brings its own resources: sizing it here is Ray's error
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RobosafeError(f"cannot connect to the Ray cluster at {_shown(address)!r}: "
                            f"{redact_url(str(exc).splitlines()[0])}") from None
    return True


def _node_version() -> dict[str, str]:
    return {"robosafe": robosafe_version(), "node": _node_id()}


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def check_nodes(ray) -> list[str]:
    """Every alive node with CPUs runs robosafe at the driver's version; one line naming the
    first node that does not. Returns the node ids."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    want = robosafe_version()
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU")]
    probe = ray.remote(num_cpus=0, max_retries=0)(_node_version)
    refs = {n["NodeID"]: probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["NodeID"], soft=False)).remote() for n in nodes}
    for node_id, ref in refs.items():
        where = next(f"{n['NodeManagerAddress']} ({node_id[:12]})" for n in nodes
                     if n["NodeID"] == node_id)
        try:
            got = ray.get(ref, timeout=NODE_CHECK_S)
        except Exception as exc:  # noqa: BLE001 - any failure here means the node cannot run cells
            first = next((x for x in str(exc).splitlines() if "Error" in x), str(exc))
            raise RobosafeError(f"Ray node {where} cannot run robosafe ({first.strip()}); "
                                f"install robosafe {want} on every node") from None
        if got["robosafe"] != want:
            raise RobosafeError(f"Ray node {where} has robosafe {got['robosafe']}, the driver "
                                f"{want}; install the same version on every node")
    return list(refs)


def _remote_job(job: CellJob) -> CellResult:
    import ray

    from robosafe.log import install_stderr_lines

    install_stderr_lines()  # a Ray worker is robosafe's own process: its lines as the CLI's
    try:
        res = run_job(job, put=ray.put)
    finally:
        # a Ray worker outlives its tasks and is stopped without its exit handlers: nothing
        # of a cell stays in its temporary folder (the result is in the object store)
        release_scratch()
    res.node = _node_id()
    return res


def run_on_ray(jobs: list[CellJob], workers: int,
               store: Callable[[CellResult, Callable[[Any], bytes]], None], *,
               address: str | None = None, in_order: bool = True,
               stop: Callable[[], bool] | None = None) -> Counter:
    """Run ``jobs`` as Ray tasks in list order, at most ``workers`` in flight; ``store`` each
    whole result on the driver. ``stop``: asked before each task starts; True starts no more
    (those in flight finish); ``in_order`` is how Ray always starts them. Returns the episodes
    run per node id."""
    ray = _ray()
    started = connect(ray, address, workers)
    per_node: Counter = Counter()
    inflight: dict[Any, CellJob] = {}
    try:
        check_nodes(ray)
        task = ray.remote(num_cpus=1, max_retries=ATTEMPTS)(_remote_job)
        queue = list(jobs)
        attempts: Counter = Counter()
        while inflight or (queue and not (stop and stop())):
            while queue and len(inflight) < workers and not (stop and stop()):
                job = queue.pop(0)
                inflight[task.remote(job)] = job
            (ref,), _ = ray.wait(list(inflight), num_returns=1)
            job = inflight.pop(ref)
            try:
                res = ray.get(ref)
                store(res, ray.get)
            except ray.exceptions.RayError as exc:
                if isinstance(exc, ray.exceptions.RayTaskError):
                    # run_job records an episode's own errors; this is the node's Python
                    first = next((x for x in str(exc).splitlines() if "Error" in x), str(exc))
                    raise RobosafeError(f"{job.cell.name}: failed on the Ray cluster: "
                                        f"{first.strip()}") from None
                attempts[job.cell] += 1
                if attempts[job.cell] >= ATTEMPTS:
                    raise RobosafeError(f"{job.cell.name}: lost {ATTEMPTS} times on the Ray "
                                        f"cluster ({type(exc).__name__}); --resume runs it "
                                        "again") from None
                log.warning("%s: result lost (%s), running it again",
                            job.cell.name, type(exc).__name__)
                queue.insert(0, job)
                continue
            per_node[res.node] += 1
    except KeyboardInterrupt:
        for ref in inflight:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()
        if isinstance(started, str):
            import shutil

            shutil.rmtree(started, ignore_errors=True)
    if len(per_node) > 1 or address or os.environ.get("RAY_ADDRESS"):
        log.log(NOTE, "episodes per Ray node: %s",
                    ", ".join(f"{n[:12]} {k}" for n, k in sorted(per_node.items())))
    return per_node
