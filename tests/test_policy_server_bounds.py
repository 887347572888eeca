"""The policy server bounds what a client can make it allocate: frame size, the action_dim a
reset asks for, the number of action values a reply carries. Real server, real websocket
client on loopback."""

from __future__ import annotations

import contextlib

import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from robosafe.policies.base import RandomPolicy
from robosafe.policies.remote import packb, unpackb
from robosafe.policies.server import PolicyServer


class Wide:
    name = "wide"

    def __init__(self, n):
        self.n = n

    def reset(self, task_info):
        pass

    def act(self, obs):
        return np.zeros(self.n)


@contextlib.contextmanager
def _open(url):
    with connect(url, max_size=None, compression=None) as ws:
        unpackb(ws.recv(timeout=10))  # metadata
        yield ws


def _refused(ws) -> str:
    """The server's text error, then the 1011 close."""
    text = ws.recv(timeout=10)
    assert isinstance(text, str)
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1011
    return text


def test_reset_with_a_huge_action_dim_is_refused_without_allocating():
    frame = msgpack.packb({"__reset__": {"action_dim": 1e8}})
    assert len(frame) <= 32  # the attack: a few bytes asking for 800 MB per action
    with PolicyServer(RandomPolicy) as srv:
        with _open(srv.url) as ws:
            ws.send(frame)
            text = _refused(ws)
        assert "action_dim 100000000.0 is not an integer in [1, 256]" in text
        assert srv.resets == 0
        # the server is still up and a sane client works
        with _open(srv.url) as ws:
            ws.send(packb({"__reset__": {"action_dim": 7, "seed": 1}}))
            assert unpackb(ws.recv(timeout=10)) == {"__ack__": "reset"}
            ws.send(packb({}))
            assert unpackb(ws.recv(timeout=10))["actions"].shape == (7,)


@pytest.mark.parametrize("dim", [0, -3, 2.5, "7", True, 257])
def test_reset_action_dim_must_be_a_bounded_integer(dim):
    with PolicyServer(RandomPolicy) as srv, _open(srv.url) as ws:
        ws.send(packb({"__reset__": {"action_dim": dim}}))
        assert "action_dim" in _refused(ws)


def test_action_dim_bound_is_configurable():
    with PolicyServer(RandomPolicy, max_action_dim=1000) as srv, _open(srv.url) as ws:
        ws.send(packb({"__reset__": {"action_dim": 1000}}))
        assert unpackb(ws.recv(timeout=10)) == {"__ack__": "reset"}
        ws.send(packb({}))
        assert unpackb(ws.recv(timeout=10))["actions"].shape == (1000,)


def test_oversized_frame_closes_the_connection_with_1009():
    with PolicyServer(RandomPolicy, max_frame_bytes=4096) as srv:
        with _open(srv.url) as ws:
            ws.send(packb({"image": np.zeros(5000, np.uint8)}))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd.code == 1009  # message too big
        assert srv.requests == 0
        with _open(srv.url) as ws:  # a frame under the bound is served
            ws.send(packb({"image": np.zeros(3000, np.uint8)}))
            assert unpackb(ws.recv(timeout=10))["actions"].shape == (7,)


def test_default_frame_bound_is_64_mib():
    with PolicyServer(RandomPolicy) as srv, _open(srv.url) as ws:
        ws.send(b"\x00" * (64 * 2**20 + 1))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1009


def test_reply_with_too_many_action_values_is_an_error():
    with PolicyServer(Wide(5000)) as srv, _open(srv.url) as ws:
        ws.send(packb({}))
        assert "5000 action values, more than the server's bound of 4096" in _refused(ws)
    with PolicyServer(Wide(4096)) as srv, _open(srv.url) as ws:
        ws.send(packb({}))
        assert unpackb(ws.recv(timeout=10))["actions"].shape == (4096,)


def test_serve_policy_cli_takes_the_bounds():
    import json
    import os
    import selectors
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "robosafe", "serve-policy", "random", "--port", "0", "--json",
           "--max-frame-mib", "0.01", "--max-action-dim", "8"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as proc:
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                assert sel.select(timeout=60), "no URL printed in 60 s"
            url = json.loads(proc.stdout.readline())["url"]
            with _open(url) as ws:
                ws.send(packb({"__reset__": {"action_dim": 9}}))
                assert "not an integer in [1, 8]" in _refused(ws)
            with _open(url) as ws:
                ws.send(packb({"image": np.zeros(20_000, np.uint8)}))  # > 0.01 MiB
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv(timeout=10)
                assert closed.value.rcvd.code == 1009
        finally:
            proc.terminate()
            proc.wait(10)
