"""Every parser of client input, fed anything: it returns a parsed value or raises
the gateway's own error (a ``GatewayError`` with a code of the table, or the
format error its caller turns into one), never anything else."""

from __future__ import annotations

import asyncio
import io
import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from auth import AuthConfig, AuthState, Principal, RouteClass
from auth.body import BodyInvalid, parse_json_object
from auth.policy import Refusal, decide
from engines.asr.framing import FrameError, read_frame, read_frame_async
from gateway.audio import AudioFormatError, read_wav
from gateway.errors import CODES, GatewayError
from gateway.fronts.wyoming.wire import MAX_LINE_BYTES, WireError, read_event
from gateway.protocol import dictation as dictation_protocol
from gateway.protocol import tts as tts_protocol
from gateway.protocol import tts_http
from gateway.protocol.json import parse_body
from tests.fuzz.strategies import JSON_VALUES, messages, queries, wav_files

LIMITS = tts_protocol.TextLimits()


def outcome(call: Callable[[], Any]) -> Any:
    """What ``call`` returns, or the exception it raises (checked by the caller)."""
    try:
        return call()
    except Exception as exc:
        return exc


def assert_clear(result: Any, *, code: str | None = None) -> None:
    """A parsed value, or a ``GatewayError`` of the table with a message (and ``code`` if given)."""
    if isinstance(result, GatewayError):
        assert result.code in CODES and result.message, result
        assert code is None or result.code == code, result
    else:
        assert not isinstance(result, Exception), repr(result)


@given(messages(["speak", "text", "flush", "cancel", "end", "keepalive"]))
def test_tts_socket_messages(raw: str) -> None:
    assert_clear(outcome(lambda: tts_protocol.parse_client_message(raw, LIMITS)))


@given(messages(["finalize", "end", "keepalive"]))
def test_dictation_socket_messages(raw: str) -> None:
    assert_clear(outcome(lambda: dictation_protocol.parse_client_message(raw)))


@given(queries(["engine", "voice", "sample_rate", "encoding"]))
def test_tts_query_parameters(query: dict[str, str]) -> None:
    assert_clear(outcome(lambda: tts_protocol.parse_tts_params(query, "pocket")), code="bad_request")


@given(queries(["sample_rate", "encoding", "language", "interim", "word_timestamps", "silence_ms"]))
def test_dictation_query_parameters(query: dict[str, str]) -> None:
    params = outcome(lambda: dictation_protocol.parse_dictation_params(query))
    assert_clear(params, code="bad_request")
    assert isinstance(params, Exception) or 8000 <= params.sample_rate <= 48000


@given(st.dictionaries(st.sampled_from(["text", "voice", "engine", "format", "sample_rate", "seed", "input",
                                        "model", "response_format"]) | st.text(max_size=6), JSON_VALUES, max_size=6))
@example({"format": []})  # once a 500: the format was looked up in a dict before its type was checked
@example({"input": "0", "response_format": [None]})  # likewise OpenAI's response_format
def test_http_request_bodies(data: dict[str, Any]) -> None:
    assert_clear(outcome(lambda: tts_http.SynthesisRequest.from_dict(data, LIMITS)))
    assert_clear(outcome(lambda: tts_http.SpeechRequest.from_dict(data, LIMITS)))


@given(messages(["x"]).map(str.encode) | st.binary(max_size=200))
def test_raw_json_bodies(raw: bytes) -> None:
    body = outcome(lambda: parse_body(raw))
    assert_clear(body, code="bad_request")
    assert isinstance(body, dict | GatewayError)
    auth_body = outcome(lambda: parse_json_object(raw))
    assert isinstance(auth_body, dict) or (isinstance(auth_body, BodyInvalid) and str(auth_body) in (
        "body is nested too deeply", "body is not valid JSON", "body must be a JSON object")), repr(auth_body)


@given(wav_files() | st.binary(max_size=300))
def test_wav_headers(data: bytes) -> None:
    result = outcome(lambda: read_wav(data, max_duration_s=60))
    if isinstance(result, Exception):
        assert isinstance(result, AudioFormatError) and str(result), repr(result)
        return
    samples, rate = result
    assert 8000 <= rate <= 48000
    assert samples.dtype == np.float32 and len(samples) <= len(data)  # sized by the bytes, never by the header
    assert bool(np.all(np.isfinite(samples)))


FRAME_PIECES = st.sampled_from([b'{"op":"audio","stream":"s1","len":4}\n\x00\x00\x00\x00', b'{"op":"end"}\n',
                                b'{"len":99999999999}\n', b"[1]\n", b"\n", b'{"len":3}\nab', b"\xff\xfe\n"])


@given(st.lists(FRAME_PIECES | st.binary(max_size=40), max_size=6).map(b"".join))
def test_the_sidecar_frame_reader(data: bytes) -> None:
    stream = io.BytesIO(data)
    for _ in range(20):  # every call consumes input, or ends the stream
        result = outcome(lambda: read_frame(stream))
        if result is None or (isinstance(result, FrameError) and stream.tell() >= len(data)):
            return
        assert isinstance(result, tuple | FrameError), repr(result)
    raise AssertionError("the reader did not reach the end of the input")


def read_to_the_end(data: bytes, limit: int, read: Callable[[asyncio.StreamReader], Awaitable[object]]) -> object:
    """What reading ``data`` to its end with ``read`` (None at the end) raises, or None."""
    async def read_all() -> None:
        reader = asyncio.StreamReader(limit=limit)
        reader.feed_data(data)
        reader.feed_eof()
        while await read(reader) is not None:
            pass

    return outcome(lambda: asyncio.run(read_all()))


@given(st.lists(FRAME_PIECES | st.binary(max_size=40), max_size=6).map(b"".join))
def test_the_gateway_frame_reader(data: bytes) -> None:
    result = read_to_the_end(data, 1 << 16, read_frame_async)
    assert result is None or isinstance(result, FrameError), repr(result)


HEADER_NAMES = st.sampled_from(["authorization", "x-api-key", "x-voxgate-pin", "cookie", "host", "origin",
                                "x-forwarded-for", "forwarded", "x-forwarded-proto", "sec-websocket-protocol"])


@given(st.lists(st.tuples(HEADER_NAMES, st.text(max_size=40)), max_size=6), st.binary(max_size=60),
       st.sampled_from(["http", "websocket"]), st.sampled_from(list(RouteClass)),
       st.sampled_from(["127.0.0.1", "198.51.100.9", "::1", "2001:db8::1", "testclient"]))
def test_the_auth_decision(headers: list[tuple[str, str]], query: bytes, kind: str, route: RouteClass,
                           peer: str) -> None:
    state = AuthState(AuthConfig(server_mode=True, api_key="vgk-fuzz-key-0123456789-Xq7",
                                 forwarded_allow_ips=(ipaddress.ip_network("127.0.0.1/32"),)))
    scope = {"type": kind, "method": "POST", "path": "/v1/tts", "query_string": query, "client": (peer, 1),
             "headers": [(name.encode(), value.encode("utf-8", "surrogateescape")) for name, value in headers]}
    decision = outcome(lambda: asyncio.run(decide(scope, route, state)))
    assert isinstance(decision, Principal | Refusal), repr(decision)
    if isinstance(decision, Refusal):
        assert decision.code in CODES and CODES[decision.code].http_status == decision.status


WYOMING_PIECES = st.sampled_from([b'{"type":"describe"}\n', b'{"type":"audio-chunk","payload_length":4}\n\x00\x00\x00\x00',
                                  b'{"type":"x","data_length":2}\n{}', b'{"type":"x","data_length":99999999}\n',
                                  b"[" * 5000 + b"]" * 5000 + b"\n", b'{"type":"x","data_length":10000}\n'
                                  + b"[" * 5000 + b"]" * 5000, b"\n", b"{}\n"])


@given(st.lists(WYOMING_PIECES | st.binary(max_size=40), max_size=5).map(b"".join))
@example(b"[" * 5000 + b"]" * 5000 + b"\n")  # deeper than the recursion limit Hypothesis sets
def test_the_wyoming_event_reader(data: bytes) -> None:
    result = read_to_the_end(data, MAX_LINE_BYTES, read_event)
    assert result is None or isinstance(result, WireError), repr(result)
