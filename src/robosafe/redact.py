"""Credentials never reach disk or logs (DESIGN.md, Contracts: untrusted inputs).

A policy spec such as ``ws://user:password@host:8000/?token=abc`` carries its credentials in
the URL. Everything robosafe writes (run.json, outcome rows, traces, datasets) or prints
(progress lines, error messages) goes through :func:`redact_url`; only the connection itself
sees the original string.
"""

from __future__ import annotations

import logging
import re

#: ``scheme://userinfo@``: everything between ``//`` and the first ``@`` of the authority.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@?#]*@")
#: query parameters whose value is a credential by name (``?token=..``, ``&api_key=..``)
_SECRET_QUERY = re.compile(
    r"(?P<key>[?&;](?:[a-z_-]*token|[a-z_-]*key|key|password|passwd|pass|pwd|secret|auth|"
    r"authorization|sig|signature|credential|credentials)=)[^&;#\s]*", re.IGNORECASE)
MASK = "***"


def redact_url(text: str) -> str:
    """``text`` with the user information and credential query values of every URL in it
    replaced by ``***``; text without a URL is returned unchanged."""
    if "://" not in text:
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _SECRET_QUERY.sub(lambda m: f"{m['key']}{MASK}", text)


class RedactRecords(logging.Filter):
    """Every record a logger passes on has the credentials of its URLs masked: a message may
    quote any URL a user gave (a policy server, a Ray address, a VLM endpoint), whichever
    module words it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact_url(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True


def redact_logs(name: str = "robosafe") -> None:
    """Mask URL credentials in every record of logger ``name`` (once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RedactRecords) for f in logger.filters):
        logger.addFilter(RedactRecords())
