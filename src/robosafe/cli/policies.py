"""``robosafe serve-policy SPEC``: expose a policy on openpi's websocket policy-server
protocol, e.g. for ``robosafe run --policy ws://HOST:PORT`` on another machine."""

from __future__ import annotations

import json
import sys

import typer

from robosafe.cli import app, user_errors


@app.command("serve-policy")
@user_errors
def serve_policy_cmd(
    spec: str = typer.Argument(..., help="Policy spec: random, zero, replay:FILE.npy, "
                               "scripted-careful, scripted-careless."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0: all)."),
    port: int = typer.Option(8000, min=0, max=65535, help="TCP port (0: any free port)."),
    action_dim: int = typer.Option(None, "--action-dim", min=1,
                                   help="Action width announced in the metadata."),
    max_frame_mib: float = typer.Option(64.0, "--max-frame-mib", min=0.001,
                                        help="Largest message accepted, in MiB (bigger: "
                                        "connection closed, code 1009)."),
    max_action_dim: int = typer.Option(256, "--max-action-dim", min=1,
                                       help="Largest action_dim a client's reset may ask for."),
    as_json: bool = typer.Option(False, "--json",
                                 help='Print {"url": ..., "policy": ...} on one line, then serve.'),
) -> None:
    """Serve a policy over openpi's websocket + msgpack-numpy protocol until Ctrl-C.

    Clients: `robosafe run --policy ws://HOST:PORT`, RemotePolicy, openpi's client.
    Each connection gets its own policy instance.
    Scripted policies need object poses: RemotePolicy(url, privileged=True).
    """
    from robosafe.policies.base import make_policy
    from robosafe.policies.server import serve_policy

    policy = make_policy(spec)  # fails here, before binding, on a bad spec

    def ready(url: str) -> None:
        # one line, flushed: a parent process reads it to learn the port when --port 0
        if as_json:
            sys.stdout.write(json.dumps({"url": url, "policy": policy.name}) + "\n")
        else:
            sys.stdout.write(f"serving {policy.name} on {url} (Ctrl-C to stop)\n")
        sys.stdout.flush()

    try:
        # one policy per connection: runner workers sharing the server keep separate episodes
        serve_policy(lambda: make_policy(spec), host, port, ready=ready, action_dim=action_dim,
                     max_frame_bytes=int(max_frame_mib * 2**20), max_action_dim=max_action_dim)
    except KeyboardInterrupt:
        typer.echo("robosafe: policy server stopped", err=True)
