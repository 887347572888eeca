"""Serve any robosafe policy over openpi's websocket + msgpack-numpy protocol.

The server side of :mod:`robosafe.policies.remote`, wire-compatible with openpi's
``openpi/serving/websocket_policy_server.py`` (https://github.com/Physical-Intelligence/openpi),
so ``openpi_client.WebsocketClientPolicy`` can drive a robosafe policy and
:class:`~robosafe.policies.remote.RemotePolicy` can drive this server or an openpi one:

- on connect the server sends its metadata ``{"policy": name, "protocol":
  "openpi-msgpack-numpy", "action_dim": d or None, "supports_reset": True}``;
- each observation dict is answered with ``{"actions": policy.act(obs), "server_timing":
  {"infer_ms": ..., "prev_total_ms": ...}}`` (openpi's timing keys);
- robosafe extension, advertised by ``"supports_reset": True``: an observation with the key
  ``"__reset__"`` carries a ``task_info`` dict; the server calls ``policy.reset(task_info)``
  and replies ``{"__ack__": "reset"}``. openpi clients never send it;
- if the policy raises, the server sends the traceback as a text message and closes the
  connection with code 1011, as openpi does; the server itself keeps running;
- ``GET /healthz`` answers 200 OK, as openpi's does.

Bounds (a server is reachable by anyone on its network): frames above ``max_frame_bytes`` are
refused by websockets (close code 1009) before they are decoded; a ``__reset__`` whose
``action_dim`` is not an integer in ``[1, max_action_dim]`` and a reply with more than
``max_action_values`` numbers are policy errors (text message, close 1011). Without them one
30-byte reset with ``action_dim=1e8`` made the random policy allocate gigabytes.

robosafe policies keep per-episode state. Given a policy *factory* (a class or a zero-argument
callable, as ``robosafe serve-policy`` passes), every connection gets its own policy, so
several runner workers can share one server. Given a policy *object*, all connections share it
(their requests are serialised, never interleaved inside the policy): one client at a time.
"""

from __future__ import annotations

import asyncio
import http
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Self

import numpy as np

from robosafe.errors import RobosafeError
from robosafe.policies.remote import packb, unpackb

log = logging.getLogger(__name__)

PROTOCOL = "openpi-msgpack-numpy"

#: Default bounds. 64 MiB holds several 224 x 224 (or 480 x 640) uint8 camera images per
#: observation with room to spare; robot arms take a handful of action dimensions (7 for a
#: Panda, 14 for two arms) and VLA chunks are tens of steps, so 4096 values is generous.
MAX_FRAME_BYTES = 64 * 2**20
MAX_ACTION_DIM = 256
MAX_ACTION_VALUES = 4096


def _url(host: str, port: int) -> str:
    return f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}"


def _is_factory(policy: Any) -> bool:
    return isinstance(policy, type) or (callable(policy) and not hasattr(policy, "act"))


def _health_check(connection: Any, request: Any) -> Any:
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None


class PolicyServer:
    """A websocket policy server, run in the foreground (:meth:`serve_forever`) or in a
    background thread (:meth:`start` / :meth:`stop`, or as a context manager).

    ``policy`` is a policy object shared by every connection, or a factory (class or
    zero-argument callable) called once per connection (see the module docstring).

    ``port=0`` binds a free port; :attr:`url` is the address once started. ``requests`` and
    ``resets`` count the inference and reset messages answered.
    """

    def __init__(self, policy: Any, host: str = "127.0.0.1", port: int = 0, *,
                 action_dim: int | None = None, metadata: dict[str, Any] | None = None,
                 max_frame_bytes: int = MAX_FRAME_BYTES, max_action_dim: int = MAX_ACTION_DIM,
                 max_action_values: int = MAX_ACTION_VALUES):
        self.factory: Callable[[], Any] | None = policy if _is_factory(policy) else None
        # the shared policy, or a specimen that names the factory's policies in the metadata
        self.policy = policy() if self.factory is not None else policy
        self.host = host
        self.port = int(port)
        self.action_dim = action_dim
        self.extra_metadata = dict(metadata or {})
        self.max_frame_bytes = int(max_frame_bytes)
        self.max_action_dim = int(max_action_dim)
        self.max_action_values = int(max_action_values)
        self.requests = 0
        self.resets = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._lock: asyncio.Lock | None = None  # made in run(), on the serving loop

    @property
    def url(self) -> str:
        return _url(self.host, self.port)

    def metadata(self) -> dict[str, Any]:
        dim = self.action_dim
        if dim is None:
            # robosafe's built-ins know their width once reset; before that their default
            dim = getattr(self.policy, "action_dim", getattr(self.policy, "dim", None))
        return {"policy": str(getattr(self.policy, "name", type(self.policy).__name__)),
                "protocol": PROTOCOL, "action_dim": int(dim) if dim is not None else None,
                "supports_reset": True, **self.extra_metadata}

    # -- the protocol ----------------------------------------------------------------------------
    async def _handler(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        log.info("connection from %s", ws.remote_address)
        if self.factory is not None:
            policy, lock = self.factory(), asyncio.Lock()
        else:
            policy, lock = self.policy, self._lock
        try:
            await ws.send(packb(self.metadata()))
        except ConnectionClosed:
            return
        prev_total_s = None
        while True:
            try:
                raw = await ws.recv()
            except ConnectionClosed:
                return
            start = time.monotonic()
            try:
                payload = packb(await self._answer(policy, lock, raw, prev_total_s))
            except Exception:  # any failure goes back to the client, as openpi does
                log.warning("policy error, closing the connection", exc_info=True)
                try:
                    await ws.send(traceback.format_exc())
                    await ws.close(code=1011, reason="policy error; traceback in previous frame")
                except ConnectionClosed:
                    pass
                return
            try:
                await ws.send(payload)
            except ConnectionClosed:
                return
            prev_total_s = time.monotonic() - start

    async def _answer(self, policy: Any, lock: asyncio.Lock, raw: str | bytes,
                      prev_total_s: float | None) -> dict[str, Any]:
        if isinstance(raw, str):
            raise TypeError("expected a binary msgpack message, got text")
        obs = unpackb(raw)
        if not isinstance(obs, dict):
            raise TypeError(f"expected an observation dict, got {type(obs).__name__}")
        if "__reset__" in obs:
            task_info = obs["__reset__"]
            if not isinstance(task_info, dict):
                raise TypeError("__reset__ must carry a task_info dict")
            self._check_action_dim(task_info)
            async with lock:
                # policies are synchronous and may be slow: keep the loop free for pings
                await asyncio.to_thread(policy.reset, task_info)
            self.resets += 1
            return {"__ack__": "reset"}
        t0 = time.monotonic()
        async with lock:
            action = await asyncio.to_thread(policy.act, obs)
        infer_s = time.monotonic() - t0
        action = np.asarray(action)
        if action.size > self.max_action_values:
            raise ValueError(f"the policy answered {action.size} action values, more than the "
                             f"server's bound of {self.max_action_values}")
        self.requests += 1
        timing = {"infer_ms": infer_s * 1000.0}
        if prev_total_s is not None:
            timing["prev_total_ms"] = prev_total_s * 1000.0
        return {"actions": action, "server_timing": timing}

    def _check_action_dim(self, task_info: dict[str, Any]) -> None:
        """Refuse a reset whose ``action_dim`` the policy would allocate unchecked."""
        if "action_dim" not in task_info:
            return
        dim = task_info["action_dim"]
        ok = (isinstance(dim, (int, np.integer)) and not isinstance(dim, bool)) or (
            isinstance(dim, (float, np.floating)) and float(dim).is_integer())
        if not ok or not 1 <= dim <= self.max_action_dim:
            raise ValueError(f"__reset__ action_dim {dim!r} is not an integer in "
                             f"[1, {self.max_action_dim}] (the server's bound)")

    # -- running ---------------------------------------------------------------------------------
    async def run(self, ready: Callable[[str], None] | None = None) -> None:
        """Serve until :meth:`stop`; ``ready(url)`` is called once the port is bound."""
        from websockets.asyncio.server import serve

        self._lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            # openpi's settings (arrays do not compress, camera images exceed websockets'
            # 1 MiB default), but bounded: openpi's max_size=None lets one frame take all memory
            server = await serve(self._handler, self.host, self.port, compression=None,
                                 max_size=self.max_frame_bytes,
                                 process_request=_health_check)
        except OSError as exc:
            # asyncio's own message repeats the address; the errno text is the cause
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise RobosafeError(f"cannot serve on {_url(self.host, self.port)}: "
                                f"{reason.lower()}") from None
        async with server:
            self.port = server.sockets[0].getsockname()[1]
            log.info("serving %s on %s", self.metadata()["policy"], self.url)
            if ready is not None:
                ready(self.url)
            self._ready.set()
            await self._stopping.wait()

    def serve_forever(self, ready: Callable[[str], None] | None = None) -> None:
        """Serve in this thread until :meth:`stop` from another thread or Ctrl-C
        (KeyboardInterrupt propagates)."""
        asyncio.run(self.run(ready))

    def start(self, timeout_s: float = 10.0) -> Self:
        """Serve from a daemon thread; returns once the port is bound (:attr:`url` is set)."""
        if self._thread is not None:
            raise RobosafeError(f"policy server {self.url} already started")
        self._ready.clear()
        self._error = None

        def main() -> None:
            try:
                asyncio.run(self.run())
            except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
                self._error = exc
                self._ready.set()

        self._thread = threading.Thread(target=main, name=f"policy-server-{self.port}",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RobosafeError(f"policy server on {self.url} did not start in {timeout_s:g} s")
        if self._error is not None:
            self._thread = None
            raise self._error
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Close the listening socket and every connection, and wait for the thread."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
            except RuntimeError:  # the loop finished meanwhile
                pass
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def __enter__(self) -> Self:
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_policy(policy: Any, host: str = "127.0.0.1", port: int = 0, *,
                 ready: Callable[[str], None] | None = None,
                 action_dim: int | None = None, **bounds: int) -> None:
    """Serve ``policy`` (an object, or a factory for one policy per connection) on
    ``ws://host:port`` in this thread until Ctrl-C (KeyboardInterrupt
    propagates). ``port=0`` picks a free port; ``ready(url)`` gets the address once bound.
    ``bounds``: ``max_frame_bytes``, ``max_action_dim``, ``max_action_values`` (see
    :class:`PolicyServer`)."""
    PolicyServer(policy, host, port, action_dim=action_dim, **bounds).serve_forever(ready)
