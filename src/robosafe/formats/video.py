"""mp4 streams through PyAV (the ``video`` extra), imported only when a video is touched.

LeRobot v3.0 stores the frames of many episodes of one camera back to back in one mp4 file;
an episode is the frames whose timestamps fall in ``[from_timestamp, to_timestamp)`` of its
``meta/episodes`` row. Frames are written with ``pts = frame number`` in a ``1/fps`` time base,
so timestamps are exact multiples of ``1/fps``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np

from robosafe.errors import RobosafeError

CODEC = "libx264"
"""h264: every LeRobot decoder (torchcodec, PyAV, the dataset visualizer) reads it, also where
an AV1 decoder (LeRobot's own default codec, libsvtav1) is missing."""
CODEC_NAME = {"libx264": "h264", "h264": "h264", "libsvtav1": "av1", "mpeg4": "mpeg4"}
OPTIONS = {"libx264": {"crf": "23", "preset": "veryfast"}}
GOP = 2
"""A key frame every 2 frames, LeRobot's encoding default: random access to any frame decodes
at most one other frame."""
PIX_FMT = "yuv420p"


def _av(need: str = "camera videos need"):
    try:
        import av
    except ImportError:
        raise RobosafeError(f"{need} PyAV: pip install 'robosafe[video]'") from None
    return av


def available() -> bool:
    """Whether PyAV (the ``video`` extra) is installed."""
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def require_video() -> None:
    """Fail now, with the install line, if camera videos cannot be written: before a run that
    records them simulates anything, not once per finished episode."""
    _av()


class VideoWriter:
    """Append RGB frames (H, W, 3) uint8 to one mp4 file."""

    def __init__(self, path: str | Path, fps: int, height: int, width: int,
                 codec: str = CODEC, *, gop: int | None = GOP, bit_rate: int | None = None):
        """``gop`` None and ``bit_rate`` None keep the codec's own defaults."""
        av = _av()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fps, self.height, self.width, self.codec = fps, height, width, codec
        self._out = av.open(str(self.path), "w")
        self._stream = self._out.add_stream(codec, rate=fps)
        self._stream.width, self._stream.height = width, height
        self._stream.pix_fmt = PIX_FMT
        self._stream.time_base = Fraction(1, fps)
        if gop is not None:
            self._stream.codec_context.gop_size = gop
        if bit_rate is not None:
            self._stream.bit_rate = bit_rate
        self._stream.options = dict(OPTIONS.get(codec, {}))
        self.frames = 0

    def add(self, frame: np.ndarray) -> None:
        av = _av()
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        if frame.shape != (self.height, self.width, 3):
            raise RobosafeError(f"{self.path}: frame {self.frames} has shape {frame.shape}, "
                                f"expected {(self.height, self.width, 3)}")
        vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
        vf.pts = self.frames
        vf.time_base = Fraction(1, self.fps)
        for packet in self._stream.encode(vf):
            self._out.mux(packet)
        self.frames += 1

    def close(self) -> None:
        for packet in self._stream.encode():
            self._out.mux(packet)
        self._out.close()


def write_video(path: str | Path, frames: Iterable[np.ndarray], fps: int, *,
                codec: str = CODEC, gop: int | None = GOP, bits_per_pixel: float | None = None,
                min_bit_rate: int = 0) -> int:
    """Encode RGB frames (H, W, 3 uint8, the size of the first) into one mp4; returns the
    number of frames (0 writes no file). ``bits_per_pixel`` sets the bit rate to
    ``max(min_bit_rate, H * W * fps * bits_per_pixel)``."""
    _av(f"{path}: writing a video needs")
    writer = None
    try:
        for img in frames:
            if writer is None:
                h, w = img.shape[:2]
                rate = (None if bits_per_pixel is None
                        else max(min_bit_rate, int(h * w * fps * bits_per_pixel)))
                writer = VideoWriter(path, fps, h, w, codec, gop=gop, bit_rate=rate)
            writer.add(img)
    finally:
        if writer is not None:
            writer.close()
    return 0 if writer is None else writer.frames


def frame_count(path: str | Path) -> int:
    """The number of frames of an mp4 (from its header, else by decoding)."""
    av = _av()
    container, stream = _open(av, path)
    with container:
        try:
            return int(stream.frames or sum(1 for _ in container.decode(stream)))
        except (OSError, av.error.FFmpegError) as exc:
            raise RobosafeError(f"{path}: undecodable video: {_why(exc)}") from None


def _open(av, path: str | Path):
    """The container and its first video stream; one error line if there is none."""
    try:
        container = av.open(str(path))
    except (OSError, av.error.FFmpegError) as exc:
        raise RobosafeError(f"{path}: not a readable video: {_why(exc)}") from None
    if not container.streams.video:
        container.close()
        raise RobosafeError(f"{path}: not a readable video: no video stream")
    return container, container.streams.video[0]


def _why(exc: Exception) -> str:
    """FFmpeg's reason without the file name it repeats."""
    return getattr(exc, "strerror", None) or str(exc)


def read_frames(path: str | Path, start: int = 0, stop: int | None = None
                ) -> Iterator[np.ndarray]:
    """RGB frames ``start <= n < stop`` of an mp4 (n = pts in frames), in order. A file that
    stops decoding part way (truncated, damaged) is an error naming it and the frame."""
    av = _av()
    container, stream = _open(av, path)
    with container:
        rate = stream.average_rate or stream.base_rate
        n = 0
        try:
            for n, frame in enumerate(container.decode(stream)):
                idx = (n if frame.pts is None
                       else round(float(frame.pts * stream.time_base * rate)))
                if idx < start:
                    continue
                if stop is not None and idx >= stop:
                    break
                yield frame.to_ndarray(format="rgb24")
        except (OSError, av.error.FFmpegError) as exc:
            raise RobosafeError(f"{path}: frame {n}: undecodable video: {_why(exc)}") from None


def probe(path: str | Path) -> dict:
    """LeRobot's per-video ``info`` block (height, width, codec, pix_fmt, fps, channels); the
    writer adds lerobot 0.6's ``is_depth_map`` (the older ``video.is_depth_map`` is legacy)."""
    av = _av()
    c, s = _open(av, path)
    with c:
        return {"video.height": s.height, "video.width": s.width,
                "video.codec": CODEC_NAME.get(s.codec_context.name, s.codec_context.name),
                "video.pix_fmt": s.pix_fmt,
                "video.fps": int(s.average_rate or s.base_rate), "video.channels": 3,
                "has_audio": bool(c.streams.audio)}
