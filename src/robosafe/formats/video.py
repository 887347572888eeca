"""mp4 streams through PyAV (the ``video`` extra), imported only when a video is touched.

LeRobot v3.0 stores the frames of many episodes of one camera back to back in one mp4 file;
an episode is the frames whose timestamps fall in ``[from_timestamp, to_timestamp)`` of its
``meta/episodes`` row. Frames are written with ``pts = frame number`` in a ``1/fps`` time base,
so timestamps are exact multiples of ``1/fps``. A run's per-episode videos are already such
streams: :class:`StreamCopier` appends them to a dataset's file packet by packet (a remux), so
the dataset holds the run's own frames rather than a second lossy encoding of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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


@dataclass(frozen=True)
class StreamInfo:
    """A file's first video stream: what LeRobot declares of it and what decides whether its
    packets can go into another file unchanged."""

    codec: str  # LeRobot's name: h264, av1, mpeg4, ...
    height: int
    width: int
    pix_fmt: str | None
    fps: Fraction
    extradata: bytes  # the decoder set-up (h264: SPS and PPS); one per output stream
    has_audio: bool

    def info(self) -> dict:
        """LeRobot's per-video ``info`` block (height, width, codec, pix_fmt, fps, channels);
        the writer adds lerobot 0.6's ``is_depth_map`` (``video.is_depth_map`` is legacy)."""
        return {"video.height": self.height, "video.width": self.width,
                "video.codec": self.codec, "video.pix_fmt": self.pix_fmt,
                "video.fps": int(self.fps), "video.channels": 3, "has_audio": self.has_audio}


def stream_info(path: str | Path) -> StreamInfo:
    av = _av()
    c, s = _open(av, path)
    with c:
        cc = s.codec_context
        return StreamInfo(CODEC_NAME.get(cc.name, cc.name), s.height, s.width, s.pix_fmt,
                          Fraction(s.average_rate or s.base_rate or 0), bytes(cc.extradata or b""),
                          bool(c.streams.audio))


def probe(path: str | Path) -> dict:
    """LeRobot's per-video ``info`` block of a file (:meth:`StreamInfo.info`)."""
    return stream_info(path).info()


def _frames_of(t: int, time_base: Fraction, fps: int, path: Path, k: int) -> int:
    """A packet time in frames; it must fall on a frame (k / fps) to be copied as is."""
    x = t * time_base * fps
    if x.denominator != 1:
        raise RobosafeError(f"{path}: packet {k} at {float(t * time_base):.6f} s is not on a "
                            f"1/{fps} s frame")
    return int(x)


def _frame_packets(stream, container, path: Path, fps: int) -> list:
    """The stream's packets with pts and dts counted in frames (``packet.time_base`` 1/fps),
    checked to number the frames 0..n-1 once each in decoding order: what concatenation needs
    to shift an episode by a whole number of frames."""
    tb = stream.time_base
    out = []
    for k, pkt in enumerate(container.demux(stream)):
        if pkt.size == 0:  # the demuxer's end-of-stream marker
            continue
        if pkt.pts is None or pkt.dts is None:
            raise RobosafeError(f"{path}: packet {k} has no timestamp")
        pts, dts = (_frames_of(t, tb, fps, path, k) for t in (pkt.pts, pkt.dts))
        if out and dts <= out[-1].dts:
            raise RobosafeError(f"{path}: packet {k}: decoding times do not increase")
        pkt.pts, pkt.dts, pkt.duration, pkt.time_base = pts, dts, 1, Fraction(1, fps)
        out.append(pkt)
    if sorted(p.pts for p in out) != list(range(len(out))):
        raise RobosafeError(f"{path}: frame times are not 0, 1/{fps}, 2/{fps}, ... s once each")
    return out


def copy_problem(path: str | Path, fps: int) -> str | None:
    """Why the file's video packets cannot be copied into a 1/fps dataset file (None: they
    can). Reads packets only, decodes nothing."""
    av = _av()
    c, s = _open(av, path)
    with c:
        try:
            _frame_packets(s, c, Path(path), fps)
        except RobosafeError as exc:
            return str(exc)
        except (OSError, av.error.FFmpegError) as exc:
            return f"{path}: unreadable packets: {_why(exc)}"
    return None


class StreamCopier:
    """Append whole mp4 files' video streams to one mp4 without decoding them (a remux: the
    packets are the source's bytes, so they decode to the source's frames bit for bit).

    Every file must carry the stream of the first (same codec set-up, timestamps on 1/fps);
    each is shifted by the frames already written, pts and dts alike, so episode ``e`` starts
    at ``frames_before_e / fps`` s and a B-frame's reordering delay stays within its episode.
    """

    def __init__(self, path: str | Path, fps: int):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fps = fps
        self.frames = 0
        self._out = None
        self._stream = None
        self._extradata: bytes | None = None

    def add(self, src: str | Path) -> int:
        """Append one file's frames; returns how many. Checked in full before a packet is
        written: a file that cannot be copied leaves the output as it was."""
        av = _av()
        container, stream = _open(av, src)
        with container:
            extradata = bytes(stream.codec_context.extradata or b"")
            if self._extradata is not None and extradata != self._extradata:
                raise RobosafeError(f"{src}: its codec set-up (extradata) differs from the "
                                    f"first file copied into {self.path}")
            try:
                packets = _frame_packets(stream, container, Path(src), self.fps)
            except (OSError, av.error.FFmpegError) as exc:
                raise RobosafeError(f"{src}: unreadable packets: {_why(exc)}") from None
            if self._out is None:
                self._open_output(av, stream, extradata)
            for pkt in packets:
                pkt.pts += self.frames
                pkt.dts += self.frames
                pkt.stream = self._stream
                self._out.mux(pkt)
        self.frames += len(packets)
        return len(packets)

    def _open_output(self, av, template, extradata: bytes) -> None:
        self._out = av.open(str(self.path), "w")
        # add_stream_from_template is PyAV >= 14; older PyAV took the template as an argument
        add = getattr(self._out, "add_stream_from_template", None)
        self._stream = add(template) if add else self._out.add_stream(template=template)
        self._stream.time_base = Fraction(1, self.fps)
        self._extradata = extradata

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
