"""scripts/install.py hands uv pip's own settings: the translation, worked out by hand, and the
fallback to pip when a setting has none."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("install_script", ROOT / "scripts" / "install.py")
install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install)


def test_pip_settings_become_uv_options_and_environment():
    settings = {"extra-index-url": "file:///opt/pypi/simple file:///opt/pypi-more/simple",
                "find-links": "/opt/wheels", "constraint": "/etc/c.txt",
                "cert": "/etc/ssl/ca.crt", "default-timeout": "180",
                "disable-pip-version-check": "1", "no-index": "false"}
    args, env = install.uv_command(settings)
    assert args == ["--index-strategy", "unsafe-best-match",
                    "--extra-index-url", "file:///opt/pypi/simple",
                    "--extra-index-url", "file:///opt/pypi-more/simple",
                    "--find-links", "/opt/wheels", "--constraint", "/etc/c.txt"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/ca.crt", "UV_HTTP_TIMEOUT": "180"}
    args, _ = install.uv_command({"index-url": "https://example.org/simple", "no-index": "yes"})
    assert args[2:] == ["--index-url", "https://example.org/simple", "--no-index"]


def test_a_setting_without_translation_leaves_the_install_to_pip(capsys):
    assert install.uv_command({"trusted-host": "example.org"}) is None
    assert "pip's setting 'trusted-host' has no uv translation here: pip installs" in \
        capsys.readouterr().err


def test_pip_config_list_is_read_with_the_environment_winning(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = /from/file\ntimeout = 5\n"
                    "[download]\nno-index = true\n")
    env = {"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": str(conf), "PIP_FIND_LINKS": "/from/env"}
    code = ("import json, sys; sys.path.insert(0, 'scripts'); import install; "
            "print(json.dumps(install.pip_settings(sys.executable)))")
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    settings = json.loads(got)
    assert settings["find-links"] == "/from/env" and settings["timeout"] == "5"
    assert "no-index" not in settings  # another command's section
