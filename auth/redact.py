"""Keeping credentials out of logs.

``?api_key=``, ``?ticket=`` and ``?pin=`` travel in URLs (a browser cannot set
headers on a WebSocket), and access logs print URLs; a header dump can carry
``Authorization``, ``X-Voxgate-Pin``, ElevenLabs' ``xi-api-key`` or a key offered
as a WebSocket subprotocol (``Sec-WebSocket-Protocol``). ``SecretFilter`` masks those values in
the formatted message of every record. The server installs it on its one root
log handler (gateway/logging_setup.py), so uvicorn's loggers are covered too.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

SECRET_PARAMS = frozenset({"api_key", "ticket", "pin", "token", "authorization", "xi_api_key"})
# a resume token (/v1/dictation, /v1/tts) is a bearer secret too, but only those routes take it
LOGGED_SECRET_PARAMS = SECRET_PARAMS | {"resume"}
SECRET_HEADERS = ("authorization", "x-api-key", "xi-api-key", "x-voxgate-pin", "cookie", "sec-websocket-protocol")
MASK = "***"
# Every name=value pair of a query string. Names are compared after percent- and
# plus-decoding, the way the gateway's query parser reads them, so ``api%5Fkey``
# (which that parser accepts as ``api_key``) is masked too.
_QUERY_PAIR = re.compile(r"([?&])([^=&\s\"'#]+)=([^&\s\"'#]*)")
_HEADER = re.compile(r"(?i)\b((?:" + "|".join(SECRET_HEADERS) + r")['\"]?\s*[:=,]\s*['\"]?)[^'\"\r\n]+")


def _mask_pair(match: re.Match[str]) -> str:
    name = unquote_plus(match.group(2)).strip().lower()
    if name in LOGGED_SECRET_PARAMS:
        return f"{match.group(1)}{match.group(2)}={MASK}"
    return match.group(0)


def redact_secrets(text: str) -> str:
    """``text`` with secret query-parameter and header values masked."""
    text = _QUERY_PAIR.sub(_mask_pair, text)
    return _HEADER.sub(lambda m: m.group(1) + MASK, text)


class SecretFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_secrets(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
