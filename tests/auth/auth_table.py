"""The decision table of AUTH.md as data, shared by the HTTP and WebSocket tests.

A row is (mode, client, route class, credential, expected). ``expected`` is
``allow(kind)`` or ``refuse(status, detail)``; over a WebSocket a refusal is
close 1008 with the same detail. Credentials are named; ``present`` turns a
name into headers and query parameters for a running Harness.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from auth import AuthConfig
from tests.auth.auth_harness import KEY, Harness

PIN_REQUIRED = "PIN required"
KEY_REQUIRED = "API key required"
LOOPBACK_REQUIRED = "loopback origin required"
ADMIN_GATE = "loopback origin or admin API key required"
ORIGIN_REJECTED = "browser origin rejected"
TOO_MANY = "Too many authentication attempts"

# The machine code each refusal carries next to its exact detail.
DETAIL_CODE = {
    PIN_REQUIRED: "pin_required",
    KEY_REQUIRED: "api_key_required",
    LOOPBACK_REQUIRED: "loopback_required",
    ADMIN_GATE: "admin_required",
    ORIGIN_REJECTED: "origin_rejected",
    TOO_MANY: "too_many_attempts",
}


def body(detail: str) -> dict[str, str]:
    """The JSON body of an auth refusal."""
    return {"detail": detail, "code": DETAIL_CODE[detail]}

TRUSTED_NET = ipaddress.ip_network("203.0.113.0/24")


@dataclass(frozen=True)
class Mode:
    config: AuthConfig
    pin: bool = False  # LAN sharing on (a live PIN)


MODES = {
    "local": Mode(AuthConfig()),
    "local+key": Mode(AuthConfig(api_key=KEY)),
    "local+pin": Mode(AuthConfig(), pin=True),
    "server+key": Mode(AuthConfig(server_mode=True, api_key=KEY)),
    "server+pin": Mode(AuthConfig(server_mode=True), pin=True),
    "server+key+pin": Mode(AuthConfig(server_mode=True, api_key=KEY), pin=True),
    "server+anonymous": Mode(AuthConfig(server_mode=True, allow_anonymous=True)),
    "server+key+trusted": Mode(AuthConfig(server_mode=True, api_key=KEY, trusted_networks=(TRUSTED_NET,))),
    "server+pin+trusted": Mode(AuthConfig(server_mode=True, trusted_networks=(TRUSTED_NET,)), pin=True),
}


@dataclass(frozen=True)
class Expect:
    status: int | None  # None: allowed
    detail: str = ""
    principal: str = ""


def allow(kind: str) -> Expect:
    return Expect(None, principal=kind)


def refuse(status: int, detail: str) -> Expect:
    return Expect(status, detail)


# (mode, client, route, credential, expected)
ROWS: list[tuple[str, str, str, str, Expect]] = []


def rows(mode: str, client: str, route: str, table: dict[str, Expect]) -> None:
    for credential, expected in table.items():
        ROWS.append((mode, client, route, credential, expected))


KEY_CREDENTIALS = ("bearer_key", "bearer_key_lowercase", "token_key", "x_api_key", "query_api_key", "xi_api_key",
                   "query_authorization")
SESSION_CREDENTIALS = ("session_bearer", "session_cookie")
PIN_CREDENTIALS = ("pin_header", "pin_cookie")
INVALID_KEYLIKE = ("bad_bearer", "bad_token", "bad_x_api_key", "bad_query_api_key", "bad_session_cookie", "basic_auth",
                   "bad_xi_api_key", "bad_query_authorization")
INVALID_PIN = ("bad_pin_header", "bad_pin_cookie")

# ---- loopback may everything, in every mode, with or without a credential
for _mode in MODES:
    rows(_mode, "local", "consume", {"none": allow("loopback"), "bad_bearer": allow("loopback")})
    rows(_mode, "local", "admin", {"none": allow("loopback"), "bad_bearer": allow("loopback")})

# ---- local mode, nothing configured: no credential can help
rows("local", "remote", "consume", {
    "none": refuse(403, LOOPBACK_REQUIRED),
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_KEYLIKE},  # an invalid credential is still final
    **{c: refuse(403, LOOPBACK_REQUIRED) for c in INVALID_PIN},  # no PIN exists
})
rows("local", "remote", "admin", {"none": refuse(403, LOOPBACK_REQUIRED), "bad_bearer": refuse(403, LOOPBACK_REQUIRED)})

# ---- local mode with a key: consume with the key, admin loopback only whatever is presented
_key_consume = {
    "none": refuse(401, KEY_REQUIRED),
    **{c: allow("api_key") for c in KEY_CREDENTIALS},
    **{c: allow("session") for c in SESSION_CREDENTIALS},
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_KEYLIKE},
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_PIN},  # no PIN exists; the key can help
}
rows("local+key", "remote", "consume", _key_consume)
rows("local+key", "remote", "admin", {
    "none": refuse(403, LOOPBACK_REQUIRED),
    **{c: refuse(403, LOOPBACK_REQUIRED) for c in KEY_CREDENTIALS + SESSION_CREDENTIALS},
    "bad_bearer": refuse(403, LOOPBACK_REQUIRED),
})

# ---- local mode sharing a PIN
rows("local+pin", "remote", "consume", {
    "none": refuse(401, PIN_REQUIRED),
    **{c: allow("pin") for c in PIN_CREDENTIALS},
    "pin_session_bearer": allow("pin_session"),
    **{c: refuse(401, PIN_REQUIRED) for c in INVALID_PIN},
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_KEYLIKE},
})
rows("local+pin", "remote", "admin", {
    "none": refuse(403, LOOPBACK_REQUIRED),
    **{c: refuse(403, LOOPBACK_REQUIRED) for c in PIN_CREDENTIALS},
})

# ---- server mode with a key: remote admin with the key or a session minted from it
rows("server+key", "remote", "consume", _key_consume)
rows("server+key", "remote", "admin", {
    "none": refuse(403, ADMIN_GATE),
    **{c: allow("api_key") for c in KEY_CREDENTIALS},
    **{c: allow("session") for c in SESSION_CREDENTIALS},
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_KEYLIKE},
    **{c: refuse(403, ADMIN_GATE) for c in INVALID_PIN},  # a PIN can never open admin
})

# ---- server mode, PIN only
rows("server+pin", "remote", "consume", {
    "none": refuse(401, PIN_REQUIRED),
    **{c: allow("pin") for c in PIN_CREDENTIALS},
    "pin_session_bearer": allow("pin_session"),
    **{c: refuse(401, PIN_REQUIRED) for c in INVALID_PIN},
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_KEYLIKE},
})
rows("server+pin", "remote", "admin", {
    "none": refuse(403, LOOPBACK_REQUIRED),
    **{c: refuse(403, LOOPBACK_REQUIRED) for c in PIN_CREDENTIALS},
    "pin_session_bearer": refuse(403, LOOPBACK_REQUIRED),
})

# ---- server mode, key and PIN: with no credential the PIN is asked for
rows("server+key+pin", "remote", "consume", {
    "none": refuse(401, PIN_REQUIRED),
    **{c: allow("api_key") for c in KEY_CREDENTIALS},
    **{c: allow("session") for c in SESSION_CREDENTIALS},
    **{c: allow("pin") for c in PIN_CREDENTIALS},
    "pin_session_bearer": allow("pin_session"),
    **{c: refuse(401, PIN_REQUIRED) for c in INVALID_PIN},
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_KEYLIKE},
})
rows("server+key+pin", "remote", "admin", {
    "none": refuse(403, ADMIN_GATE),
    **{c: allow("api_key") for c in KEY_CREDENTIALS},
    **{c: allow("session") for c in SESSION_CREDENTIALS},
    **{c: refuse(403, ADMIN_GATE) for c in PIN_CREDENTIALS},
    "pin_session_bearer": refuse(403, ADMIN_GATE),
    "bad_bearer": refuse(401, KEY_REQUIRED),
})

# ---- server mode, nothing configured, --allow-anonymous
rows("server+anonymous", "remote", "consume", {
    "none": allow("anonymous"),
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_KEYLIKE},  # no fallback to anonymous
})
rows("server+anonymous", "remote", "admin", {
    "none": refuse(403, LOOPBACK_REQUIRED),
    "bad_bearer": refuse(403, LOOPBACK_REQUIRED),
})

# ---- trusted networks: consume without a credential from inside, never admin
rows("server+key+trusted", "trusted", "consume", {
    "none": allow("trusted_network"),
    **{c: allow("api_key") for c in KEY_CREDENTIALS},
    **{c: refuse(401, KEY_REQUIRED) for c in INVALID_KEYLIKE},  # no fallback to the network
})
rows("server+key+trusted", "trusted", "admin", {"none": refuse(403, ADMIN_GATE), "bearer_key": allow("api_key")})
rows("server+key+trusted", "remote", "consume", {"none": refuse(401, KEY_REQUIRED), "bearer_key": allow("api_key")})
rows("server+pin+trusted", "trusted", "consume", {
    "none": allow("trusted_network"),
    **{c: allow("pin") for c in PIN_CREDENTIALS},
    **{c: refuse(401, PIN_REQUIRED) for c in INVALID_PIN},  # no fallback to the network
})
rows("server+pin+trusted", "trusted", "admin", {"none": refuse(403, LOOPBACK_REQUIRED)})
rows("server+pin+trusted", "remote", "consume", {"none": refuse(401, PIN_REQUIRED)})


@dataclass(frozen=True)
class Presented:
    headers: dict[str, str]
    query: str  # "" or "name=value"


def present(h: Harness, credential: str, *, pin: str | None) -> Presented:
    """Headers and query parameters that present ``credential`` to ``h``."""
    def bad(value: str) -> str:
        h.secrets.append(value)
        return value

    if credential == "none":
        return Presented({}, "")
    if credential == "bearer_key":
        return Presented({"Authorization": f"Bearer {KEY}"}, "")
    if credential == "bearer_key_lowercase":
        return Presented({"authorization": f"bearer {KEY}"}, "")
    if credential == "token_key":
        return Presented({"Authorization": f"Token {KEY}"}, "")
    if credential == "bad_token":
        return Presented({"Authorization": f"token {bad(KEY + 'y')}"}, "")
    if credential == "x_api_key":
        return Presented({"X-API-Key": KEY}, "")
    if credential == "query_api_key":
        return Presented({}, f"api_key={KEY}")
    if credential == "xi_api_key":  # ElevenLabs' header
        return Presented({"xi-api-key": KEY}, "")
    if credential == "query_authorization":  # ElevenLabs' query form of a bearer token
        return Presented({}, f"authorization={KEY}")
    if credential == "bad_xi_api_key":
        return Presented({"xi-api-key": bad("not-the-key-3")}, "")
    if credential == "bad_query_authorization":
        return Presented({}, f"authorization={bad('not-the-key-4')}")
    if credential == "session_bearer":
        return Presented({"Authorization": f"Bearer {h.key_session()}"}, "")
    if credential == "session_cookie":
        return Presented({"Cookie": f"vg_session={h.key_session()}"}, "")
    if credential == "pin_session_bearer":
        assert pin is not None
        return Presented({"Authorization": f"Bearer {h.pin_session(pin)}"}, "")
    if credential == "pin_header":
        assert pin is not None
        return Presented({"X-Voxgate-Pin": pin}, "")
    if credential == "pin_cookie":
        assert pin is not None
        return Presented({"Cookie": f"vg_pin={pin}"}, "")
    if credential == "bad_bearer":
        return Presented({"Authorization": f"Bearer {bad(KEY + 'x')}"}, "")
    if credential == "bad_x_api_key":
        return Presented({"X-API-Key": bad("not-the-key-1")}, "")
    if credential == "bad_query_api_key":
        return Presented({}, f"api_key={bad('not-the-key-2')}")
    if credential == "bad_session_cookie":
        return Presented({"Cookie": f"vg_session={bad('vgs_forged-session-token')}"}, "")
    if credential == "basic_auth":
        return Presented({"Authorization": "Basic dXNlcjpwYXNz"}, "")
    if credential in ("bad_pin_header", "bad_pin_cookie"):
        wrong = "000000" if pin != "000000" else "111111"
        if credential == "bad_pin_header":
            return Presented({"X-Voxgate-Pin": wrong}, "")
        return Presented({"Cookie": f"vg_pin={wrong}"}, "")
    raise AssertionError(f"unknown credential {credential!r}")


def row_id(row: tuple) -> str:
    mode, client, route, credential, _ = row
    return f"{mode}-{client}-{route}-{credential}"
