"""Remote policies over openpi's websocket + msgpack-numpy policy-server protocol.

The protocol is the one Physical Intelligence's openpi serves pi0 / pi0.5 with
(https://github.com/Physical-Intelligence/openpi: ``openpi_client/websocket_client_policy.py``,
``openpi_client/msgpack_numpy.py``, ``openpi/serving/websocket_policy_server.py``), so a
robosafe run can evaluate a VLA served by an unmodified openpi server:

1. The client opens a websocket; the server sends one binary msgpack message, its metadata dict.
2. Each request is one binary message, the observation dict; the reply is one binary message, a
   dict with ``"actions"`` (one action ``(d,)`` or a chunk ``(H, d)``) and optionally
   ``"server_timing"``. A text message instead of a reply is the server's error (openpi sends
   the traceback, then closes the connection).
3. NumPy values are msgpack maps with *binary* keys: arrays
   ``{b"__ndarray__": True, b"data": raw bytes, b"dtype": dtype.str (e.g. "<f8"),
   b"shape": [...]}``, scalars ``{b"__npgeneric__": True, b"data": value, b"dtype": ...}``.

robosafe extension (only used when the server's metadata has ``"supports_reset": True``, as
:mod:`robosafe.policies.server` does; openpi servers are stateless per request and never see
it): the message ``{"__reset__": task_info}`` asks the server to call ``policy.reset(task_info)``
and is answered with ``{"__ack__": "reset"}``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import time
from importlib import resources
from typing import Any, Self

import msgpack
import numpy as np
import yaml

from robosafe.errors import RobosafeError
from robosafe.redact import redact_url

#: Largest reply frame a client accepts: an action chunk is kilobytes, so a server sending more
#: is broken or hostile, and websockets would otherwise buffer it whole before we could look.
MAX_REPLY_BYTES = 16 * 2**20

#: Environment variable holding the API key sent as ``Authorization: Api-Key <key>`` (the header
#: openpi-client sends for authenticated policy servers).
API_KEY_ENV = "ROBOSAFE_POLICY_API_KEY"

#: Suffixes of privileged simulator state that a learned policy would not have on a real
#: robot: object poses, articulation and handle positions (robosafe's simulator), and
#: robosuite's concatenated ``object-state``.
PRIVILEGED_SUFFIXES = ("_pos", "_quat", "_qpos", "_handle_pos", "-state")
ROBOT_PREFIX = "robot0_"

# openpi refuses void, object and complex arrays; object arrays could not be rebuilt from raw
# bytes anyway, and accepting them from a server would be an attack surface.
_WIRE_KINDS = frozenset("biufUS")


# -- msgpack-numpy (openpi's encoding) -----------------------------------------------------------
def _encode(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind not in _WIRE_KINDS:
        raise TypeError(f"cannot send numpy dtype {obj.dtype} (openpi's msgpack-numpy)")
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return {b"__ndarray__": True, b"data": arr.tobytes(), b"dtype": arr.dtype.str,
                b"shape": list(arr.shape)}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"cannot send {type(obj).__name__} over msgpack")


def _decode(obj: dict) -> Any:
    # openpi writes binary keys; accept str keys too, as openpi's own decoder does
    for tag, data, dtype, shape in ((b"__ndarray__", b"data", b"dtype", b"shape"),
                                    ("__ndarray__", "data", "dtype", "shape")):
        if tag in obj:
            dt = np.dtype(obj[dtype])
            if dt.kind not in _WIRE_KINDS:
                raise ValueError(f"unsupported dtype {dt}")
            # a copy: frombuffer views are read-only and policies may write into observations
            return np.frombuffer(obj[data], dtype=dt).reshape(obj[shape]).copy()
    for tag, data, dtype in ((b"__npgeneric__", b"data", b"dtype"),
                             ("__npgeneric__", "data", "dtype")):
        if tag in obj:
            dt = np.dtype(obj[dtype])
            if dt.kind not in _WIRE_KINDS:
                raise ValueError(f"unsupported dtype {dt}")
            return dt.type(obj[data])
    return obj


def packb(obj: Any) -> bytes:
    """msgpack bytes with NumPy values encoded the way openpi's ``msgpack_numpy`` does."""
    return msgpack.packb(obj, default=_encode, use_bin_type=True)


def unpackb(data: bytes) -> Any:
    """Inverse of :func:`packb` (also decodes what openpi's server and client send)."""
    return msgpack.unpackb(data, object_hook=_decode, raw=False, strict_map_key=False)


# -- observations --------------------------------------------------------------------------------
def _is_privileged(key: str) -> bool:
    return not key.startswith(ROBOT_PREFIX) and key.endswith(PRIVILEGED_SUFFIXES)


def as_uint8_image(img: np.ndarray) -> np.ndarray:
    if img.dtype == np.uint8:
        return img
    if img.dtype.kind == "f":  # renderers that return floats use [0, 1]
        return (np.clip(np.nan_to_num(img), 0.0, 1.0) * 255.0).round().astype(np.uint8)
    return np.clip(img, 0, 255).astype(np.uint8)


def wire_observation(observation: dict[str, Any], instruction: str | None = None, *,
                     privileged: bool = False) -> dict[str, Any]:
    """The observation as sent: robosuite keys, images as uint8, ``prompt`` (openpi's name for
    the instruction); values that are not arrays, numbers or strings are dropped, and so are
    privileged object states unless ``privileged``."""
    out: dict[str, Any] = {}
    for key, value in observation.items():
        if not isinstance(key, str) or (not privileged and _is_privileged(key)):
            continue
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                continue
            out[key] = as_uint8_image(value) if key.endswith("_image") else value
        elif isinstance(value, (np.bool_, np.integer, np.floating, bool, int, float, str)):
            out[key] = value
    if instruction is not None and "prompt" not in out:
        out["prompt"] = instruction
    return out


@functools.cache
def _adapters() -> dict[str, Any]:
    text = resources.files("robosafe.policies").joinpath("data", "adapters.yaml").read_text()
    return yaml.safe_load(text)


def adapter_names() -> tuple[str, ...]:
    return tuple(_adapters()["adapters"])


def default_adapter(host: str) -> str:
    """The observation adapter a host's runs use unless told otherwise (adapters.yaml)."""
    return _adapters()["host_defaults"].get(host, "robosuite")


def check_adapter(name: str) -> dict[str, Any]:
    table = _adapters()["adapters"]
    if name not in table:
        raise RobosafeError(f"unknown observation adapter {name!r}: use one of "
                            f"{', '.join(table)}")
    return table[name]


def axis_angle(quat_xyzw: np.ndarray) -> np.ndarray:
    """Axis-angle (axis x angle, radians) of a robosuite (x, y, z, w) quaternion: the
    orientation part of openpi's 8-d LIBERO state. A quaternion with |w| -> 1 is no rotation."""
    q = np.asarray(quat_xyzw, dtype=float)
    w = float(np.clip(q[3], -1.0, 1.0))
    den = float(np.sqrt(1.0 - w * w))
    if den < 1e-12:
        return np.zeros(3)
    return q[:3] * (2.0 * np.arccos(w)) / den


STATE_NAMES = ["eef_x", "eef_y", "eef_z", "eef_axis_angle_x", "eef_axis_angle_y",
               "eef_axis_angle_z", "gripper_qpos_0", "gripper_qpos_1"]


def state_row(obs: dict) -> np.ndarray:
    """LIBERO's 8-d ``observation.state`` (eef position, eef axis-angle, two finger positions)
    from a robosuite observation: what datasets hold and learned policies read."""
    grip = np.asarray(obs.get("robot0_gripper_qpos", np.zeros(2)), dtype=float)[:2]
    return np.concatenate([np.asarray(obs["robot0_eef_pos"], dtype=float),
                           axis_angle(obs["robot0_eef_quat"]), grip])


def resize_with_pad(img: np.ndarray, size: int) -> np.ndarray:
    """``img`` scaled (bilinear) to fit ``size`` x ``size`` keeping its aspect ratio, centred on
    black: the image preprocessing of openpi's clients (``image_tools.resize_with_pad``)."""
    from PIL import Image

    h, w = img.shape[:2]
    if (h, w) == (size, size):
        return img
    ratio = max(w / size, h / size)
    rw, rh = max(1, int(w / ratio)), max(1, int(h / ratio))
    scaled = np.asarray(Image.fromarray(img).resize((rw, rh), resample=Image.BILINEAR))
    out = np.zeros((size, size, *img.shape[2:]), dtype=img.dtype)
    top, left = (size - rh) // 2, (size - rw) // 2
    out[top:top + rh, left:left + rw] = scaled
    return out


def adapt_observation(observation: dict[str, Any], instruction: str | None, adapter: str,
                      *, privileged: bool = False) -> dict[str, Any]:
    """The observation as ``adapter`` (adapters.yaml) sends it; a key the adapter needs and
    the observation lacks is an error naming it (never a silently empty input)."""
    spec = check_adapter(adapter)
    if spec.get("passthrough"):
        return wire_observation(observation, instruction,
                                privileged=privileged or bool(spec.get("privileged")))

    def need(key: str) -> np.ndarray:
        if key not in observation:
            raise RobosafeError(f"observation adapter {adapter}: the observation has no "
                                f"{key!r} (has {', '.join(sorted(map(str, observation)))})")
        return np.asarray(observation[key])

    out: dict[str, Any] = {}
    size = spec.get("image_size")
    for wire, key in (spec.get("images") or {}).items():
        img = as_uint8_image(need(key))
        out[wire] = resize_with_pad(img, int(size)) if size else img
    for wire, parts in (spec.get("state") or {}).items():
        vals = [axis_angle(need(p.removeprefix("axis_angle:"))) if p.startswith("axis_angle:")
                else need(p).astype(float).ravel() for p in parts]
        out[wire] = np.concatenate(vals).astype(np.float64)
    if instruction is not None and spec.get("prompt"):
        out[spec["prompt"]] = instruction
    return out


def _one_line(text: str) -> str:
    """The last non-empty line of a (traceback) text: the exception itself."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(empty message)"


# -- the client ----------------------------------------------------------------------------------
class RemotePolicy:
    """A policy served elsewhere over openpi's websocket protocol (see the module docstring).

    ``act`` returns one action per call. When the server replies with a chunk ``(H, d)`` the
    client hands out its first ``replan_steps`` actions (default: all ``H``) one per call and
    only then asks again, as openpi's ``ActionChunkBroker`` does.

    The connection is opened lazily (first ``reset`` / ``act``, or :meth:`connect`) so the
    object can be built, pickled and sent to worker processes before anything is reachable.
    A dropped connection is reopened transparently, once per ``act``.
    """

    def __init__(self, url: str, *, timeout_s: float = 30.0, connect_timeout_s: float = 5.0,
                 retries: int = 3, name: str | None = None, privileged: bool = False,
                 replan_steps: int | None = None, adapter: str = "robosuite",
                 api_key: str | None = None, max_reply_bytes: int = MAX_REPLY_BYTES):
        if not url.startswith(("ws://", "wss://")):
            raise RobosafeError(f"remote policy {redact_url(url)!r}: the URL must start with "
                                "ws:// or wss://")
        if replan_steps is not None and replan_steps < 1:
            raise RobosafeError(f"remote policy {redact_url(url)}: replan_steps must be >= 1")
        self.url = url  # connects with the credentials in it; messages and names show `shown`
        self.shown = redact_url(url)
        self.name = redact_url(name or url)
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.retries = max(0, int(retries))
        self.privileged = privileged
        self.replan_steps = replan_steps
        self.max_reply_bytes = int(max_reply_bytes)
        spec = check_adapter(adapter)
        self.adapter = adapter
        if replan_steps is None and spec.get("replan_steps") is not None:
            self.replan_steps = int(spec["replan_steps"])
        # the key comes from the environment, never from a command line (shell history, ps)
        self._api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self.metadata: dict[str, Any] = {}
        self.requests = 0  # inference round trips so far (benchmarks, tests)
        self._ws = None
        self._task_info: dict[str, Any] | None = None
        self._action_dim: int | None = None
        self._plan: list[np.ndarray] = []

    # pickling (process-pool workers): the connection stays behind and reopens on first use
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_ws"] = None
        return state

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Never the closing handshake here: at interpreter exit websockets' close() joins its
        # reader thread and can wait forever, so a finished run would never exit.
        with contextlib.suppress(Exception):
            self.abort()

    def close(self) -> None:
        """Close the connection with the websocket closing handshake."""
        ws, self._ws = self._ws, None
        if ws is not None:
            ws.close()

    def abort(self) -> None:
        """Drop the connection at once (no handshake, no thread join)."""
        ws, self._ws = self._ws, None
        sock = getattr(ws, "socket", None)
        if sock is not None:
            import socket

            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    # -- connection ------------------------------------------------------------------------------
    def connect(self) -> dict[str, Any]:
        """Open the connection (retrying with backoff) and return the server's metadata."""
        from websockets.exceptions import InvalidURI, WebSocketException
        from websockets.sync.client import connect

        self.close()
        cause = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(0.25 * 2 ** (attempt - 1), 2.0))
            try:
                # openpi's client settings: raw arrays do not compress, images exceed 1 MiB
                headers = ({"Authorization": f"Api-Key {self._api_key}"}
                           if self._api_key else None)
                ws = connect(self.url, compression=None, max_size=self.max_reply_bytes,
                             open_timeout=self.connect_timeout_s,
                             close_timeout=min(self.connect_timeout_s, 2.0),
                             additional_headers=headers, **_legacy())
            except InvalidURI as exc:
                raise RobosafeError(f"remote policy {self.shown}: invalid URL: "
                                    f"{redact_url(str(exc))}") from None
            except (OSError, TimeoutError, WebSocketException) as exc:
                cause = _describe(exc)
                continue
            try:
                first = ws.recv(timeout=self.connect_timeout_s)
            except (TimeoutError, WebSocketException, OSError) as exc:
                ws.close()
                cause = f"no metadata from the server ({_describe(exc)})"
                continue
            self._ws = ws  # owned from here, so a bad metadata reply closes it
            meta = self._decode_reply(first, "metadata")
            self.metadata = meta if isinstance(meta, dict) else {}
            if self._action_dim is None and isinstance(self.metadata.get("action_dim"), int):
                self._action_dim = self.metadata["action_dim"]
            return self.metadata
        raise RobosafeError(f"remote policy {self.shown} unreachable after {self.retries + 1} "
                            f"attempt(s): {cause}")

    def _ensure(self, *, reset: bool = True) -> None:
        if self._ws is None:
            self.connect()
            if reset and self._task_info is not None:
                # a fresh connection may reach a restarted server: bring its policy to the episode
                self._send_reset()

    def _round_trip(self, message: dict[str, Any], what: str) -> Any:
        """Send one message and return the decoded reply; reconnects once if the server went."""
        from websockets.exceptions import ConnectionClosed

        data = packb(message)
        is_reset = "__reset__" in message
        for attempt in (0, 1):
            self._ensure(reset=not is_reset)
            try:
                self._ws.send(data)
                reply = self._ws.recv(timeout=self.timeout_s)
            except TimeoutError:
                # a late reply would be taken as the answer to the next request: start over
                self.close()
                raise RobosafeError(f"remote policy {self.shown}: no {what} within "
                                    f"{self.timeout_s:g} s") from None
            except ConnectionClosed as exc:
                self.close()
                if attempt:
                    raise RobosafeError(f"remote policy {self.shown}: the server closed the "
                                        f"connection ({_describe(exc)})") from None
                continue
            return self._decode_reply(reply, what)
        raise AssertionError("unreachable")

    def _decode_reply(self, reply: str | bytes, what: str) -> Any:
        if isinstance(reply, str):
            # openpi servers send the traceback as text and close: report the exception line
            self.close()
            raise RobosafeError(f"remote policy {self.shown}: server error: {_one_line(reply)}")
        try:
            return unpackb(reply)
        except Exception as exc:  # noqa: BLE001 - any malformed payload is the server's fault
            raise RobosafeError(f"remote policy {self.shown}: malformed {what} "
                                f"({type(exc).__name__}: {exc})") from None

    def _send_reset(self) -> None:
        if not self.metadata.get("supports_reset"):
            return
        reply = self._round_trip({"__reset__": self._task_info}, "reset acknowledgement")
        if not (isinstance(reply, dict) and reply.get("__ack__") == "reset"):
            raise RobosafeError(f"remote policy {self.shown}: the server did not acknowledge "
                                f"the reset (got {_keys(reply)})")

    # -- the policy protocol ---------------------------------------------------------------------
    def reset(self, task_info: dict[str, Any]) -> None:
        self._task_info = dict(task_info)
        dim = task_info.get("action_dim")
        self._action_dim = int(dim) if dim is not None else self.metadata.get("action_dim")
        self._plan = []
        if self._ws is None:
            self._ensure()  # connects, then sends the reset
        else:
            self._send_reset()

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        if not self._plan:
            self._plan = self._request(observation)
        return self._plan.pop(0)

    def needs_images(self) -> bool:
        """The next ``act`` sends an observation only when the chunk is played out."""
        return not self._plan

    def _request(self, observation: dict[str, Any]) -> list[np.ndarray]:
        instruction = (self._task_info or {}).get("instruction")
        obs = adapt_observation(observation, instruction, self.adapter,
                                privileged=self.privileged)
        reply = self._round_trip(obs, "action")
        self.requests += 1
        if not isinstance(reply, dict) or "actions" not in reply:
            raise RobosafeError(f"remote policy {self.shown}: reply has no 'actions' "
                                f"(got {_keys(reply)})")
        try:
            actions = np.asarray(reply["actions"], dtype=np.float64)
        except (TypeError, ValueError):
            raise RobosafeError(f"remote policy {self.shown}: 'actions' is not a numeric array "
                                f"({type(reply['actions']).__name__})") from None
        dim = self._action_dim
        if actions.ndim == 1:
            actions = actions[None, :]
        if (actions.ndim != 2 or actions.shape[0] == 0
                or (dim is not None and actions.shape[1] != dim)):
            want = f"({dim},) or (H, {dim})" if dim is not None else "(d,) or (H, d)"
            raise RobosafeError(f"remote policy {self.shown}: action of shape "
                                f"{tuple(np.shape(reply['actions']))}, expected {want}")
        if not np.all(np.isfinite(actions)):
            raise RobosafeError(f"remote policy {self.shown}: non-finite action values "
                                f"(NaN or inf) in the reply")
        horizon = len(actions) if self.replan_steps is None else min(self.replan_steps,
                                                                      len(actions))
        return [actions[i].copy() for i in range(horizon)]


@functools.cache
def _legacy() -> dict[str, bool]:
    # websockets >= 17 warns unless a connection that outlives a `with` block is asked for
    from websockets.sync.client import connect

    return {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}


def _describe(exc: BaseException) -> str:
    text = redact_url(str(exc)).strip().splitlines()  # a URL in it may carry credentials
    detail = text[0] if text else ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _keys(reply: Any) -> str:
    if isinstance(reply, dict):
        return "keys " + ", ".join(sorted(map(str, reply))) if reply else "an empty dict"
    return type(reply).__name__
