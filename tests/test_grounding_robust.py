"""Grounding commands under bad input and hostile clips: corrupt episodes are reported, one
unreadable depth frame costs only its clip, clips cannot point outside the dataset, and the
API key never follows a redirect. Real files, real HTTP servers on loopback."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import run_robosafe as run
from test_grounding_client import CONFIG, FAST, FakeChat, chat, dataset  # noqa: F401

from robosafe.errors import RobosafeError
from robosafe.grounding import generate_dataset
from robosafe.grounding.client import EndpointError, ask_clips
from robosafe.grounding.dataset import frame_path
from robosafe.grounding.sampler import write_clip_index


class Recorder:
    """An HTTP server that records every request it gets, whatever the method."""

    def __init__(self):
        self.requests = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                rec.requests.append((self.command, self.path, dict(self.headers)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = _any

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/steal"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_the_key_never_follows_a_redirect(dataset, chat, monkeypatch, status):  # noqa: F811
    root, clips = dataset
    monkeypatch.setenv("OPENAI_API_KEY", "sekrit")
    other = Recorder()  # another port: another origin
    try:
        chat.script = [("status", status, {"Location": other.url})]
        with pytest.raises(EndpointError, match=rf"HTTP {status} redirect to .*/steal.*not "
                                                r"followed") as info:
            ask_clips(clips[:1], root, "m", chat.url, concurrency=1, **FAST)
        assert "sekrit" not in str(info.value)
        assert other.requests == []
        assert chat.requests[0]["headers"]["Authorization"] == "Bearer sekrit"
    finally:
        other.close()


@pytest.mark.parametrize("escape", ["absolute", "dotdot"])
def test_ask_refuses_episode_dirs_outside_the_dataset(dataset, chat, tmp_path,  # noqa: F811
                                                      escape):
    root, clips = dataset
    outside = tmp_path / "private"
    shutil.copytree(root, outside)  # real frames there: before the check they were sent
    ep = clips[0]["episode_dir"]
    target = str(outside / ep) if escape == "absolute" else \
        "/".join([".."] * (len(root.parts) - 1)) + str(outside / ep)
    clip = {**clips[0], "episode_dir": target}
    with pytest.raises(RobosafeError, match=r"clips\[1\]\.episode_dir: .* not a directory "
                                            r"inside the dataset .*refused"):
        ask_clips([clips[1], clip], root, "m", chat.url, concurrency=1, **FAST)
    assert len(chat) == 0


@pytest.fixture(scope="module")
def imaged(tmp_path_factory):
    root = tmp_path_factory.mktemp("robust") / "ds"
    generate_dataset(root, CONFIG, seed=3)
    from robosafe.grounding.dataset import index_dataset
    from robosafe.grounding.sampler import candidate_clips

    clips = [c for task in (1, 2) for c in candidate_clips(index_dataset(root).episodes, task)]
    assert len(clips) >= 2
    return root, clips[:6]


def test_baseline_keeps_the_other_clips_when_one_depth_png_is_corrupt(imaged, tmp_path):
    src, clips = imaged
    root = tmp_path / "ds"
    shutil.copytree(src, root)
    victim = clips[0]
    png = frame_path(root / victim.episode_dir, "arm", "depth", victim.frames[-1])
    png.write_bytes(png.read_bytes()[:45])  # header fine, pixel data cut short
    index = tmp_path / "clips.jsonl"
    write_clip_index(clips, index)
    out = tmp_path / "base.jsonl"
    proc = run("grounding", "baseline", str(index), "--dataset", str(root), "--out", str(out))
    assert proc.returncode == 2
    assert f"clip {victim.clip_id}: {png}: unreadable image" in proc.stderr
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == len(clips)
    hit = [r for r in recs if r["clip_id"] == victim.clip_id]
    # the corrupt frame may serve several sampled clips; exactly those are marked
    bad = {c.clip_id for c in clips if c.episode_dir == victim.episode_dir
           and victim.frames[-1] in c.frames}
    assert {r["clip_id"] for r in recs if r["error"]} == bad and len(bad) < len(clips)
    assert hit[0]["answer"] == "" and "unreadable image" in hit[0]["error"]
    assert all(json.loads(r["answer"]) for r in recs if not r["error"])
    assert f"{len(bad)} clips failed, recorded as invalid" in proc.stdout


def test_sweep_reports_a_corrupt_episode(imaged, tmp_path):
    src, _ = imaged
    root = tmp_path / "ds"
    shutil.copytree(src, root)
    victim = next(root.rglob("trajectory.json"))
    victim.write_text("{not json")
    proc = run("grounding", "sweep", str(root), "--json")
    assert proc.returncode == 2
    assert "robosafe: skipped:" in proc.stderr and "trajectory.json" in proc.stderr
    data = json.loads(proc.stdout)
    assert len(data["errors"]) == 1 and "table11_gap_threshold" in data
