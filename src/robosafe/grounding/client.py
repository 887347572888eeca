"""OpenAI-compatible chat-completions client for TouchSafeBench clips (paper 003, Sec. 4).

Works against vLLM (``vllm serve``), hosted OpenAI-compatible APIs and proxies. Standard library
only (urllib, threads): no new dependency.

* ``endpoint`` is the API base (``http://host:8000/v1``) or the full ``.../chat/completions``
  URL. The API key is read from the environment variable ``api_key_env`` (default
  ``OPENAI_API_KEY``) and nothing else; without it no Authorization header is sent (a local vLLM
  needs none). Redirects are never followed: a chat request is a POST (urllib would re-send it
  as a bodiless GET) and following one would carry the key to another origin; a 3xx is an
  :class:`EndpointError` naming where the endpoint points.
* One user message per clip: the prompt text (``prompts.build_prompt``), then one ``image_url``
  part per image as a base64 data URL, in ``prompts.image_sequence`` order.
* Retries with exponential backoff (``backoff_s * 2**attempt``, capped, ``Retry-After`` honoured)
  on 408/409/425/429/5xx, timeouts and dropped connections.
* Failures are split by who can fix them. The server is unreachable (after retries), rejects the
  key (401/403), does not know the URL/model (404) or rejects the request itself (any other 4xx
  but the transient 408/409/425/429, e.g. a 400 for an unsupported ``temperature``, which would
  make every clip invalid): one :class:`EndpointError` naming the URL and the server's message
  stops the run (answers already received are in the cache). Anything about one clip (retries
  exhausted, a missing frame file, an empty reply) becomes that clip's record with
  ``answer=""`` and the reason in ``error``: it scores as invalid and is never dropped.
* Ctrl-C stops at once: no new request starts, requests in flight are abandoned (worker threads
  are daemons), and :class:`AskInterrupted` carries every answer received so far.
* The on-disk answer cache is JSON lines, one answer per line, appended and fsync'ed as each
  answer arrives, so an interrupted evaluation resumes without asking again. Failures are not
  cached, so a rerun retries them. The key hashes the model, the full prompt text, the clip id,
  the representation, the images' bytes and the sampling parameters (temperature, max_tokens,
  extra body): a different sampling setup is a different condition, so it is asked afresh.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robosafe.errors import (
    AskInterrupted,
    ChatRequestError,
    EndpointError,
    RobosafeError,
)
from robosafe.grounding.dataset import clip_episode_dir
from robosafe.grounding.prompts import (
    build_prompt,
    normalize_representation,
    normalize_task,
    resolve_views,
)
from robosafe.grounding.representations import (
    ClipImage,
    DepthPredictor,
    clip_images,
    images_digest,
    resolve_depth_predictor,
)
from robosafe.redact import redact_url

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
RETRY_STATUS = frozenset({408, 409, 425, 429})  # and every 5xx
CACHE_VERSION = 1
_ERROR_BODY_CHARS = 500


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Turns every 3xx into an HTTPError (urllib's handler copies Authorization to any host)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)




class _Retryable(Exception):
    def __init__(self, message: str, *, retry_after: float | None = None,
                 unreachable: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.unreachable = unreachable


def chat_url(endpoint: str) -> str:
    """``http://h/v1`` -> ``http://h/v1/chat/completions``; a full URL is kept."""
    url = endpoint.strip()
    if not url.lower().startswith(("http://", "https://")):  # a scheme has no case
        raise RobosafeError(f"endpoint {redact_url(endpoint)!r} is not an http(s) URL")
    if "@" in url.split("://", 1)[1].split("/", 1)[0]:
        # urllib would not send them, and its errors would quote them in answer records
        raise RobosafeError(f"endpoint {redact_url(endpoint)!r}: credentials in the URL are "
                            f"not sent; give the API key in ${DEFAULT_API_KEY_ENV} (or "
                            "--api-key-env)")
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def backoff_delay(attempt: int, base_s: float, cap_s: float,
                  retry_after: float | None = None) -> float:
    """Seconds to wait before retry ``attempt + 1``: ``base * 2**attempt`` capped at ``cap``; a
    server's ``Retry-After`` wins when it asks for longer (still capped)."""
    delay = min(cap_s, base_s * (2.0 ** attempt))
    if retry_after is not None:
        delay = max(delay, min(cap_s, retry_after))
    return max(0.0, delay)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # the HTTP-date form
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class ChatClient:
    """One endpoint + model. ``complete`` sends one prompt with its images and returns the
    reply text; it raises :class:`EndpointError` or :class:`ChatRequestError` (module doc)."""

    endpoint: str
    model: str
    api_key_env: str = DEFAULT_API_KEY_ENV
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    temperature: float | None = 0.0
    max_tokens: int | None = None
    extra_body: Mapping[str, Any] | None = None
    url: str = field(init=False)

    @property
    def shown(self) -> str:
        """The URL as messages show it: credentials in it masked (the request gets them)."""
        return redact_url(self.url)

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", chat_url(self.endpoint))
        if self.max_retries < 0 or self.timeout_s <= 0:
            raise RobosafeError("max_retries must be >= 0 and timeout_s > 0")

    @property
    def params(self) -> dict[str, Any]:
        """The sampling parameters sent with every request (part of the cache key)."""
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        out.update(self.extra_body or {})
        return out

    def payload(self, prompt: str, images: Sequence[ClipImage]) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
        content += [{"type": "image_url", "image_url": {"url": im.data_url()}} for im in images]
        return {"model": self.model, "messages": [{"role": "user", "content": content}],
                **self.params}

    def complete(self, prompt: str, images: Sequence[ClipImage]) -> str:
        body = json.dumps(self.payload(prompt, images)).encode("utf-8")
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                return _reply_text(self._post(body))
            except _Retryable as e:
                if attempt + 1 == attempts:
                    if e.unreachable:
                        raise EndpointError(f"cannot reach {self.shown}: {e} (after {attempts} "
                                            "attempts)") from None
                    raise ChatRequestError(f"{e} (after {attempts} attempts)") from None
                time.sleep(backoff_delay(attempt, self.backoff_s, self.max_backoff_s,
                                         e.retry_after))
        raise AssertionError("unreachable")  # the loop always returns or raises

    def _post(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with _OPENER.open(req, timeout=self.timeout_s) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            status, text = e.code, _error_text(e)
            if 300 <= status < 400:
                raise EndpointError(f"{self.shown}: HTTP {status} redirect to "
                                    f"{e.headers.get('Location')!r}, not followed (the API key "
                                    "goes to the given endpoint only); pass the final URL as "
                                    "the endpoint") from None
            if status in RETRY_STATUS or status >= 500:
                raise _Retryable(f"HTTP {status}: {text}",
                                 retry_after=_retry_after(e.headers.get("Retry-After"))) from None
            if status in (401, 403):
                raise EndpointError(f"{self.shown}: HTTP {status} {text} (check the API key in "
                                    f"${self.api_key_env})") from None
            if status == 404:
                raise EndpointError(f"{self.shown}: HTTP 404 {text} (wrong endpoint URL or model "
                                    f"{self.model!r}?)") from None
            if 400 <= status < 500:  # the same request shape fails for every clip
                raise EndpointError(f"{self.shown}: HTTP {status} {text} (the endpoint rejects "
                                    f"the request; sampling parameters sent: "
                                    f"{json.dumps(self.params)})") from None
            raise ChatRequestError(f"HTTP {status}: {text}") from None
        except TimeoutError:
            raise _Retryable(f"no reply within {self.timeout_s:g} s") from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                raise _Retryable(f"no reply within {self.timeout_s:g} s") from None
            # refused, DNS failure, no route: nothing reached the server
            raise _Retryable(str(e.reason), unreachable=True) from None
        except (http.client.HTTPException, ConnectionError) as e:
            # reset or dropped mid-reply: the server is there, this request failed
            raise _Retryable(f"connection error: {e!r}") from None


def _error_text(e: urllib.error.HTTPError) -> str:
    try:
        raw = e.read(4 * _ERROR_BODY_CHARS).decode("utf-8", "replace")
    except OSError:
        raw = ""
    try:  # OpenAI-style {"error": {"message": ...}}
        err = json.loads(raw).get("error")
        raw = err.get("message", raw) if isinstance(err, dict) else (err or raw)
    except (ValueError, AttributeError):
        pass
    return (str(raw).strip() or str(e.reason))[:_ERROR_BODY_CHARS]


def _reply_text(raw: bytes) -> str:
    try:
        doc = json.loads(raw)
        choice = doc["choices"][0]
        content = choice["message"].get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise ChatRequestError(f"malformed chat-completions response: {raw[:200]!r}") from None
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str) or not content.strip():
        raise ChatRequestError(f"empty reply (finish_reason={choice.get('finish_reason')!r})")
    return content


# ----------------------------------------------------------------------------- cache


def cache_key(model: str, prompt: str, clip_id: Any, representation: str, images_sha256: str,
              params: Mapping[str, Any] | None = None) -> str:
    doc = [CACHE_VERSION, model, prompt, str(clip_id), representation, images_sha256,
           dict(params or {})]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


class AnswerCache:
    """Answers by key in a JSON-lines file; each ``put`` appends one line and fsyncs it."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._answers: dict[str, str] = {}
        self._lock = threading.Lock()
        self._needs_newline = False
        if self.path.is_file():
            data = self.path.read_bytes()
            # A line torn by an interruption is skipped (that clip is asked again), and the next
            # append starts on a fresh line so it cannot merge with the fragment.
            self._needs_newline = bool(data) and not data.endswith(b"\n")
            for line in data.decode("utf-8", "replace").splitlines():
                try:
                    doc = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if isinstance(doc, dict) and isinstance(doc.get("key"), str) \
                        and isinstance(doc.get("answer"), str):
                    self._answers[doc["key"]] = doc["answer"]
        elif self.path.exists():
            raise RobosafeError(f"{self.path}: the answer cache is not a file")

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> str | None:
        return self._answers.get(key)

    def put(self, key: str, answer: str, **meta: Any) -> None:
        line = json.dumps({"key": key, **meta, "answer": answer}, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                if self._needs_newline:
                    f.write("\n")
                    self._needs_newline = False
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            self._answers[key] = answer


# ----------------------------------------------------------------------------- clips


_CLIP_FIELDS = ("clip_id", "task", "episode_dir", "frames")


def _check_clip(i: int, clip: Any) -> None:
    if not isinstance(clip, Mapping):
        raise RobosafeError(f"clips[{i}]: expected a mapping, got {type(clip).__name__}")
    for key in _CLIP_FIELDS:
        if key not in clip:
            raise RobosafeError(f"clips[{i}]: missing field {key!r}")
    try:
        normalize_task(clip["task"])
    except RobosafeError as e:
        raise RobosafeError(f"clips[{i}].task: {e}") from None
    frames = clip["frames"]
    if not isinstance(frames, Sequence) or isinstance(frames, str) or not frames or any(
            isinstance(f, bool) or not isinstance(f, int) or f < 0 for f in frames):
        raise RobosafeError(f"clips[{i}].frames: expected a non-empty list of frame indices, got "
                            f"{frames!r}")


def _views_name(views: str | Sequence[str]) -> str:
    return views if isinstance(views, str) else "+".join(views)


def ask_clips(clips: Iterable[Mapping[str, Any]], dataset_root: str | os.PathLike[str],
              model: str, endpoint: str, representation: str = "rgb",
              views: str | Sequence[str] = "ego", *, cache: str | os.PathLike[str] | None = None,
              api_key_env: str = DEFAULT_API_KEY_ENV, concurrency: int = 4,
              timeout_s: float = 120.0, max_retries: int = 4, backoff_s: float = 1.0,
              max_backoff_s: float = 60.0, temperature: float | None = 0.0,
              max_tokens: int | None = None, extra_body: Mapping[str, Any] | None = None,
              depth_predictor: DepthPredictor | None = None,
              progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Ask ``model`` at ``endpoint`` about every clip; one record per clip, in clip order.

    Each record is the clip's own fields (clip_id, task, label, sample_type, truth_* ...) plus
    ``model``, ``representation``, ``views``, ``n_frames``, ``answer`` (raw reply text, ``""``
    when the clip failed) and ``error`` (None, or why the clip failed): exactly what
    ``metrics.score_answers`` takes. ``cache`` is the JSON-lines answer cache (module doc);
    ``concurrency`` the number of requests in flight; ``progress(done, total)`` is called after
    each clip. Raises :class:`EndpointError` when the endpoint cannot serve any clip.
    """
    clips = list(clips)
    for i, clip in enumerate(clips):
        _check_clip(i, clip)
        try:  # before anything is read or sent
            clip_episode_dir(dataset_root, clip["episode_dir"])
        except RobosafeError as e:
            raise RobosafeError(f"clips[{i}].episode_dir: {e}") from None
    rep = normalize_representation(representation)
    resolve_views(views)
    predictor = resolve_depth_predictor(rep, depth_predictor)
    if concurrency < 1:
        raise RobosafeError(f"concurrency must be >= 1, got {concurrency}")
    client = ChatClient(endpoint=endpoint, model=model, api_key_env=api_key_env,
                        timeout_s=timeout_s, max_retries=max_retries, backoff_s=backoff_s,
                        max_backoff_s=max_backoff_s, temperature=temperature,
                        max_tokens=max_tokens, extra_body=extra_body)
    store = AnswerCache(cache) if cache is not None else None
    views_name = _views_name(views)
    stop = threading.Event()

    def one(clip: Mapping[str, Any]) -> dict[str, Any]:
        record = {**clip, "model": model, "representation": rep, "views": views_name,
                  "n_frames": len(clip["frames"]), "answer": "", "error": None}
        if stop.is_set():  # another clip hit an EndpointError: do not start new requests
            record["error"] = "not asked (run stopped)"
            return record
        prompt = build_prompt(clip["task"], rep, views, n_frames=len(clip["frames"]))
        try:
            images = clip_images(clip, dataset_root, rep, views, depth_predictor=predictor)
        except RobosafeError as e:
            record["error"] = f"images: {e}"
            return record
        digest = images_digest(images)
        key = cache_key(model, prompt, clip["clip_id"], rep, digest, client.params)
        hit = store.get(key) if store is not None else None
        if hit is not None:
            record["answer"] = hit
            return record
        try:
            record["answer"] = client.complete(prompt, images)
        except ChatRequestError as e:
            record["error"] = str(e)
            return record
        except EndpointError:
            stop.set()  # here, not in the caller: a worker takes its next clip at once
            raise
        if store is not None:
            store.put(key, record["answer"], model=model, clip_id=clip["clip_id"],
                      task=clip["task"], representation=rep, views=views_name,
                      images_sha256=digest)
        return record

    results: list[dict[str, Any] | None] = [None] * len(clips)
    todo: queue.Queue[int] = queue.Queue()
    for i in range(len(clips)):
        todo.put(i)
    finished: queue.Queue[tuple[int, dict[str, Any] | None, BaseException | None]] = \
        queue.Queue()

    def worker() -> None:
        while not stop.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                finished.put((i, one(clips[i]), None))
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                finished.put((i, None, e))

    # Daemon threads, not an executor: Ctrl-C must not wait for queued or in-flight requests.
    for _ in range(min(concurrency, max(1, len(clips)))):
        threading.Thread(target=worker, daemon=True).start()
    done = 0
    try:
        while done < len(clips):
            try:
                i, record, err = finished.get(timeout=0.1)
            except queue.Empty:
                continue
            if err is not None:
                stop.set()
                raise err
            results[i] = record
            done += 1
            if progress is not None:
                progress(done, len(clips))
    except KeyboardInterrupt:
        stop.set()
        raise AskInterrupted([r for r in results if r is not None], len(clips)) from None
    return [r for r in results if r is not None]
