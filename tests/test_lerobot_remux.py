"""`robosafe export lerobot` copies a run's camera streams into the dataset (a remux).

The run is a real `robosafe run --images --record-frames` (two short episodes, two 128 px
cameras); the checks read the files with PyAV directly: the dataset's frames must be the run's
frames bit for bit (its packets are the run's packets, shifted), on the 1/fps grid, inside
each episode's [from_timestamp, to_timestamp); `--reencode`, or a stream the dataset does not
declare, re-encodes the camera and says so in one line.
"""

import json
import os
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from conftest import run_robosafe as cli

av = pytest.importorskip("av")
FPS = 20  # the simulator's control rate
STEPS = 9  # env steps per episode: 10 trace rows, 10 frames
CAMS = ("agentview", "robot0_eye_in_hand")
COPIED = "copied from the run's videos (no re-encode)"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("remux") / "run"
    proc = cli("run", "--suite", "demo", "--task-id", "turn_off_stove", "-n", "2",
               "--horizon", str(STEPS), "--images", "--record-frames",
               "--policy", "scripted-careful", "--out", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    return path


def cells(run_dir: Path) -> list[Path]:
    found = sorted((run_dir / "frames").iterdir())
    assert [p.name for p in found] == ["turn_off_stove__ep000__W0V0",
                                       "turn_off_stove__ep001__W0V0"]
    return found


def decode(path: Path) -> tuple[list[Fraction], list[np.ndarray]]:
    """Every frame of the first video stream: exact time (s) and RGB array."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        frames = list(c.decode(s))
        return ([f.pts * s.time_base for f in frames],
                [f.to_ndarray(format="rgb24") for f in frames])


def packets(path: Path) -> list[bytes]:
    with av.open(str(path)) as c:
        return [bytes(p) for p in c.demux(c.streams.video[0]) if p.size]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(float) - b.astype(float)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def export(run: Path, out: Path, *extra: str) -> tuple[dict, list[str]]:
    proc = cli("export", "lerobot", str(run), "-o", str(out), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr.strip().splitlines()


def segments(ds: Path, cam: str) -> tuple[list[Fraction], list[np.ndarray], list[dict]]:
    rows = pq.read_table(ds / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    times, frames = decode(ds / f"videos/observation.images.{cam}/chunk-000/file-000.mp4")
    return times, frames, rows


def test_export_copies_the_runs_frames_bit_for_bit_on_the_frame_grid(run_dir, tmp_path):
    out, lines = export(run_dir, tmp_path / "ds")
    assert lines == [f"robosafe: observation.images.{c}: {COPIED}" for c in CAMS]
    assert out["videos"] == {f"observation.images.{c}": COPIED for c in CAMS}
    assert out["frames"] == 2 * (STEPS + 1)
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    for cam in CAMS:
        times, frames, rows = segments(tmp_path / "ds", cam)
        # 20 frames back to back: frame k at k/20 s exactly, episode 1 from frame 10 = 0.5 s
        assert times == [Fraction(k, FPS) for k in range(2 * (STEPS + 1))]
        key = f"videos/observation.images.{cam}"
        assert [(r[f"{key}/from_timestamp"], r[f"{key}/to_timestamp"]) for r in rows] == [
            (0.0, 0.5), (0.5, 1.0)]
        run_packets = []
        for row, cell in zip(rows, cells(run_dir)):
            src_times, src = decode(cell / f"{cam}.mp4")
            assert src_times == [Fraction(k, FPS) for k in range(STEPS + 1)]
            seg = [f for t, f in zip(times, frames)
                   if row[f"{key}/from_timestamp"] <= t < row[f"{key}/to_timestamp"]]
            assert len(seg) == row["length"] == STEPS + 1
            assert [psnr(a, b) for a, b in zip(seg, src)] == [float("inf")] * (STEPS + 1)
            run_packets += packets(cell / f"{cam}.mp4")
        # no decode-encode pass: the dataset's packets are the run's, byte for byte
        assert packets(tmp_path / f"ds/videos/observation.images.{cam}/chunk-000/"
                       "file-000.mp4") == run_packets
        ft = info["features"][f"observation.images.{cam}"]["info"]
        assert (ft["video.codec"], ft["video.pix_fmt"], ft["video.fps"]) == ("h264", "yuv420p",
                                                                             FPS)


def test_reencode_is_asked_for_announced_and_keeps_the_timing(run_dir, tmp_path):
    out, lines = export(run_dir, tmp_path / "ds", "--reencode")
    assert lines == [f"robosafe: observation.images.{c}: re-encoded (--reencode)" for c in CAMS]
    assert set(out["videos"].values()) == {"re-encoded (--reencode)"}
    times, frames, rows = segments(tmp_path / "ds", "agentview")
    assert times == [Fraction(k, FPS) for k in range(2 * (STEPS + 1))]
    key = "videos/observation.images.agentview"
    assert [(r[f"{key}/from_timestamp"], r[f"{key}/to_timestamp"]) for r in rows] == [
        (0.0, 0.5), (0.5, 1.0)]
    src = [f for cell in cells(run_dir) for f in decode(cell / "agentview.mp4")[1]]
    scores = [psnr(a, b) for a, b in zip(frames, src)]
    # a second lossy pass: close to the run's frames, not the same bytes
    assert len(scores) == len(src) and min(scores) > 30
    assert packets(tmp_path / "ds/videos/observation.images.agentview/chunk-000/"
                   "file-000.mp4") != [p for c in cells(run_dir)
                                       for p in packets(c / "agentview.mp4")]


def _mpeg4(mp4: Path) -> str:
    from robosafe.formats.video import VideoWriter

    _, frames = decode(mp4)
    w = VideoWriter(mp4, FPS, 128, 128, codec="mpeg4")
    for f in frames:
        w.add(f)
    w.close()
    return f"{mp4} is mpeg4 yuv420p, the dataset's videos h264 yuv420p"


def _ten_fps(mp4: Path) -> str:
    from robosafe.formats.video import VideoWriter

    _, frames = decode(mp4)
    w = VideoWriter(mp4, 10, 128, 128)
    for f in frames:
        w.add(f)
    w.close()
    return f"{mp4} is at 10 fps, the dataset at {FPS}"


def _off_grid(mp4: Path) -> str:
    """The same h264 packets with frame 4 shown half a frame late (a capture-time jitter)."""
    with av.open(str(mp4)) as src:
        s = src.streams.video[0]
        tmp = mp4.with_name("jitter.mp4")
        with av.open(str(tmp), "w") as out:
            o = out.add_stream_from_template(s)
            o.time_base = s.time_base
            for k, p in enumerate(q for q in src.demux(s) if q.size):
                if p.pts * p.time_base == Fraction(4, FPS):
                    p.pts += round(1 / (2 * FPS * p.time_base))
                    late = k
                p.stream = o
                out.mux(p)
    tmp.replace(mp4)
    return f"{mp4}: packet {late} at 0.225000 s is not on a 1/{FPS} s frame"


@pytest.mark.parametrize("damage", [_mpeg4, _ten_fps, _off_grid])
def test_a_stream_the_dataset_does_not_declare_is_reencoded_and_named(run_dir, tmp_path,
                                                                      damage):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    second = cells(run)[1]
    why = damage(second / "agentview.mp4")
    out, lines = export(run, tmp_path / "ds")
    assert lines == [f"robosafe: observation.images.agentview: re-encoded ({why})",
                     f"robosafe: observation.images.robot0_eye_in_hand: {COPIED}"]
    assert out["episodes"] == 2
    times, frames, _ = segments(tmp_path / "ds", "agentview")
    assert times == [Fraction(k, FPS) for k in range(2 * (STEPS + 1))]
    src = [f for cell in cells(run) for f in decode(cell / "agentview.mp4")[1]]
    assert min(psnr(a, b) for a, b in zip(frames, src)) > 30
