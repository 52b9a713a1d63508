"""The vendor fronts' parsers of client input (Deepgram, OpenAI Realtime,
ElevenLabs), fed anything: a parsed value, or the gateway's own error (or the
front's documented error type) naming what is wrong; never anything else."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from gateway.fronts.deepgram.messages import parse_listen_control, parse_speak_message
from gateway.fronts.deepgram.params import parse_listen_params, parse_speak_params
from gateway.fronts.elevenlabs.messages import credential_of
from gateway.fronts.elevenlabs.messages import parse_client_message as parse_elevenlabs_message
from gateway.fronts.elevenlabs.params import parse_output_format, parse_socket_params
from gateway.fronts.flux.configure import ConfigureRefused, StreamConfig, apply_configure
from gateway.fronts.flux.messages import parse_client_control
from gateway.fronts.flux.params import Thresholds, parse_flux_params
from gateway.fronts.openai_realtime.config import TranscriptionConfig, UpdateError, apply_update
from gateway.fronts.openai_realtime.events import parse_client_event
from gateway.protocol import tts as tts_protocol
from tests.fuzz.strategies import JSON_VALUES, messages, queries
from tests.fuzz.test_parsers_fuzz import assert_clear, outcome

LIMITS = tts_protocol.TextLimits()
REALTIME_LANGUAGES = ["en", "de"]


@given(messages(["KeepAlive", "Finalize", "CloseStream"]))
def test_deepgram_listen_messages(raw: str) -> None:
    assert_clear(outcome(lambda: parse_listen_control(raw)))


@given(messages(["Speak", "Flush", "Clear", "Close"]))
@example(json.dumps({"type": "Speak", "text": ["a"]}))
def test_deepgram_speak_messages(raw: str) -> None:
    assert_clear(outcome(lambda: parse_speak_message(raw)))


@given(queries(["model", "encoding", "sample_rate", "channels", "language", "interim_results", "endpointing",
                "utterance_end_ms", "vad_events", "punctuate", "smart_format"]))
@example({"endpointing": "false", "utterance_end_ms": "-1"})
@example({"channels": "2"})
def test_deepgram_listen_query(query: dict[str, str]) -> None:
    assert_clear(outcome(lambda: parse_listen_params(query)), code="bad_request")


@given(queries(["model", "encoding", "sample_rate", "container", "bit_rate"]))
def test_deepgram_speak_query(query: dict[str, str]) -> None:
    assert_clear(outcome(lambda: parse_speak_params(query)), code="bad_request")


@given(messages(["Configure", "ForceEndTurn", "CloseStream"]))
def test_flux_messages(raw: str) -> None:
    assert_clear(outcome(lambda: parse_client_control(raw)))


@given(queries(["model", "encoding", "sample_rate", "eot_threshold", "eager_eot_threshold", "eot_timeout_ms",
                "numerals", "mip_opt_out", "tag", "keyterm"]))
@example({"model": "flux-general-en", "sample_rate": "16000", "eot_threshold": "nan"})
@example({"model": "flux-general-en", "sample_rate": "16000", "eot_timeout_ms": "1e400"})
def test_flux_query(query: dict[str, str]) -> None:
    assert_clear(outcome(lambda: parse_flux_params(query)), code="bad_request")


def flux_configures() -> st.SearchStrategy[Any]:
    """``Configure`` bodies: the documented shape with fields of any type, and anything."""
    number = JSON_VALUES | st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**400), 10**400)
    names = ("eot_threshold", "eager_eot_threshold", "eot_timeout_ms", "x")
    thresholds = st.fixed_dictionaries({}, optional=dict.fromkeys(names, number))
    return st.fixed_dictionaries({"type": st.just("Configure")}, optional={
        "thresholds": thresholds | JSON_VALUES, "keyterms": st.lists(st.text(max_size=60)) | JSON_VALUES,
        "language_hints": JSON_VALUES,
        "numerals": JSON_VALUES, "profanity_filter": JSON_VALUES, "x": JSON_VALUES})


@example({"type": "Configure", "thresholds": {"eot_timeout_ms": 10**400}}, Thresholds())
@example({"type": "Configure", "thresholds": {"eot_threshold": float("nan")}}, Thresholds())
@given(flux_configures(), st.sampled_from([Thresholds(), Thresholds(eager_eot_threshold=0.5),
                                           Thresholds(eot_threshold=1.0, eot_timeout_ms=800)]))
def test_flux_configure(body: dict[str, Any], thresholds: Thresholds) -> None:
    current = StreamConfig(thresholds, ("ComfyUI",))
    result = outcome(lambda: apply_configure(body, current))
    if isinstance(result, ConfigureRefused):
        assert result.code in ("INVALID_CONFIGURE", "UNSUPPORTED_CONFIGURE") and result.description, result
        return
    assert isinstance(result, StreamConfig), repr(result)
    assert (result.thresholds.silence_ms, result.thresholds.manual) == (thresholds.silence_ms, thresholds.manual)
    assert all(isinstance(term, str) and term for term in result.keyterms), result
    # what ConfigureSuccess echoes must serialize
    json.dumps([result.thresholds.to_dict(), result.keyterms], allow_nan=False)


@given(messages(["session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
                 "input_audio_buffer.clear", "response.create"]))
def test_openai_realtime_events(raw: str) -> None:
    assert_clear(outcome(lambda: parse_client_event(raw)))


def realtime_sessions() -> st.SearchStrategy[Any]:
    """``session.update`` payloads: the documented shape with fields of any type, and anything."""
    turn = st.none() | JSON_VALUES | st.fixed_dictionaries(
        {"type": st.sampled_from(["server_vad", "semantic_vad", "x"]) | JSON_VALUES},
        optional={"threshold": JSON_VALUES | st.floats(allow_nan=True), "prefix_padding_ms": JSON_VALUES,
                  "silence_duration_ms": JSON_VALUES | st.integers(-(10**9), 10**9)})
    transcription = JSON_VALUES | st.fixed_dictionaries(
        {}, optional={"model": JSON_VALUES, "language": st.sampled_from(["en", "de", "xx", "EN", ""]) | JSON_VALUES,
                      "prompt": JSON_VALUES | st.text(min_size=4000, max_size=5000)})
    audio_input = st.fixed_dictionaries(
        {}, optional={"format": st.sampled_from(["audio/pcm", "audio/pcmu", "audio/pcma"]).map(lambda t: {"type": t})
                      | JSON_VALUES, "transcription": transcription, "turn_detection": turn,
                      "noise_reduction": JSON_VALUES | st.sampled_from([{"type": "near_field"}, None])})
    documented = st.fixed_dictionaries(
        {}, optional={"type": st.sampled_from(["transcription", "realtime"]) | JSON_VALUES,
                      "include": JSON_VALUES, "audio": st.fixed_dictionaries({}, optional={"input": audio_input})
                      | JSON_VALUES})
    return documented | JSON_VALUES


@given(realtime_sessions())
def test_openai_realtime_session_updates(session: Any) -> None:
    result = outcome(lambda: apply_update(TranscriptionConfig(), session, REALTIME_LANGUAGES))
    if isinstance(result, UpdateError):
        assert result.param.startswith("session") and str(result), result
        return
    assert isinstance(result, TranscriptionConfig), repr(result)
    json.dumps(result.session_object("sess_fuzz"))  # what session.updated echoes must serialize


@given(messages(["x"]) | st.builds(lambda extra: json.dumps(extra), st.dictionaries(
    st.sampled_from(["text", "context_id", "flush", "close_context", "close_socket", "try_trigger_generation",
                     "voice_settings", "generation_config", "xi_api_key", "authorization"]), JSON_VALUES, max_size=5)))
@example(json.dumps({"text": "a" * 100_000}))
def test_elevenlabs_messages(raw: str) -> None:
    assert_clear(outcome(lambda: parse_elevenlabs_message(raw, LIMITS)))
    credential = outcome(lambda: credential_of(raw))
    assert not isinstance(credential, Exception), repr(credential)


@given(queries(["model_id", "output_format", "inactivity_timeout", "sync_alignment", "auto_mode",
                "enable_logging", "enable_ssml_parsing"]))
@example({"inactivity_timeout": "181"})
@example({"output_format": "mp3_44100_999999999999999999999"})
def test_elevenlabs_query(query: dict[str, str]) -> None:
    assert_clear(outcome(lambda: parse_socket_params(query)), code="bad_request")


@given(st.none() | st.text(max_size=30) | st.sampled_from(["pcm_16000", "ulaw_8000", "mp3_44100_128", "pcm_1"]))
def test_elevenlabs_output_formats(raw: str | None) -> None:
    assert_clear(outcome(lambda: parse_output_format(raw)), code="bad_request")
