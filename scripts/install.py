"""Install packages into a virtualenv as pip would, with uv doing the work where it can:
    python3 scripts/install.py VENV [--no-deps] [-e] REQUIREMENT... [-r FILE]

The test command builds seven environments (the dev one, each lane's, the peers'); pip spends
most of that on one core unpacking wheels, uv unpacks in parallel (measured here, the dev
environment from a cold cache: pip 40 s, uv 11 s, the same 115 packages at the same versions).

uv reads none of pip's configuration, so this hands it pip's own (``pip config list``: files
and ``PIP_*`` variables): index URLs, find-links, constraints, no-index, the certificate, the
timeout, and pip's rule that the best version on any index wins (uv's default is the first
index that has the package). Where pip is configured in a way this does not translate, where
uv cannot be installed, or where uv fails, pip installs instead, saying so in one line.

uv itself is pinned (``UV``) and installed once with pip into ``.venv-uv`` beside this
repository's other environments, under a lock: several installs start at once in CI.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UV = "uv==0.13.9"
UV_VENV = REPO / ".venv-uv"
# pip settings uv gets as the same option (repeatable ones take a space-separated list)
SAME = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
        "find-links": "--find-links", "constraint": "--constraint"}
# pip settings that change nothing about what gets installed
IGNORED = {"disable-pip-version-check", "no-compile", "quiet", "verbose", "progress-bar",
           "root-user-action", "no-warn-script-location", "cache-dir", "no-cache-dir",
           "retries", "no-input", "require-virtualenv", "break-system-packages"}


def _say(msg: str) -> None:
    print(f"install.py: {msg}", file=sys.stderr, flush=True)


def pip_settings(python: str) -> dict[str, str]:
    """pip's effective settings, as ``pip config list`` prints them: the PIP_* variables win
    over the files, as in pip."""
    out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                         text=True, check=True).stdout
    files: dict[str, str] = {}
    env: dict[str, str] = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        section, _, name = key.rpartition(".")
        if section not in (":env:", "global", "install"):
            continue  # another command's section (download, wheel, ...)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        (env if section == ":env:" else files)[name] = value
    return {**files, **env}


def uv_command(settings: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """uv's options and environment for pip's settings; None if one cannot be translated."""
    args = ["--index-strategy", "unsafe-best-match"]
    env: dict[str, str] = {}
    for name, value in settings.items():
        if name in SAME:
            for item in value.split():
                args += [SAME[name], item]
        elif name == "no-index":
            if value.lower() in ("1", "true", "yes", "on"):
                args.append("--no-index")
        elif name == "cert":
            env["SSL_CERT_FILE"] = value
        elif name in ("timeout", "default-timeout"):
            env["UV_HTTP_TIMEOUT"] = value
        elif name not in IGNORED:
            _say(f"pip's setting {name!r} has no uv translation here: pip installs")
            return None
    return args, env


def _uv() -> Path | None:
    exe = UV_VENV / "bin" / "uv"
    with open(f"{UV_VENV}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.exists():
            try:
                subprocess.run([sys.executable, "-m", "venv", str(UV_VENV)], check=True)
                # pip's notes about the local indexes lacking uv would read as problems
                subprocess.run([str(UV_VENV / "bin" / "pip"), "install", "-q",
                                "--disable-pip-version-check", UV], check=True,
                               capture_output=True, text=True)
            except (OSError, subprocess.CalledProcessError) as exc:
                detail = (getattr(exc, "stderr", "") or str(exc)).strip().splitlines()
                _say(f"cannot install {UV} ({detail[-1] if detail else exc}): pip installs")
                return None
    return exe


def install(venv: Path, reqs: list[str]) -> int:
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
           "--no-compile", *reqs]
    if os.environ.get("ROBOSAFE_INSTALL_WITH_PIP") != "1":
        try:
            translated = uv_command(pip_settings(python))
        except (OSError, subprocess.CalledProcessError) as exc:
            _say(f"cannot read pip's settings ({exc}): pip installs")
            translated = None
        uv = _uv() if translated else None
        if uv is not None:
            args, env = translated
            cmd = [str(uv), "pip", "install", "-q", "--python", python, *args, *reqs]
            rc = subprocess.run(cmd, check=False, env={**os.environ, **env}).returncode
            if rc == 0:
                return 0
            _say(f"uv failed (exit {rc}): pip installs instead; the command was "
                 f"{shlex.join(cmd)}")
    return subprocess.run(pip, check=False).returncode


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    venv = Path(argv[0])
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return install(venv, argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
