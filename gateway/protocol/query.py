"""The readers of the query parameters the native sockets share: a boolean
(every front reads its booleans here too), an integer and the sample rate.

Boolean spellings (any case): ``true``/``1``/``yes``/``on`` and ``false``/``0``/``no``/``off``,
the union of what the vendors' clients send and what the native sockets
document; absent or empty means the default. Anything else is a ``BadRequest``
naming the parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from auth.redact import SECRET_PARAMS
from gateway.audio import parse_rate
from gateway.errors import BadRequest

D = TypeVar("D", int, None)


class RateChecked(Protocol):
    def check_rate(self, rate: int) -> None: ...

TRUE_SPELLINGS = ("true", "1", "yes", "on")
FALSE_SPELLINGS = ("false", "0", "no", "off")


def query_bool(query: Mapping[str, str], name: str, default: bool) -> bool:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    low = raw.lower()
    if low in TRUE_SPELLINGS:
        return True
    if low in FALSE_SPELLINGS:
        return False
    raise BadRequest(f"{name}: {raw[:20]!r} is not a boolean (use true or false)")


def query_int(query: Mapping[str, str], name: str, lo: int = 0, hi: int | None = None) -> int | None:
    """An integer from ``lo`` (to ``hi``, when given); None when absent or empty."""
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name}: {raw[:20]!r} is not an integer") from None
    if hi is not None and not lo <= value <= hi:
        raise BadRequest(f"{name}: {value} must be between {lo} and {hi}")
    if value < lo:
        raise BadRequest(f"{name}: {value} must be {lo} or more")
    return value


def query_list(query: Mapping[str, str], name: str) -> list[str]:
    """Every value of a parameter that may be repeated (``keyterm=a&keyterm=b``), in
    order; empty values left out. A plain mapping holds one value per name."""
    getlist = getattr(query, "getlist", None)
    values = list(getlist(name)) if getlist is not None else [query[name]] if name in query else []
    return [v for v in values if v]


def refuse_unknown_params(query: Mapping[str, str], names: tuple[str, ...]) -> None:
    """``BadRequest`` naming the first query parameter that is neither one of
    ``names`` nor a credential (``api_key``, ``ticket``, ...: the auth layer's):
    a parameter the route would not act on is refused, never dropped. (Kept short:
    a socket's close reason holds 123 bytes; the error event before it has it all.)"""
    unknown = sorted(name for name in query if name not in names and name.lower() not in SECRET_PARAMS)
    if unknown:
        raise BadRequest(f"{unknown[0][:40]}: not a parameter here; known: {', '.join(names)}")


def query_rate(query: Mapping[str, str], encoding: RateChecked, default: D) -> int | D:
    """``sample_rate``, a rate ``encoding`` can carry; ``default`` when absent or empty."""
    raw = query.get("sample_rate")
    if not raw:
        return default
    try:
        rate = parse_rate(raw)
        encoding.check_rate(rate)
    except ValueError as exc:
        raise BadRequest(f"sample_rate: {raw[:20]!r} {exc}") from None
    return rate
