"""``RedisStore``: the auth state in Redis, shared by every replica.

Each step that must be atomic across replicas is one Lua script (Redis runs a
script alone): a token is put only while its quota counters have room, a
ticket is taken (read and deleted) by exactly one caller, a PIN failure counts
against the PIN it was made for. Expiry times come from the Redis server's
clock (``TIME`` inside the scripts), so replicas with skewed clocks agree.

Keys (all under ``prefix``, default ``voxgate:``; for Redis Cluster give the
prefix a hash tag, e.g. ``{voxgate}:``, so the scripts' keys share a slot):
``tok:<table>:<digest>`` a token's JSON (its value and the counters and tags it
is in), ``cap:<table>:<counter>`` and ``tag:<table>:<tag>`` sorted sets of token
keys scored by expiry, ``fail:<key>`` a sorted set of failure times,
``share`` the live PIN (hash: the sealed record of auth/pin_seal.py, never the
PIN itself; where it is shared; its failures), ``share:gen`` its generation, ``salt``.

Unreachable Redis raises ``StoreUnavailable`` within ``timeout_s``; after a
failure, calls fail at once for ``retry_after_s`` instead of each waiting
for the timeout, so a Redis outage does not slow the requests that do not
need it. Messages name the host and port, never the URL (it may hold a password).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .store import Cap, SharedPin, StoreUnavailable, Window

T = TypeVar("T")

_NOW_MS = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

# KEYS: token, caps..., tags...   ARGV: json, ttl_ms, n_caps, limits...
_PUT = _NOW_MS + """
local ttl = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[1 + i], '-inf', now)
  if redis.call('ZCARD', KEYS[1 + i]) >= tonumber(ARGV[3 + i]) then return i end
end
for i = 2, #KEYS do
  if i > n + 1 then redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now) end
  redis.call('ZADD', KEYS[i], now + ttl, KEYS[1])
  redis.call('PEXPIRE', KEYS[i], ttl)
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
return 0
"""

_FORGET = """
local function forget(key)
  local v = redis.call('GET', key)
  if not v then return false end
  redis.call('DEL', key)
  local d = cjson.decode(v)
  for _, k in ipairs(d['c']) do redis.call('ZREM', k, key) end
  for _, k in ipairs(d['t']) do redis.call('ZREM', k, key) end
  return v
end
"""

# KEYS: token
_TAKE = _FORGET + "return forget(KEYS[1])\n"

# KEYS: tag
_DELETE_TAGGED = _FORGET + """
local count = 0
for _, key in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if forget(key) then count = count + 1 end
end
redis.call('DEL', KEYS[1])
return count
"""

# KEYS: windows...   ARGV: window_ms, unique suffix, keep...
_RECORD_FAILURE = _NOW_MS + """
local window = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  redis.call('ZADD', KEYS[i], now, now .. ':' .. ARGV[2])
  redis.call('ZREMRANGEBYRANK', KEYS[i], 0, -(tonumber(ARGV[2 + i]) + 1))
  redis.call('PEXPIRE', KEYS[i], window)
end
return 1
"""

# KEYS: windows...   ARGV: window_ms   -> {now, {score, ...}, ...} oldest first
_FAILURE_TIMES = _NOW_MS + """
local window = tonumber(ARGV[1])
local out = {now}
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  local times = {}
  local scored = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES')
  for j = 2, #scored, 2 do times[#times + 1] = scored[j] end
  out[#out + 1] = times
end
return out
"""

# KEYS: share, share:gen   ARGV: sealed PIN, host, port, TLS fingerprint
_OPEN_SHARE = """
local g = redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'sealed', ARGV[1], 'host', ARGV[2], 'port', ARGV[3], 'fingerprint', ARGV[4],
           'generation', g, 'failures', 0)
return g
"""

# KEYS: share, share:gen   ARGV: generation or ''
_CLOSE_SHARE = """
local g = redis.call('HGET', KEYS[1], 'generation')
if not g then return 0 end
if ARGV[1] ~= '' and g ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('INCR', KEYS[2])
return 1
"""

# KEYS: share   ARGV: generation
_PIN_FAILURE = """
if redis.call('HGET', KEYS[1], 'generation') ~= ARGV[1] then return 0 end
return redis.call('HINCRBY', KEYS[1], 'failures', 1)
"""


def describe_url(url: str) -> str:
    """``host:port/db`` of a Redis URL, for messages: never the password."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    db = parts.path.lstrip("/") or "0"
    return f"{host}:{port}/{db}" if parts.scheme != "unix" else parts.path


class RedisStore:
    shared = True

    def __init__(self, url: str, prefix: str = "voxgate:", *, timeout_s: float = 1.0,
                 retry_after_s: float = 1.0) -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError:  # pragma: no cover - the [redis] extra is missing
            raise RuntimeError("VOXGATE_REDIS_URL needs the redis package: pip install 'voxgate[redis]'") from None
        from redis.exceptions import RedisError

        self._errors: tuple[type[BaseException], ...] = (RedisError, OSError, TimeoutError)
        self.where = describe_url(url)
        self.prefix = prefix
        self.retry_after_s = retry_after_s
        self._client: Any = aioredis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                              decode_responses=True, health_check_interval=0)
        self._put = self._client.register_script(_PUT)
        self._take = self._client.register_script(_TAKE)
        self._delete_tagged = self._client.register_script(_DELETE_TAGGED)
        self._record_failure = self._client.register_script(_RECORD_FAILURE)
        self._failure_times = self._client.register_script(_FAILURE_TIMES)
        self._open_share = self._client.register_script(_OPEN_SHARE)
        self._close_share = self._client.register_script(_CLOSE_SHARE)
        self._pin_failure = self._client.register_script(_PIN_FAILURE)
        self._down_until = 0.0
        self._salt: bytes | None = None

    async def _call(self, step: Callable[[], Awaitable[T]]) -> T:
        """Run one Redis step; ``StoreUnavailable`` when Redis cannot be reached."""
        if time.monotonic() < self._down_until:
            raise StoreUnavailable(f"the auth store (Redis at {self.where}) is unreachable")
        try:
            return await step()
        except self._errors as exc:
            self._down_until = time.monotonic() + self.retry_after_s
            raise StoreUnavailable(f"the auth store (Redis at {self.where}) is unreachable: "
                                   f"{type(exc).__name__}") from None

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    # ---- tokens

    async def put_token(self, table: str, key: str, value: str, ttl_s: float, caps: Sequence[Cap],
                        tags: Sequence[str] = ()) -> Cap | None:
        cap_keys = [self._key("cap", table, c.counter) for c in caps]
        tag_keys = [self._key("tag", table, t) for t in tags]
        record = json.dumps({"v": value, "c": cap_keys, "t": tag_keys})
        ttl_ms = max(1, round(ttl_s * 1000))
        full = await self._call(lambda: self._put(
            keys=[self._key("tok", table, key), *cap_keys, *tag_keys],
            args=[record, ttl_ms, len(caps), *(c.limit for c in caps)]))
        return caps[int(full) - 1] if int(full) else None

    async def get_token(self, table: str, key: str) -> str | None:
        raw = await self._call(lambda: self._client.get(self._key("tok", table, key)))
        return _value(raw)

    async def take_token(self, table: str, key: str) -> str | None:
        raw = await self._call(lambda: self._take(keys=[self._key("tok", table, key)]))
        return _value(raw)

    async def delete_token(self, table: str, key: str) -> bool:
        return await self.take_token(table, key) is not None

    async def delete_tagged(self, table: str, tag: str) -> int:
        return int(await self._call(lambda: self._delete_tagged(keys=[self._key("tag", table, tag)])))

    # ---- failure windows

    async def record_failure(self, windows: Sequence[Window], window_s: float) -> None:
        if not windows:
            return
        await self._call(lambda: self._record_failure(
            keys=[self._key("fail", w.key) for w in windows],
            args=[max(1, round(window_s * 1000)), secrets.token_hex(4), *(w.keep for w in windows)]))

    async def failure_ages(self, keys: Sequence[str], window_s: float) -> list[list[float]]:
        if not keys:
            return []
        now, *windows = await self._call(lambda: self._failure_times(
            keys=[self._key("fail", k) for k in keys], args=[max(1, round(window_s * 1000))]))
        return [[(int(now) - float(t)) / 1000 for t in times] for times in windows]

    # ---- the LAN-share PIN

    async def current_share(self) -> SharedPin | None:
        fields: dict[str, str] = await self._call(lambda: self._client.hgetall(self._key("share")))
        if not fields.get("sealed"):
            return None
        return SharedPin(fields["sealed"], int(fields["generation"]), fields["host"], int(fields["port"]),
                         fields.get("fingerprint", ""))

    async def share_generation(self) -> int:
        return int(await self._call(lambda: self._client.get(self._key("share", "gen"))) or 0)

    async def open_share(self, sealed: str, host: str, port: int, fingerprint: str = "") -> SharedPin:
        generation = await self._call(lambda: self._open_share(
            keys=[self._key("share"), self._key("share", "gen")], args=[sealed, host, port, fingerprint]))
        return SharedPin(sealed, int(generation), host, port, fingerprint)

    async def close_share(self, if_generation: int | None = None) -> bool:
        closed = await self._call(lambda: self._close_share(
            keys=[self._key("share"), self._key("share", "gen")],
            args=["" if if_generation is None else str(if_generation)]))
        return bool(int(closed))

    async def pin_failure(self, generation: int) -> int:
        return int(await self._call(lambda: self._pin_failure(keys=[self._key("share")], args=[str(generation)])))

    async def binding_salt(self) -> bytes:
        if self._salt is None:
            key = self._key("salt")

            async def shared_salt() -> str:
                await self._client.set(key, secrets.token_hex(16), nx=True)
                return str(await self._client.get(key))

            self._salt = bytes.fromhex(await self._call(shared_salt))
        return self._salt

    async def ping(self) -> None:
        """Raises ``StoreUnavailable`` unless Redis answers."""
        await self._call(lambda: self._client.ping())

    async def aclose(self) -> None:
        await self._client.aclose()


def _value(raw: Any) -> str | None:
    if not raw:
        return None
    value = json.loads(raw)["v"]
    return str(value)
