"""LeRobot dataset write speed: robosafe's writer against lerobot 0.6.1's own (the baseline).

Every writer writes the same dataset: E episodes of N frames, each frame an 8-d state, a 7-d
action, ``next.done`` and C RGB cameras (deterministic moving pictures with some noise, made
before the clock starts). Writers, each timed inside its own fresh process (imports and frame
generation excluded), interleaved round by round so machine load hits all alike:

* ``lerobot h264`` (baseline): ``LeRobotDataset.create`` + ``add_frame`` + ``save_episode`` +
  ``finalize`` as ``lerobot-record`` sets it up by default (4 image-writer threads per camera,
  frames kept as PNG until ``save_episode`` encodes them) with robosafe's encoder settings
  (h264, crf 23, preset veryfast, GOP 2), so the codec work is the same as robosafe's;
* ``lerobot streaming``: the same with ``streaming_encoding=True`` (frames go to the encoder
  as they are added, no PNG; ``lerobot-record --dataset.streaming_encoding=true``);
* ``lerobot default``: the baseline's set-up with lerobot's default encoder (libsvtav1,
  preset 12);
* ``robosafe encode``: ``DatasetWriter.add_episode`` + ``close`` encoding the frames
  (``export lerobot --reencode``);
* ``robosafe copy``: ``DatasetWriter`` copying per-episode h264 mp4s (a run's
  ``frames/<cell>/<camera>.mp4``, written before the clock starts) and decoding them for the
  statistics, what ``export lerobot`` does by default.

Reported: frames per second of each (median of the rounds) and the ratio to the baseline.
Every writer runs in the lerobot environment (``scripts/lerobot-env.sh``; robosafe from this
checkout's ``src``), so both use the same PyAV and FFmpeg.

    python benchmarks/bench_lerobot_write.py [--episodes 4] [--frames 100] [--cameras 2]
        [--size 128] [--rounds 3] [--lerobot-python .venv-lerobot/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FPS = 20
TASK = "put the bowl on the plate"
WRITERS = ("lerobot h264", "lerobot streaming", "lerobot default", "robosafe encode",
           "robosafe copy")
BASELINE = "lerobot h264"
H264 = {"vcodec": "h264", "crf": 23, "preset": "veryfast", "g": 2}  # robosafe's VideoWriter's


def picture(e: int, t: int, cam: int, size: int) -> np.ndarray:
    """A camera frame: gradients that move with t plus seeded noise (sensor-like detail)."""
    y, x = np.mgrid[0:size, 0:size]
    img = np.stack([(x * 2 + 3 * t + 50 * cam) % 256, (y * 2 + 40 * e) % 256,
                    (x + y + 2 * t) % 256], -1).astype(np.int16)
    noise = np.random.default_rng([e, t, cam]).integers(-6, 7, img.shape)
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def episode(e: int, args) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(e)
    n = args.frames
    done = np.arange(n) == n - 1
    numeric = {"observation.state": rng.normal(0, 1, (n, 8)).astype(np.float32),
               "action": rng.normal(0, 1, (n, 7)).astype(np.float32), "next.done": done}
    videos = {f"observation.images.cam{c}": np.stack([picture(e, t, c, args.size)
                                                      for t in range(n)])
              for c in range(args.cameras)}
    return numeric, videos


NUMERIC = {"observation.state": {"dtype": "float32", "shape": [8], "names": None},
           "action": {"dtype": "float32", "shape": [7], "names": None},
           "next.done": {"dtype": "bool", "shape": [1], "names": None}}


# ------------------------------------------------------------------ one writer, in its process

def run_lerobot(out: Path, data: list, args, default_codec: bool, streaming: bool) -> None:
    from lerobot.configs.video import RGBEncoderConfig
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    features = dict(NUMERIC)
    for key in data[0][1]:
        features[key] = {"dtype": "video", "shape": [args.size, args.size, 3],
                         "names": ["height", "width", "channels"]}
    ds = LeRobotDataset.create("bench/write", FPS, features, root=out,
                               rgb_encoder=None if default_codec else RGBEncoderConfig(**H264),
                               image_writer_threads=4 * args.cameras,  # lerobot-record's
                               streaming_encoding=streaming)
    for numeric, videos in data:
        for t in range(args.frames):
            frame = {"task": TASK, **{k: v[t] for k, v in videos.items()}}
            frame |= {k: v[t:t + 1] if v.ndim == 1 else v[t] for k, v in numeric.items()}
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()


def run_robosafe(out: Path, data: list, args, sources: list | None) -> None:
    from robosafe.formats.lerobot import DatasetWriter
    from robosafe.formats.video import read_frames

    cams = {k: (args.size, args.size) for k in data[0][1]}
    w = DatasetWriter(out, fps=FPS, features=NUMERIC, cameras=cams)
    for e, (numeric, videos) in enumerate(data):
        if sources is None:
            w.add_episode(numeric, TASK, videos=videos)
        else:  # what export does: decode the run's mp4 for the statistics, copy its packets
            decoded = {k: list(read_frames(p)) for k, p in sources[e].items()}
            w.add_episode(numeric, TASK, videos=decoded, sources=sources[e])
    w.close()


def run_sources(where: Path, data: list) -> list[dict[str, Path]]:
    """Per-episode mp4s as a run records them (runner.frames: VideoWriter, one per camera)."""
    from robosafe.formats.video import VideoWriter

    out = []
    for e, (_, videos) in enumerate(data):
        paths = {}
        for key, shot in videos.items():
            paths[key] = where / f"ep{e}" / f"{key}.mp4"
            v = VideoWriter(paths[key], FPS, shot.shape[1], shot.shape[2])
            for img in shot:
                v.add(img)
            v.close()
        out.append(paths)
    return out


def worker(args) -> None:
    data = [episode(e, args) for e in range(args.episodes)]
    tmp = Path(args.tmp)
    sources = run_sources(tmp / "run", data) if args.worker == "robosafe copy" else None
    out = tmp / "ds"
    # imports are not writing: loaded before the clock (lerobot's pull in torch, seconds)
    if args.worker.startswith("lerobot"):
        import lerobot.configs.video
        import lerobot.datasets.lerobot_dataset  # noqa: F401
    else:
        import robosafe.formats.lerobot  # noqa: F401
    import av  # noqa: F401
    t0 = time.perf_counter()
    if args.worker.startswith("lerobot"):
        run_lerobot(out, data, args, default_codec=args.worker == "lerobot default",
                    streaming=args.worker == "lerobot streaming")
    else:
        run_robosafe(out, data, args, sources)
    seconds = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in (out / "videos").rglob("*.mp4"))
    print(json.dumps({"seconds": seconds, "frames": args.episodes * args.frames,
                      "video_bytes": size}))


# ------------------------------------------------------------------ driver

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--frames", type=int, default=100, help="frames per episode")
    ap.add_argument("--cameras", type=int, default=2)
    ap.add_argument("--size", type=int, default=128, help="camera height = width (px)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median kept)")
    ap.add_argument("--lerobot-python", default=os.environ.get(
        "ROBOSAFE_LEROBOT_PYTHON", str(ROOT / ".venv-lerobot/bin/python")),
        help="a Python with lerobot[dataset]==0.6.1 (scripts/lerobot-env.sh)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if not Path(args.lerobot_python).is_file():
        sys.exit(f"bench_lerobot_write: no lerobot Python at {args.lerobot_python} "
                 "(bash scripts/lerobot-env.sh .venv-lerobot, or --lerobot-python)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    common = ["--episodes", str(args.episodes), "--frames", str(args.frames),
              "--cameras", str(args.cameras), "--size", str(args.size)]
    rates: dict[str, list[float]] = {w: [] for w in WRITERS}
    sizes: dict[str, int] = {}
    for r in range(args.rounds):
        order = WRITERS[r % len(WRITERS):] + WRITERS[:r % len(WRITERS)]  # rotate who goes first
        for name in order:
            with tempfile.TemporaryDirectory() as tmp:
                proc = subprocess.run([args.lerobot_python, __file__, "--worker", name,
                                       "--tmp", tmp, *common], capture_output=True, text=True,
                                      env=env, timeout=1800, check=False)
            if proc.returncode:
                sys.exit(f"bench_lerobot_write: {name} failed:\n{proc.stderr[-3000:]}")
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            rates[name].append(res["frames"] / res["seconds"])
            sizes[name] = res["video_bytes"]
    base = statistics.median(rates[BASELINE])
    print(f"{args.episodes} episodes x {args.frames} frames, {args.cameras} cameras at "
          f"{args.size} px, {FPS} fps; median of {args.rounds} interleaved rounds")
    for name in WRITERS:
        fps = statistics.median(rates[name])
        tag = "baseline" if name == BASELINE else f"x{fps / base:.2f} vs {BASELINE}"
        print(f"  {name:17s}: {fps:7.0f} frames/s  ({tag}; videos {sizes[name] / 1e3:.0f} kB)")
    print(f"cpu cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
