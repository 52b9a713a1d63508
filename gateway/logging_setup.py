"""Logging for the server process: one root handler, secrets redacted.

Credentials may reach a log line by way of a URL (``?api_key=``, ``?ticket=``,
``?pin=`` in uvicorn's access log) or a header dump. The filter sits on the
handler, so it applies to every logger that propagates to the root, uvicorn's
included, and rewrites the formatted message before it is written.
"""

from __future__ import annotations

import logging

from auth.redact import SecretFilter


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
        logger.disabled = False  # an earlier dictConfig in this process may have disabled it
        logger.setLevel(logging.NOTSET)  # uvicorn.Config sets the level again from log_level
