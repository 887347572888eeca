"""``robosafe serve-policy SPEC``: expose a policy on openpi's websocket policy-server
protocol, e.g. for ``robosafe run --policy ws://HOST:PORT`` on another machine."""

from __future__ import annotations

import json
import sys

import typer

from robosafe.cli.common import app, user_errors


@app.command("serve-policy")
@user_errors
def serve_policy_cmd(
    spec: str = typer.Argument(..., help="Policy spec: random, zero, replay:FILE.npy, "
                               "scripted-careful, scripted-careless, lerobot:CHECKPOINT_DIR."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0: all)."),
    port: int = typer.Option(8000, min=0, max=65535, help="TCP port (0: any free port)."),
    action_dim: int = typer.Option(None, "--action-dim", min=1,
                                   help="Action width announced in the metadata."),
    max_frame_mib: float = typer.Option(64.0, "--max-frame-mib", min=0.001,
                                        help="Largest message accepted, in MiB (bigger: "
                                        "connection closed, code 1009)."),
    max_action_dim: int = typer.Option(256, "--max-action-dim", min=1,
                                       help="Largest action_dim a client's reset may ask for."),
    obs_adapter: str = typer.Option(None, "--obs-adapter",
                                    help="lerobot: policies: which observation (as the client "
                                         "sends it: --obs-adapter robosuite) feeds which input: "
                                         "lerobot-robosafe (default) | lerobot-libero."),
    as_json: bool = typer.Option(False, "--json",
                                 help='Print {"url": ..., "policy": ...} on one line, then serve.'),
) -> None:
    """Serve a policy over openpi's websocket + msgpack-numpy protocol until Ctrl-C.

    Clients: `robosafe run --policy ws://HOST:PORT`, RemotePolicy, openpi's client.
    Each connection gets its own policy instance.
    Scripted policies need object poses: RemotePolicy(url, privileged=True).
    A LeRobot checkpoint (lerobot:DIR) is served from lerobot's own environment; the client
    sends robosuite observations (the robosafe host's default adapter).
    """
    from robosafe.policies.base import make_policy
    from robosafe.policies.server import serve_policy

    policy = make_policy(spec, adapter=obs_adapter)  # fails here, before binding, on a bad spec

    def ready(url: str) -> None:
        # one line, flushed: a parent process reads it to learn the port when --port 0
        if as_json:
            sys.stdout.write(json.dumps({"url": url, "policy": policy.name}) + "\n")
        else:
            sys.stdout.write(f"serving {policy.name} on {url} (Ctrl-C to stop)\n")
        sys.stdout.flush()

    try:
        # one policy per connection: runner workers sharing the server keep separate episodes
        serve_policy(_factory(spec, obs_adapter, policy), host, port, ready=ready,
                     action_dim=action_dim,
                     max_frame_bytes=int(max_frame_mib * 2**20), max_action_dim=max_action_dim)
    except KeyboardInterrupt:
        typer.echo("robosafe: policy server stopped", err=True)


def _factory(spec: str, adapter: str | None, first):
    """One policy per connection; the one loaded to check the spec is the server's specimen
    (its name and action width go into the metadata), so a checkpoint is not loaded twice
    before anyone connects."""
    from robosafe.policies.base import make_policy

    spare = [first]
    return lambda: spare.pop() if spare else make_policy(spec, adapter=adapter)
