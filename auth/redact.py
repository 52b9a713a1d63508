"""Keeping query-string secrets out of access logs.

``?api_key=`` and ``?ticket=`` travel in URLs (a browser cannot set headers on
a WebSocket), and access logs print URLs. ``QuerySecretFilter`` masks their
values in every string argument of a log record; the CLI installs it on the
access logger (``logging.getLogger("uvicorn.access")``).
"""

from __future__ import annotations

import logging
import re

SECRET_PARAMS = ("api_key", "ticket", "pin")
MASK = "***"
_PATTERN = re.compile(r"(?i)([?&](?:" + "|".join(SECRET_PARAMS) + r")=)[^&\s\"']*")


def redact_query_secrets(text: str) -> str:
    """``text`` with the values of secret query parameters masked."""
    return _PATTERN.sub(lambda m: m.group(1) + MASK, text)


class QuerySecretFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_query_secrets(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact_query_secrets(a) if isinstance(a, str) else a for a in record.args)
        return True
