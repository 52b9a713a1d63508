"""Logging for the server process: one root handler, secrets redacted.

Credentials may reach a log line by way of a URL (``?api_key=``, ``?ticket=``,
``?pin=`` in uvicorn's access log) or a header dump. The filter sits on the
handler, so it applies to every logger that propagates to the root, uvicorn's
included, and rewrites the formatted message before it is written.
"""

from __future__ import annotations

import logging
import re

_SECRET_QUERY = re.compile(r"(?i)\b(api_key|ticket|pin|token|key)=([^&\s\"']+)")
_SECRET_HEADER = re.compile(r"(?i)\b(authorization|x-api-key|x-voxgate-pin|cookie)(['\"]?\s*[:=,]\s*['\"]?)([^'\"\r\n]+)")


def redact(text: str) -> str:
    text = _SECRET_QUERY.sub(r"\1=***", text)
    return _SECRET_HEADER.sub(r"\1\2***", text)


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
