"""What both socket clients share: URL building and credentials."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect

DEFAULT_OPEN_TIMEOUT_S = 10.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
DEFAULT_PING_S = 20.0  # the websockets library's own default interval and timeout


@dataclass(frozen=True)
class Credentials:
    """How the client proves who it is: an API key / session token (sent as a
    Bearer header), a single-use ticket (sent as ``?ticket=``), or a PIN."""

    api_key: str | None = None
    ticket: str | None = None
    pin: str | None = None

    def headers(self) -> dict[str, str]:
        out = {}
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        if self.pin:
            out["X-Voxgate-Pin"] = self.pin
        return out


def ws_url(base_url: str, path: str, params: Mapping[str, object] | None = None, ticket: str | None = None) -> str:
    """``http(s)://host:port`` or ``ws(s)://...`` + path + query -> a ws(s) URL."""
    parts = urlsplit(base_url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss"):
        raise ValueError(f"base URL {base_url!r} must start with http://, https://, ws:// or wss://")
    query = {k: _query_value(v) for k, v in (params or {}).items() if v is not None}
    if ticket:
        query["ticket"] = ticket
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + path, urlencode(query), ""))


def _query_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def open_socket(base_url: str, path: str, params: Mapping[str, object] | None,
                      credentials: Credentials | None,
                      open_timeout_s: float = DEFAULT_OPEN_TIMEOUT_S, *,
                      ping_s: float | None = None) -> ClientConnection:
    """``ping_s``: ping that often and count the connection lost when a ping goes
    unanswered that long (None: the websockets defaults, 20 s each)."""
    creds = credentials or Credentials()
    ping = DEFAULT_PING_S if ping_s is None else ping_s
    return await connect(ws_url(base_url, path, params, creds.ticket), additional_headers=creds.headers(),
                         open_timeout=open_timeout_s, max_size=MAX_MESSAGE_BYTES, ping_interval=ping,
                         ping_timeout=ping)
