"""Clip images (representations) and the chat-completions client against a loopback server."""

from __future__ import annotations

import base64
import inspect
import io
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pytest
from PIL import Image

from robosafe.errors import RobosafeError
from robosafe.grounding import SyntheticConfig, generate_dataset, index_dataset
from robosafe.grounding import representations as reps
from robosafe.grounding.answers import parse_answer
from robosafe.grounding.client import (
    AnswerCache,
    EndpointError,
    ask_clips,
    backoff_delay,
    chat_url,
)
from robosafe.grounding.dataset import frame_path
from robosafe.grounding.metrics import score_answers
from robosafe.grounding.prompts import build_prompt, image_sequence

ALL_REPS = ("rgb", "depth", "depth_color", "pred_depth", "pred_depth_color", "rgbd",
            "rgbd_color", "rgbd_pred", "rgbd_pred_color")
CONFIG = SyntheticConfig(human_types=("male_2",), sim_tasks=("social_navigation",), n_scenes=1,
                         episodes_per_scene=3, length_scale=0.02)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """A tiny synthetic dataset with images and four clips (two per task) on it."""
    root = tmp_path_factory.mktemp("client_ds")
    generate_dataset(root, CONFIG, seed=3)
    eps = [e for e in index_dataset(root) if e.n_frames >= 3]
    assert eps, "the synthetic dataset needs an episode with >= 3 frames"
    clips = []
    for k in range(4):
        e = eps[k % len(eps)]
        n = e.n_frames
        frames = [n - 3, n - 2, n - 1] if k % 2 else [0, 1, 2]
        clips.append({
            "clip_id": f"c{k}", "task": 1 + k // 2, "label": "ABCA"[k],
            "sample_type": None, "episode_dir": e.episode_dir, "frames": frames,
            "human_type": e.human_type, "sim_task": e.sim_task,
            "truth_distance": [float(e.robot_human_distance[f]) for f in frames],
            "truth_trend": "closing", "truth_contacts": {"human": [False] * 3,
                                                         "scene": [False] * 3}})
    return root, clips


def _answer(prompt: str, label: str = "B") -> str:
    field = "risk_level" if '"risk_level"' in prompt else "answer"
    return json.dumps({"robot_human_distance_m": [2.0, 1.5, 1.0], "distance_trend": "closing",
                       "human_contact": [False] * 3, "scene_contact": [False] * 3,
                       "reasoning": "canned", field: label})


class FakeChat:
    """A chat-completions endpoint on loopback. ``script`` holds one action per request, then
    canned answers: ("status", code[, headers]), ("hang",), ("raw", bytes), ("content", obj)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[tuple[Any, ...]] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append({"path": self.path, "headers": dict(self.headers),
                                          "body": body})
                    action = fake.script.pop(0) if fake.script else ("answer",)
                try:
                    self._act(action, body)
                except OSError:  # the client gave up (timeout test)
                    pass

            def _act(self, action: tuple[Any, ...], body: dict[str, Any]) -> None:
                if action[0] == "hang":
                    fake.release.wait(10)
                    return
                if action[0] == "status":
                    headers = action[2] if len(action) > 2 else {}
                    self._send(action[1], json.dumps({"error": {"message": "boom"}}).encode(),
                               headers)
                    return
                if action[0] == "raw":
                    self._send(200, action[1])
                    return
                prompt = body["messages"][0]["content"][0]["text"]
                content = action[1] if action[0] == "content" else _answer(prompt)
                reply = {"id": "x", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": content}}]}
                self._send(200, json.dumps(reply).encode())

            def _send(self, code: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __len__(self) -> int:
        return len(self.requests)


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    fake = FakeChat()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.release.set()
    fake.server.shutdown()
    fake.server.server_close()


FAST = {"backoff_s": 0.0, "max_retries": 2, "timeout_s": 10.0}


def _decode(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im)


# ----------------------------------------------------------------------------- representations


@pytest.mark.parametrize("rep", ALL_REPS)
def test_images_follow_the_prompt_order(dataset, rep: str) -> None:
    root, clips = dataset
    images = reps.clip_images(clips[0], root, rep, "ego",
                              depth_predictor=lambda rgb: np.full(rgb.shape[:2], 2.5))
    assert [(im.time, im.camera, im.channel) for im in images] == image_sequence(rep, "ego", 3)
    for im in images:
        assert im.mime in ("image/png", "image/jpeg")
        assert im.data_url().startswith(f"data:{im.mime};base64,")
        assert base64.b64decode(im.data_url().split(",", 1)[1]) == im.data


def test_rgb_is_sent_verbatim_and_depth_on_the_prompt_scale(dataset) -> None:
    root, clips = dataset
    clip = clips[0]
    ep = root / clip["episode_dir"]
    rgb, depth, color = (reps.clip_images(clip, root, r, "ego")
                         for r in ("rgb", "depth", "depth_color"))
    assert rgb[0].mime == "image/jpeg"
    assert rgb[0].data == frame_path(ep, "arm", "rgb", clip["frames"][0]).read_bytes()
    stored = _decode(frame_path(ep, "head", "depth", clip["frames"][1]).read_bytes())
    grey = _decode(depth[3].data)  # t=2, head
    assert depth[3].camera == "head" and grey.dtype == np.uint8
    np.testing.assert_array_equal(grey, stored)  # max_depth_m 10 = the prompt's scale
    lut = np.rint(matplotlib.colormaps["turbo_r"](np.arange(256) / 255)[:, :3] * 255)
    np.testing.assert_array_equal(_decode(color[3].data), lut[stored].astype(np.uint8))
    assert tuple(reps.depth_to_color(np.array([[0.0]]))[0, 0]) == tuple(lut[0])  # near = red
    assert lut[0][0] > lut[0][2]


def test_depth_scale_is_fixed_to_ten_metres() -> None:
    np.testing.assert_array_equal(reps.depth_to_gray(np.array([0.0, 5.0, 10.0, 25.0, np.nan])),
                                  [0, 128, 255, 255, 255])


def test_all_views(dataset) -> None:
    root, clips = dataset
    images = reps.clip_images(clips[0], root, "rgbd", "all")
    assert len(images) == 3 * 4 * 2
    assert [im.camera for im in images[:8:2]] == ["arm", "head", "third_robot", "third_human"]


def test_predicted_depth_needs_a_predictor(dataset) -> None:
    root, clips = dataset
    assert reps.get_depth_predictor() is None
    with pytest.raises(RobosafeError, match="no depth predictor is registered"):
        reps.clip_images(clips[0], root, "rgbd_pred", "ego")
    calls: list[tuple[int, ...]] = []

    def predictor(rgb: np.ndarray) -> np.ndarray:
        calls.append(rgb.shape)
        return np.full((4, 4), 2.5)  # a model's own resolution: resized to the frame

    reps.register_depth_predictor(predictor)
    try:
        images = reps.clip_images(clips[0], root, "pred_depth", "ego")
    finally:
        reps.register_depth_predictor(None)
    assert len(calls) == 6 and all(len(s) == 3 and s[2] == 3 for s in calls)
    grey = _decode(images[0].data)
    assert grey.shape == calls[0][:2] and (grey == 64).all()  # 2.5 / 10 * 255
    with pytest.raises(RobosafeError, match="shape"):
        reps.clip_images(clips[0], root, "pred_depth", "ego",
                         depth_predictor=lambda rgb: np.zeros(5))


def _colours(image) -> np.ndarray:
    with Image.open(io.BytesIO(image.data)) as im:
        return np.asarray(im.convert("RGB")).astype(int)


def test_topdown_is_the_clip_window_of_the_trajectory(dataset, tmp_path: Path) -> None:
    root, clips = dataset
    from robosafe.grounding.dataset import read_positions

    early = clips[0]  # frames [0, 1, 2]
    ep = root / early["episode_dir"]
    robot, human = read_positions(ep)
    n = len(robot)
    late = {**early, "frames": [n - 3, n - 2, n - 1]}
    (a,) = reps.clip_images(early, root, "rgb", "topdown")
    (b,) = reps.clip_images(late, root, "rgb", "topdown")
    assert a.data != b.data  # each clip gets its own window, not the episode's first frame
    pa = _colours(a)
    assert a.mime == "image/png" and pa.shape == (reps.TOPDOWN_PX, reps.TOPDOWN_PX, 3)
    r, g, bl = pa[..., 0], pa[..., 1], pa[..., 2]
    assert ((r - bl > 120) & (g < 90)).any() and ((bl - r > 120) & (g < 110)).any()
    # where the robot is drawn: its position at the clip's last frame, mapped like the code
    win = np.concatenate([robot[0:3][:, [0, 2]], human[0:3][:, [0, 2]]])
    centre = (win.min(axis=0) + win.max(axis=0)) / 2
    scale = reps.TOPDOWN_PX / max(4.0, float(np.ptp(win, axis=0).max()) + 2.0)
    x, z = ((robot[2][[0, 2]] - centre) * scale + reps.TOPDOWN_PX / 2).astype(int)
    assert tuple(pa[z, x]) == (220, 40, 40)
    # a synchronised video (one frame per step) adds its frame at the window's last step
    from robosafe.grounding.dataset import write_video

    pytest.importorskip("av")
    copy = tmp_path / "ep"
    copy.mkdir()
    for name in ("trajectory.json",):
        (copy / name).write_bytes((ep / name).read_bytes())
    green = [np.full((32, 32, 3), (0, 200, 0) if t == 2 else (200, 0, 200), np.uint8)
             for t in range(n)]
    write_video(copy / "topdown.mp4", iter(green))
    (c,) = reps.clip_images({**early, "episode_dir": "ep"}, tmp_path, "rgb", "topdown")
    pc = _colours(c)
    assert pc.shape == (reps.TOPDOWN_PX, 2 * reps.TOPDOWN_PX, 3)
    left = pc[:, :reps.TOPDOWN_PX].mean(axis=(0, 1))
    assert left[1] > 150 and left[0] < 60  # the green frame of step 2
    assert (pc[:, reps.TOPDOWN_PX:] == pa).all()


def test_episode_topdown_from_the_video_or_a_pre_extracted_frame(dataset, tmp_path) -> None:
    root, clips = dataset
    pytest.importorskip("av")
    video = reps.topdown_image(root / clips[0]["episode_dir"])  # first frame of topdown.mp4
    pixels = _colours(video)
    assert video.mime == "image/png" and pixels.shape[0] == 64
    r, b = pixels[..., 0], pixels[..., 2]
    assert ((r - b) > 80).any() and ((b - r) > 80).any()  # the red robot and blue human dots
    (tmp_path / "ep").mkdir()
    (tmp_path / "ep" / "topdown.mp4").write_bytes(b"not a video")
    with pytest.raises(RobosafeError, match=r"topdown\.mp4: cannot decode"):
        reps.topdown_image(tmp_path / "ep")
    Image.new("RGB", (8, 8), (10, 20, 30)).save(tmp_path / "ep" / "topdown.png")
    image = reps.topdown_image(tmp_path / "ep")
    assert (image.time, image.camera, image.mime) == (0, "topdown", "image/png")
    with pytest.raises(RobosafeError, match="top-down"):
        reps.clip_images({**clips[0], "episode_dir": "ep"}, tmp_path, "depth", "topdown")


def test_missing_frame_names_the_file(dataset) -> None:
    root, clips = dataset
    with pytest.raises(RobosafeError, match="000999.jpg"):
        reps.clip_images({**clips[0], "frames": [0, 1, 999]}, root, "rgb", "ego")


# ----------------------------------------------------------------------------- client


def test_request_shape_and_records(dataset, chat: FakeChat, monkeypatch) -> None:
    root, clips = dataset
    monkeypatch.setenv("ROBOSAFE_TEST_KEY", "sekrit")
    records = ask_clips(clips, root, "test-vlm", chat.url, "rgbd_color", "ego",
                        api_key_env="ROBOSAFE_TEST_KEY", concurrency=1, **FAST)
    assert len(chat) == len(clips)
    req = chat.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sekrit"
    body = req["body"]
    assert body["model"] == "test-vlm" and body["temperature"] == 0.0
    (message,) = body["messages"]
    assert message["role"] == "user"
    text, *parts = message["content"]
    assert text == {"type": "text", "text": build_prompt(1, "rgbd_color", "ego", 3)}
    expected = reps.clip_images(clips[0], root, "rgbd_color", "ego")
    assert len(parts) == len(image_sequence("rgbd_color", "ego", 3)) == len(expected)
    assert [p["type"] for p in parts] == ["image_url"] * len(parts)
    assert [p["image_url"]["url"] for p in parts] == [im.data_url() for im in expected]
    assert "risk_level" in chat.requests[2]["body"]["messages"][0]["content"][0]["text"]

    assert [r["clip_id"] for r in records] == [c["clip_id"] for c in clips]
    for rec, clip in zip(records, clips, strict=True):
        assert {k: rec[k] for k in clip} == clip
        assert (rec["model"], rec["representation"], rec["views"]) == ("test-vlm",
                                                                      "rgbd_color", "ego")
        assert rec["error"] is None and parse_answer(rec["answer"], rec["task"]).label == "B"
    scores = score_answers(records)
    assert scores["overall"]["task1"]["n"] == 2 and scores["overall"]["task1"]["accuracy"] == 0.5


def test_no_key_no_auth_header_and_key_never_an_argument(dataset, chat, monkeypatch) -> None:
    root, clips = dataset
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ask_clips(clips[:1], root, "m", chat.url + "/chat/completions", **FAST)
    assert "Authorization" not in chat.requests[0]["headers"]
    assert chat.requests[0]["path"] == "/v1/chat/completions"
    assert not any("key" in p and p != "api_key_env"
                   for p in inspect.signature(ask_clips).parameters)


def test_retries_429_and_5xx_then_succeeds(dataset, chat: FakeChat) -> None:
    root, clips = dataset
    chat.script = [("status", 429, {"Retry-After": "0"}), ("status", 500), ("status", 503)]
    (rec,) = ask_clips(clips[:1], root, "m", chat.url, concurrency=1, backoff_s=0.0,
                       max_retries=3)
    assert len(chat) == 4 and rec["error"] is None
    assert parse_answer(rec["answer"], 1).valid


def test_timeout_is_retried(dataset, chat: FakeChat) -> None:
    root, clips = dataset
    chat.script = [("hang",)]
    (rec,) = ask_clips(clips[:1], root, "m", chat.url, timeout_s=0.3, backoff_s=0.0,
                       max_retries=1)
    assert len(chat) == 2 and rec["error"] is None


def test_per_clip_failures_are_recorded_not_dropped(dataset, chat: FakeChat) -> None:
    root, clips = dataset
    chat.script = [("raw", b"{}"), ("status", 502), ("status", 502), ("status", 502),
                   ("raw", b"not json"), ("content", [{"type": "text", "text": _answer(
                       build_prompt(2, "rgb", "ego", 3), "C")}])]
    bad = {**clips[2], "clip_id": "missing-frame", "frames": [0, 1, 999]}
    records = ask_clips([*clips, bad], root, "m", chat.url, concurrency=1, **FAST)
    assert len(records) == 5
    assert "malformed" in records[0]["error"] and records[0]["answer"] == ""
    assert "HTTP 502" in records[1]["error"] and "after 3 attempts" in records[1]["error"]
    assert "malformed" in records[2]["error"]
    assert records[3]["error"] is None and parse_answer(records[3]["answer"], 2).label == "C"
    assert records[4]["error"].startswith("images:") and "000999" in records[4]["error"]
    assert len(chat) == 6  # the clip without images was never sent
    scores = score_answers(records)
    assert scores["overall"]["task1"]["n_invalid"] == 2
    assert scores["overall"]["task2"]["n_invalid"] == 2  # malformed reply + no images


@pytest.mark.parametrize("temperature", [0.0, None])
def test_a_4xx_rejection_stops_the_run_with_the_sampling_parameters(
        dataset, chat: FakeChat, temperature) -> None:
    root, clips = dataset
    chat.script = [("status", 400)]
    with pytest.raises(EndpointError, match="HTTP 400 boom") as info:
        ask_clips(clips, root, "m", chat.url, concurrency=1, temperature=temperature,
                  max_tokens=64, **FAST)
    assert len(chat) == 1  # no other clip was sent
    sent = chat.requests[0]["body"]
    assert sent["max_tokens"] == 64 and ("temperature" in sent) == (temperature is not None)
    assert ('"temperature": 0.0' in str(info.value)) == (temperature is not None)


@pytest.mark.serial  # Ctrl-C from a worker thread: missed once beside a busy worker
def test_ctrl_c_stops_at_once_and_keeps_the_answers(dataset, chat: FakeChat) -> None:
    import _thread

    from robosafe.grounding.client import AskInterrupted

    root, clips = dataset
    many = [{**clips[k % 4], "clip_id": f"m{k}"} for k in range(40)]
    sent_before: list[int] = []

    def interrupt(done: int, total: int) -> None:
        if done == 2:
            # the worker may have sent more by the time this thread saw two answers (it does
            # not wait for them to be counted): what counts is what it sends after Ctrl-C
            sent_before.append(len(chat))
            _thread.interrupt_main()  # what Ctrl-C does

    with pytest.raises(AskInterrupted) as info:
        ask_clips(many, root, "m", chat.url, concurrency=1, progress=interrupt, **FAST)
    assert [r["clip_id"] for r in info.value.answers][:2] == ["m0", "m1"]
    assert all(r["error"] is None for r in info.value.answers)
    assert len(info.value.answers) <= 3 and info.value.total == 40
    threading.Event().wait(0.5)
    # after Ctrl-C at most the one request already in flight: none of those queued was sent
    sent = len(chat)
    assert sent_before[0] <= sent <= sent_before[0] + 1 < 40
    threading.Event().wait(0.5)
    assert len(chat) == sent


def test_unreachable_server_is_one_clear_error(dataset) -> None:
    root, clips = dataset
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(EndpointError, match=rf"cannot reach {url}/chat/completions.*3 attempts"):
        ask_clips(clips, root, "m", url, concurrency=2, **FAST)


@pytest.mark.parametrize(("status", "match"), [(401, "OPENAI_API_KEY"), (404, "model 'm'")])
def test_auth_and_not_found_stop_the_run(dataset, chat, monkeypatch, status, match) -> None:
    root, clips = dataset
    monkeypatch.setenv("OPENAI_API_KEY", "sekrit")
    chat.script = [("status", status)]
    with pytest.raises(EndpointError, match=match) as info:
        ask_clips(clips, root, "m", chat.url, concurrency=1, **FAST)
    assert chat.url in str(info.value) and "sekrit" not in str(info.value)
    assert len(chat) == 1


def test_cache_resumes_without_asking_again(dataset, chat: FakeChat, tmp_path: Path) -> None:
    root, clips = dataset
    cache = tmp_path / "answers.jsonl"
    ask_clips(clips[:2], root, "m", chat.url, cache=cache, **FAST)
    assert len(chat) == 2
    with open(cache, "a", encoding="utf-8") as f:  # an interrupted write
        f.write('{"key": "torn", "ans')
    first = ask_clips(clips, root, "m", chat.url, cache=cache, concurrency=2, **FAST)
    assert len(chat) == 4  # only the two clips not yet answered
    again = ask_clips(clips, root, "m", chat.url, cache=cache, concurrency=3, **FAST)
    assert len(chat) == 4  # a second run makes zero requests
    assert [r["answer"] for r in again] == [r["answer"] for r in first]
    lines = cache.read_text().splitlines()
    assert len(lines) == 5 and len(AnswerCache(cache)) == 4  # the fragment is skipped
    # a different representation or sampling setup is a different condition
    ask_clips(clips[:1], root, "m", chat.url, "depth", cache=cache, **FAST)
    ask_clips(clips[:1], root, "m", chat.url, cache=cache, temperature=0.7, **FAST)
    assert len(chat) == 6


def test_failures_are_not_cached(dataset, chat: FakeChat, tmp_path: Path) -> None:
    root, clips = dataset
    cache = tmp_path / "answers.jsonl"
    chat.script = [("raw", b"not json")]
    (rec,) = ask_clips(clips[:1], root, "m", chat.url, cache=cache, **FAST)
    assert rec["error"]
    (rec,) = ask_clips(clips[:1], root, "m", chat.url, cache=cache, **FAST)
    assert rec["error"] is None and len(chat) == 2


def test_progress_and_order_with_concurrency(dataset, chat: FakeChat) -> None:
    root, clips = dataset
    seen: list[tuple[int, int]] = []
    records = ask_clips(clips, root, "m", chat.url, concurrency=4,
                        progress=lambda d, n: seen.append((d, n)), **FAST)
    assert [r["clip_id"] for r in records] == [c["clip_id"] for c in clips]
    assert seen == [(i, 4) for i in range(1, 5)]


def test_bad_input_is_rejected_before_any_request(dataset, chat: FakeChat) -> None:
    root, clips = dataset
    with pytest.raises(RobosafeError, match=r"clips\[1\]: missing field 'frames'"):
        ask_clips([clips[0], {"clip_id": "x", "task": 1, "episode_dir": "e"}], root, "m",
                  chat.url)
    with pytest.raises(RobosafeError, match=r"clips\[0\]\.task"):
        ask_clips([{**clips[0], "task": 3}], root, "m", chat.url)
    with pytest.raises(RobosafeError, match="depth predictor"):
        ask_clips(clips, root, "m", chat.url, "pred_depth_color")
    with pytest.raises(RobosafeError, match="not an http"):
        ask_clips(clips, root, "m", "localhost:8000")
    assert len(chat) == 0


def test_backoff_and_url() -> None:
    assert [backoff_delay(a, 1.0, 60.0) for a in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff_delay(0, 1.0, 60.0, retry_after=5.0) == 5.0
    assert backoff_delay(0, 1.0, 60.0, retry_after=500.0) == 60.0
    assert backoff_delay(3, 0.0, 60.0) == 0.0
    assert chat_url("http://h:8000/v1/") == "http://h:8000/v1/chat/completions"
    assert chat_url("https://api.x/v1/chat/completions") == "https://api.x/v1/chat/completions"



def test_depth_predictor_named_on_the_command_line(dataset, chat, tmp_path, monkeypatch):
    root, clips = dataset
    (tmp_path / "mydepth.py").write_text(
        "import numpy as np\n"
        "def predict(rgb):\n    return np.full(rgb.shape[:2], 2.5)\n"
        "class Model:\n    def __call__(self, rgb):\n        return np.full(rgb.shape[:2], 5.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    predict = reps.load_depth_predictor("mydepth:predict")
    assert predict(np.zeros((4, 6, 3), np.uint8)).shape == (4, 6)
    assert reps.load_depth_predictor("mydepth:Model")(np.zeros((2, 2, 3), np.uint8))[0, 0] == 5
    for spec, match in (("mydepth", "MODULE:CALLABLE"), ("nosuch_mod_x:f", "cannot import"),
                        ("mydepth:nope", "has no 'nope'")):
        with pytest.raises(RobosafeError, match=match):
            reps.load_depth_predictor(spec)
    (rec,) = ask_clips(clips[:1], root, "m", chat.url, representation="pred_depth",
                       depth_predictor=predict, **FAST)
    assert rec["error"] is None
    (image,) = [p for p in chat.requests[0]["body"]["messages"][0]["content"]
                if p["type"] == "image_url"][:1]
    grey = _decode(base64.b64decode(image["image_url"]["url"].split(",", 1)[1]))
    assert int(np.asarray(grey).ravel()[0]) == round(2.5 / reps.DISPLAY_MAX_DEPTH_M * 255)
