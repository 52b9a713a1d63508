"""One boolean query reader for the native sockets and every front."""

from __future__ import annotations

import pytest

from gateway.errors import BadRequest
from gateway.fronts.deepgram.params import parse_listen_params
from gateway.fronts.elevenlabs.params import parse_socket_params
from gateway.protocol.dictation import parse_dictation_params
from gateway.protocol.query import query_bool


@pytest.mark.parametrize("raw", ["true", "TRUE", "1", "yes", "On"])
def test_true_spellings(raw: str) -> None:
    assert query_bool({"x": raw}, "x", False) is True


@pytest.mark.parametrize("raw", ["false", "False", "0", "no", "OFF"])
def test_false_spellings(raw: str) -> None:
    assert query_bool({"x": raw}, "x", True) is False


@pytest.mark.parametrize("query", [{}, {"x": ""}])
def test_absent_or_empty_is_the_default(query: dict[str, str]) -> None:
    assert query_bool(query, "x", True) is True
    assert query_bool(query, "x", False) is False


@pytest.mark.parametrize("raw", ["maybe", "2", "t", " true", "yes please"])
def test_anything_else_names_the_parameter(raw: str) -> None:
    with pytest.raises(BadRequest) as caught:
        query_bool({"flag": raw}, "flag", False)
    assert caught.value.message == f"flag: {raw!r} is not a boolean (use true or false)"


def test_every_front_reads_the_same_spellings() -> None:
    assert parse_dictation_params({"interim": "off", "eager": "1"}).interim is False
    assert parse_dictation_params({"eager": "yes"}).eager is True
    listen = parse_listen_params({"encoding": "linear16", "sample_rate": "16000", "interim_results": "on",
                                  "vad_events": "1"})
    assert (listen.interim_results, listen.vad_events) == (True, True)
    with pytest.raises(BadRequest) as caught:  # read with the same spellings even where the value changes nothing
        parse_socket_params({"sync_alignment": "yes", "auto_mode": "maybe"})
    assert caught.value.message == "auto_mode: 'maybe' is not a boolean (use true or false)"
