"""Logging: JSON lines when not on a terminal, readable text on one; credentials never reach a log.

Every formatted line goes through :func:`redact`, which masks bearer tokens, ``Authorization``
headers and ``token=`` / ``secret=`` / ``password=`` style parameters (in URLs, query strings and
messages), and the password of database URLs. The access log (``commit_owner.access``) writes one
line per request with ``request_id``, ``table_id``, ``version``, ``outcome`` and ``duration_ms``.
"""

from __future__ import annotations

import logging
import re
import sys
import time

import orjson

_PATTERNS = [
    # Authorization: Bearer <token> / Basic <creds>, and a bare "Bearer <token>"
    (re.compile(r"(?i)(authorization\s*[:=]\s*)(\S+\s+)?[^\s,;\"']+"), r"\1\2***"),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1***"),
    # token=..., access_token=..., api_key=..., secret=..., password=... in query strings and messages
    (re.compile(r"(?i)\b([a-z_]*(?:token|secret|password|api_key|apikey|signature)=)[^&\s\"',;]+"), r"\1***"),
    # scheme://user:password@host
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^:/@\s]+:)[^@\s]+@"), r"\1***@"),
]


# Each pattern above matches only where one of these appears (compared case-folded, as the patterns ignore case):
# a text holding none of them has nothing to mask, and most lines (every access line) are let through after one
# casefold() and these substring tests instead of four regular-expression passes. A pattern added above adds its
# marker here (tests/ops/test_logs.py compares redact with the patterns alone over generated texts).
MARKERS = ("authorization", "bearer", "token=", "secret=", "password=", "api_key=", "apikey=", "signature=", "://")


def redact(text: str) -> str:
    """``text`` with credentials masked."""
    folded = text.casefold()
    if not any(m in folded for m in MARKERS):
        return text
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


class JsonFormatter(logging.Formatter):
    FIELDS = ("request_id", "table_id", "version", "outcome", "duration_ms", "method", "path", "status")

    _second: tuple[int, str] = (-1, "")  # the last second formatted, and its text (one strftime a second)

    def format(self, record: logging.LogRecord) -> str:
        whole = int(record.created)
        if self._second[0] != whole:
            self._second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
        out = {
            "ts": f"{self._second[1]}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,  # which worker of `serve --workers N`
        }
        for f in self.FIELDS:
            v = getattr(record, f, None)
            if v is not None:
                out[f] = v
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return redact(orjson.dumps(out, default=str).decode())


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        rid = getattr(record, "request_id", None)
        return redact(f"{line} [request {rid}]" if rid else line)


def setup_logging(level: str = "INFO", fmt: str = "auto") -> None:
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
    from coordinator.security.tokens import RedactTokens

    handler.addFilter(RedactTokens())
    # Nothing this service writes names the source line, thread or multiprocessing name of a record: leave their
    # lookups out (the logging HOWTO's "Optimization"; a frame walk per access line was 0.7% of a busy worker).
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
