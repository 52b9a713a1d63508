"""The one error table: its copy in docs/protocol.md, the auth codes in it, the
translation of an error to HTTP, event and close, and safe close reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from auth import codes as auth_codes
from auth.policy import DETAIL_CODES
from gateway.errors import (
    CODES,
    ENDS,
    MAX_CLOSE_REASON_BYTES,
    BadMessage,
    GatewayError,
    OverCapacity,
    Unavailable,
    close_code_for,
    close_reason,
    markdown_table,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_protocol_doc_carries_the_table_as_generated():
    doc = (ROOT / "docs" / "protocol.md").read_text()
    assert markdown_table() in doc, "docs/protocol.md's code table is stale: python -m gateway.errors prints it"


def test_every_code_the_doc_names_exists_and_every_code_is_documented():
    doc = (ROOT / "docs" / "protocol.md").read_text()
    section = doc.split("## Machine codes", 1)[1].split("\n## ", 1)[0]  # up to the next section
    documented = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}
    assert documented == set(CODES)


def test_every_auth_code_is_a_row_with_its_status():
    assert set(auth_codes.ALL) <= set(CODES)
    statuses = {auth_codes.PIN_REQUIRED: 401, auth_codes.API_KEY_REQUIRED: 401, auth_codes.LOOPBACK_REQUIRED: 403,
                auth_codes.ADMIN_REQUIRED: 403, auth_codes.ORIGIN_REJECTED: 403, auth_codes.TOO_MANY_ATTEMPTS: 429}
    assert {code: CODES[code].http_status for code in statuses} == statuses
    assert {CODES[code].close_code for code in statuses} == {1008}
    assert set(DETAIL_CODES.values()) <= set(CODES)


def test_an_error_becomes_a_response_an_event_and_a_close_code():
    exc = OverCapacity("too many TTS sessions (limit 1); try again later")
    response = exc.to_response()
    assert (response.status_code, response.headers["retry-after"], response.body) == (
        503, "5", b'{"detail":"too many TTS sessions (limit 1); try again later","code":"over_capacity"}')
    assert exc.to_event() == {"type": "error", "code": "over_capacity", "retryable": True,
                              "message": "too many TTS sessions (limit 1); try again later"}
    assert exc.close_code == 1013


def test_event_only_codes_that_refuse_a_socket_close_by_retryability():
    assert BadMessage("x").close_code == 1011  # not retryable: a server-side refusal
    assert GatewayError("x", code="asr_timeout").close_code == 1013  # retryable


def test_loading_and_missing_engines_have_distinct_codes():
    loading = Unavailable("engine pocket is still loading", code="engine_loading")
    missing = Unavailable("weights not found")
    assert (loading.close_code, loading.retryable) == (1013, True)
    assert (missing.close_code, missing.retryable) == (1011, False)


def test_an_unknown_code_is_a_programming_error():
    with pytest.raises(ValueError) as info:
        GatewayError("x", code="no_such_code")
    assert str(info.value) == "'no_such_code' is not a code of gateway.errors.CODES"


@pytest.mark.parametrize("text", ["ü" * 100, "a" * 122 + "é", "日本語のテキスト" * 10, "plain ascii " * 20, ""])
def test_close_reasons_fit_a_close_frame_without_splitting_a_character(text):
    reason = close_reason(text)
    data = reason.encode("utf-8")
    assert len(data) <= MAX_CLOSE_REASON_BYTES
    assert text.startswith(reason)
    assert len(text.encode("utf-8")) <= MAX_CLOSE_REASON_BYTES or len(data) > MAX_CLOSE_REASON_BYTES - 4


def test_a_close_is_named_for_what_happened_and_its_code_comes_from_the_table():
    named = {name: close_code_for(name) for name in
             ("normal_end", "going_away", "idle_timeout", "too_large", "bad_request", "over_capacity",
              "internal_error", "events_overflowed", "policy_violation")}
    assert named == {"normal_end": 1000, "going_away": 1001, "idle_timeout": 4408, "too_large": 1009,
                     "bad_request": 4400, "over_capacity": 1013, "internal_error": 1011, "events_overflowed": 1011,
                     "policy_violation": 1008}


def test_an_end_is_never_also_an_error_code():
    assert not set(ENDS) & set(CODES)


@pytest.mark.parametrize("name", ["bad_message", "no_such_close"])
def test_a_name_that_closes_nothing_is_a_programming_error(name):
    with pytest.raises(ValueError) as info:
        close_code_for(name)
    assert str(info.value) == (f"{name!r} is neither an end of gateway.errors.ENDS nor a code that closes a socket")


def test_every_close_code_sent_is_in_the_protocol_docs_close_table():
    doc = (ROOT / "docs" / "protocol.md").read_text()
    table = doc.split("### Close codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(line.split("|")[1]) for line in table.splitlines() if line.startswith(("| 1", "| 4"))}
    sent = {row.close_code for row in CODES.values() if row.close_code is not None}
    assert sent | {end.close_code for end in ENDS.values()} == documented
