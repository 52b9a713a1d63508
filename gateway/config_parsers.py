"""The parsers of gateway/config.py's options: each takes the raw string of a
``VOXGATE_*`` variable (or CLI flag) and returns the typed value, or raises
ValueError saying why not (config.py adds the variable's name)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from auth.hosts import normalize_pattern

N = TypeVar("N", int, float)


def _bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("is not a boolean (use 1/0, true/false, yes/no, on/off)")


def _in_range(convert: Callable[[str], N], not_a: str, lo: N, hi: N) -> Callable[[str], N]:
    """A parser of a number ``convert`` reads (else ``not_a``), from ``lo`` to ``hi``."""
    def parse(raw: str) -> N:
        try:
            value = convert(raw.strip())
        except ValueError:
            raise ValueError(not_a) from None
        if not lo <= value <= hi:
            raise ValueError(f"is out of range ({lo}..{hi})")
        return value

    return parse


def _int_range(lo: int, hi: int) -> Callable[[str], int]:
    return _in_range(int, "is not an integer", lo, hi)


def _float_range(lo: float, hi: float) -> Callable[[str], float]:
    return _in_range(float, "is not a number", lo, hi)


def _str(raw: str) -> str:
    return raw.strip()


def _opt_str(raw: str) -> str | None:
    return raw.strip() or None


def _path(raw: str) -> Path:
    if not raw.strip():
        raise ValueError("is empty")
    return Path(raw.strip()).expanduser()


def _opt_path(raw: str) -> Path | None:
    return Path(raw.strip()).expanduser() if raw.strip() else None


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise ValueError(f"must be one of: {', '.join(allowed)}")
        return value

    return parse


def _csv(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _networks(raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    out = []
    for part in _csv(raw):
        try:
            out.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"has {part!r}, which is not an IP network (CIDR like 192.168.1.0/24)") from None
    return tuple(out)


def _origins(raw: str) -> tuple[str, ...]:
    out = []
    for part in _csv(raw):
        if not (part.startswith(("http://", "https://"))) or part.count("/") > 2:
            raise ValueError(f"has {part!r}; an origin is scheme://host[:port] with no path")
        out.append(part.lower())
    return tuple(out)


def _hosts(raw: str) -> tuple[str, ...]:
    return tuple(normalize_pattern(part) for part in _csv(raw))


def _engines(raw: str) -> tuple[str, ...]:
    known = ("pocket", "piper", "omnivoice", "asr")
    values = tuple(v.lower() for v in _csv(raw))
    for value in values:
        if value not in known and value != "none":
            raise ValueError(f"has {value!r}; known engines: {', '.join(known)} (or none)")
    return tuple(v for v in values if v != "none")


def _device(raw: str) -> str:
    value = raw.strip().lower()
    if value in ("auto", "cpu", "cuda", "mps") or (value.startswith("cuda:") and value[5:].isdigit()):
        return value
    raise ValueError("must be auto, cpu, cuda, cuda:N or mps")


def _paths(raw: str) -> tuple[Path, ...]:
    return tuple(Path(part).expanduser() for part in _csv(raw))


def _wyoming_uri(raw: str) -> str | None:
    value = raw.strip()
    if not value:
        return None
    if not value.startswith("tcp://"):
        raise ValueError("must be tcp://HOST:PORT (the only Wyoming transport served)")
    try:
        parse_tcp_uri(value)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return value


def parse_tcp_uri(uri: str) -> tuple[str, int]:
    """(host, port) of ``tcp://HOST:PORT`` (IPv6 hosts in brackets); ValueError saying why not."""
    rest = uri.removeprefix("tcp://")
    host, sep, port_text = rest.rpartition(":")
    if not sep or not host or "/" in rest:
        raise ValueError("must be tcp://HOST:PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"has port {port_text!r}, which is not an integer") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"has port {port}, out of range (0..65535)")
    return host.strip("[]"), port
