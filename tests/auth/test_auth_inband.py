"""AUTH.md's decision table on ElevenLabs' sockets, whose key may come in the
first message (``xi_api_key``) instead of the handshake.

Every consume row runs twice on the real app: with the credential at the
handshake (then a first message without one), and, for the key-like
credentials, with the credential in the first message only. The in-band
answer must be the table's own: where the handshake alone is refused with a
detail no credential can change, that refusal; on loopback, allowed whatever
is sent; otherwise exactly the row of the same credential at the handshake.
Allowed means the socket served the client (a fake engine: its ``isFinal``
and close 1000); refused, close 1008 with the detail and nothing before it.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from gateway.admission import PendingSockets
from gateway.fronts.elevenlabs import sockets
from tests.auth.auth_harness import KEY
from tests.auth.auth_table import KEY_REQUIRED, MODES, PIN_REQUIRED, ROWS, TOO_MANY, Expect, present, row_id
from tests.gateway.fakes import FakeTtsEngine

PATHS = ("/v1/text-to-speech/v1d/stream-input", "/v1/text-to-speech/v1d/multi-stream-input")
TABLE = {(mode, client, credential): expected for mode, client, route, credential, expected in ROWS
         if route == "consume"}
# the credentials a first message can carry, and how it carries them
IN_BAND = {
    "bearer_key": lambda h: {"xi_api_key": KEY},
    "x_api_key": lambda h: {"xi-api-key": KEY},
    "xi_api_key": lambda h: {"xi_api_key": KEY},
    "query_authorization": lambda h: {"authorization": KEY},
    "session_bearer": lambda h: {"authorization": f"Bearer {h.key_session()}"},
    "bad_bearer": lambda h: {"xi_api_key": _bad(h, KEY + "x")},
    "bad_xi_api_key": lambda h: {"xi_api_key": _bad(h, "not-the-key-5")},
    "bad_query_authorization": lambda h: {"authorization": _bad(h, "not-the-key-6")},
    "bad_session_cookie": lambda h: {"authorization": f"Bearer {_bad(h, 'vgs_forged-session-token')}"},
}


def _bad(h, value: str) -> str:
    h.secrets.append(value)
    return value


def in_band_expectation(mode: str, client: str, credential: str) -> Expect | None:
    none = TABLE.get((mode, client, "none"))
    same = TABLE.get((mode, client, credential))
    if none is None:
        return None
    if client == "local":
        return none  # loopback: allowed, whatever the message carries
    if none.status is not None and none.detail not in (PIN_REQUIRED, KEY_REQUIRED):
        return none  # refused at the handshake: no credential can help, the message is never read
    return same


def start(make, mode: str):
    m = MODES[mode]
    h = make(m.config, tts={"pocket": FakeTtsEngine()})
    return h, (h.enable_pin() if m.pin else None)


def answer(ws, path: str, bos: dict) -> list:
    """Open the stream with ``bos`` and end it at once; everything the socket said, its close last."""
    multi = path.endswith("multi-stream-input")
    ws.send_json({**bos, "context_id": "a"} if multi else bos)
    ws.send_json({"close_socket": True} if multi else {"text": ""})
    said = []
    while True:
        message = ws.receive()
        if message["type"] == "websocket.close":
            return [*said, ("close", message["code"], message.get("reason"))]
        said.append(json.loads(message["text"]))


def check(said: list, expected: Expect, path: str) -> None:
    if expected.status is not None:
        assert said == [("close", 1008, expected.detail)]
    elif path.endswith("multi-stream-input"):
        assert said == [{"isFinal": True, "contextId": "a"}, ("close", 1000, "")]
    else:
        assert said == [{"isFinal": True}, ("close", 1000, "")]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("row", [r for r in ROWS if r[2] == "consume"], ids=row_id)
def test_credential_at_the_handshake(real_harness, path, row) -> None:
    mode, client, _, credential, expected = row
    h, pin = start(real_harness, mode)
    p = present(h, credential, pin=pin)
    url = path + (f"?{p.query}" if p.query else "")
    with h.client(client).websocket_connect(url, headers=p.headers) as ws:
        check(answer(ws, path, {"text": " "}), expected, path)


CASES = [pytest.param(mode, client, credential, expected, id=f"{mode}-{client}-{credential}")
         for (mode, client, credential) in sorted(TABLE) if credential in IN_BAND
         for expected in [in_band_expectation(mode, client, credential)] if expected is not None]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("mode", "client", "credential", "expected"), CASES)
def test_credential_in_the_first_message(real_harness, path, mode, client, credential, expected) -> None:
    h, _ = start(real_harness, mode)
    bos = {"text": " ", "voice_settings": {"speed": 1.0}, **IN_BAND[credential](h)}
    with h.client(client).websocket_connect(path) as ws:
        check(answer(ws, path, bos), expected, path)


def test_the_in_band_cases_cover_every_mode_and_both_answers() -> None:
    modes = {c.values[0] for c in CASES}
    answers = {c.values[3].status for c in CASES}
    assert modes == set(MODES) and answers == {None, 401, 403}


def test_failed_in_band_attempts_count_towards_the_lockout(real_harness) -> None:
    h, _ = start(real_harness, "server+key")
    for n in range(10):
        with h.remote.websocket_connect(PATHS[0]) as ws:
            assert answer(ws, PATHS[0], {"text": " ", "xi_api_key": _bad(h, f"wrong-{n}")}) == [
                ("close", 1008, KEY_REQUIRED)]
    with h.remote.websocket_connect(PATHS[1]) as ws:  # refused at the handshake now, whatever follows
        assert answer(ws, PATHS[1], {"text": " ", "xi_api_key": KEY}) == [("close", 1008, TOO_MANY)]


def test_a_pending_socket_that_sends_nothing_is_closed_with_the_detail(real_harness) -> None:
    h = real_harness(MODES["server+key+pin"].config, tts={"pocket": FakeTtsEngine()}, auth_wait_s=0.5)
    h.enable_pin()
    with h.remote.websocket_connect(PATHS[0]) as ws:
        message = ws.receive()
        assert (message["type"], message["code"], message["reason"]) == ("websocket.close", 1008, PIN_REQUIRED)


def test_a_binary_first_message_carries_no_credential(real_harness) -> None:
    h, _ = start(real_harness, "server+key")
    with h.remote.websocket_connect(PATHS[1]) as ws:
        ws.send_bytes(b"\0")
        message = ws.receive()
        assert (message["code"], message["reason"]) == (1008, KEY_REQUIRED)


def test_a_later_context_with_a_wrong_key_closes_the_socket(real_harness) -> None:
    """An invalid credential is final wherever it comes: here in a second context's first message."""
    h, _ = start(real_harness, "server+key")
    with h.remote.websocket_connect(PATHS[1], headers={"xi-api-key": KEY}) as ws:
        ws.send_json({"text": " ", "context_id": "a"})
        ws.send_json({"text": " ", "context_id": "b", "xi_api_key": _bad(h, "not-the-key-7")})
        message = ws.receive()
        assert (message["type"], message["code"], message["reason"]) == ("websocket.close", 1008, KEY_REQUIRED)


@pytest.mark.parametrize("path", PATHS)
def test_a_first_message_over_the_pre_auth_cap_closes_1009_unparsed(real_harness, path, monkeypatch) -> None:
    parsed: list[int] = []
    real = sockets.credential_of
    monkeypatch.setattr(sockets, "credential_of", lambda raw: parsed.append(len(raw)) or real(raw))
    h, _ = start(real_harness, "server+key")
    big = json.dumps({"text": " " * 16_000, "xi_api_key": KEY, "voice_settings": {"x": [[]] * 200}})
    with h.remote.websocket_connect(path) as ws:
        ws.send_text(big)
        message = ws.receive()
    assert (message["code"], message["reason"]) == (
        1009, f"first message of {len(big)} bytes; the limit before authentication is 16384")
    assert parsed == []  # refused before its credential was looked for


def test_pending_sockets_are_capped_per_address_and_count_no_more_once_settled(real_harness) -> None:
    h = real_harness(MODES["server+key"].config, tts={"pocket": FakeTtsEngine()}, pending_sockets_per_client=2)
    with h.remote.websocket_connect(PATHS[0]) as first, h.remote.websocket_connect(PATHS[0]) as second:
        with h.remote.websocket_connect(PATHS[0]) as third:
            message = third.receive()
            assert (message["code"], message["reason"]) == (
                1013, "too many unauthenticated sockets from this address (limit 2); retry later")
        assert answer(first, PATHS[0], {"text": " ", "xi_api_key": KEY}) == [{"isFinal": True}, ("close", 1000, "")]
        with h.remote.websocket_connect(PATHS[0]) as fourth:  # the first one settled: room for one more
            assert answer(fourth, PATHS[0], {"text": " ", "xi_api_key": KEY}) == [
                {"isFinal": True}, ("close", 1000, "")]
        assert answer(second, PATHS[0], {"text": " ", "xi_api_key": KEY}) == [{"isFinal": True}, ("close", 1000, "")]


def test_a_pending_socket_that_leaves_or_is_refused_counts_no_more(real_harness) -> None:
    h = real_harness(MODES["server+key"].config, tts={"pocket": FakeTtsEngine()}, pending_sockets_per_client=1)
    with h.remote.websocket_connect(PATHS[0]):
        pass  # left without a word
    with h.remote.websocket_connect(PATHS[0]) as ws:
        assert answer(ws, PATHS[0], {"text": " ", "xi_api_key": _bad(h, "not-the-key-8")}) == [
            ("close", 1008, KEY_REQUIRED)]
    with h.remote.websocket_connect(PATHS[1]) as ws:
        assert answer(ws, PATHS[1], {"text": " ", "xi_api_key": KEY}) == [
            {"isFinal": True, "contextId": "a"}, ("close", 1000, "")]


def test_pending_sockets_are_capped_in_all_whatever_the_address() -> None:
    pending = PendingSockets(limit=2, per_client_limit=2)
    assert [pending.admit("198.51.100.1"), pending.admit("198.51.100.2")] == [None, None]
    assert pending.admit("198.51.100.3") == "too many unauthenticated sockets on this server (limit 2); retry later"
    pending.release("198.51.100.1")
    assert pending.admit("198.51.100.3") is None
    assert (pending.total, pending.by_client) == (2, {"198.51.100.2": 1, "198.51.100.3": 1})


# ---- units: the credential forms, the pending decision, settle


def scope(client=("198.51.100.9", 1), headers=(), query=b"", subprotocols=(), type_="websocket") -> dict:
    return {"type": type_, "client": client, "query_string": query, "path": PATHS[0],
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers], "subprotocols": list(subprotocols)}


@pytest.mark.parametrize(("s", "kind", "value", "answer"), [
    (scope(headers=[("xi-api-key", " k1 ")]), "api_key", "k1", None),
    (scope(query=b"authorization=Bearer%20t1"), "bearer", "t1", None),
    (scope(query=b"authorization=k2"), "bearer", "k2", None),
    (scope(subprotocols=["realtime", "openai-insecure-api-key.k3", "openai-beta.realtime-v1"]), "bearer", "k3",
     "realtime"),
    (scope(subprotocols=["token", "k4"]), "bearer", "k4", "token"),
])
def test_the_vendor_credential_forms(s, kind, value, answer) -> None:
    from auth.credentials import answer_subprotocol, presented_credential

    credential = presented_credential(s)
    assert (credential.kind.value, credential.value, answer_subprotocol(s)) == (kind, value, answer)


def test_an_insecure_key_subprotocol_without_realtime_is_no_credential() -> None:
    from auth.credentials import answer_subprotocol, presented_credential

    s = scope(subprotocols=["openai-insecure-api-key.k5"])
    assert (presented_credential(s), answer_subprotocol(s)) == (None, None)


@pytest.mark.parametrize(("config", "client", "kind", "detail"), [
    ({"api_key": KEY}, ("198.51.100.9", 1), "pending", KEY_REQUIRED),
    ({}, ("198.51.100.9", 1), None, "loopback origin required"),  # no credential can help: refused at once
    ({"api_key": KEY}, ("127.0.0.1", 1), "loopback", ""),
])
def test_an_inband_route_lets_in_pending_only_whom_a_credential_could_help(config, client, kind, detail) -> None:
    from auth import AuthConfig, AuthState
    from auth.access import RouteClass
    from auth.policy import Refusal, decide

    state = AuthState(AuthConfig(**config))
    inband = asyncio.run(decide(scope(client=client), RouteClass.CONSUME_INBAND, state))
    plain = asyncio.run(decide(scope(client=client), RouteClass.CONSUME, state))
    if kind is None:
        assert isinstance(inband, Refusal) and inband == plain and inband.detail == detail
    else:
        assert (inband.kind.value, inband.pending_detail) == (kind, detail)
        assert kind == "loopback" or (isinstance(plain, Refusal) and plain.detail == detail)


def test_settle_judges_and_counts_failures_towards_the_lockout() -> None:
    from auth import AuthConfig, AuthState
    from auth.access import RouteClass
    from auth.credentials import Credential, CredentialKind
    from auth.inband import settle
    from auth.policy import Refusal, decide
    from auth.principal import SCOPE_KEY

    state = AuthState(AuthConfig(api_key=KEY))
    s = scope()

    async def run() -> None:
        s[SCOPE_KEY] = await decide(s, RouteClass.CONSUME_INBAND, state)
        assert await settle(s, state, None) == Refusal(401, KEY_REQUIRED)  # nothing presented: not a failure
        assert (await settle(s, state, Credential(CredentialKind.API_KEY, KEY))).kind.value == "api_key"
        for _ in range(10):
            assert await settle(s, state, Credential(CredentialKind.API_KEY, "wrong")) == Refusal(401, KEY_REQUIRED)
        refusal = await settle(s, state, Credential(CredentialKind.API_KEY, KEY))  # locked out: not even checked
        assert isinstance(refusal, Refusal) and (refusal.status, refusal.detail) == (429, TOO_MANY)

    asyncio.run(run())
