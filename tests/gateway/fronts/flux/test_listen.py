"""Flux's /v2/listen in process (TestClient) with a fake sidecar: the query
mapped onto the sidecar's options, every session event as its TurnInfo (exact
messages, measured confidences, sequence ids), ForceEndTurn, Configure's
answers, and Flux-shaped errors with their close codes."""

from __future__ import annotations

import pytest

from engines.base import EngineState
from gateway.protocol.common import ErrorEvent
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, receive

URL = "/v2/listen?model=flux-general-en&encoding=linear16&sample_rate=16000"
THRESHOLDS = {"eot_threshold": 0.7, "eot_timeout_ms": 5000}


def audio(seconds: float) -> bytes:
    return b"\0\0" * round(16000 * seconds)


def settled(text: str) -> list[dict]:
    return [{"word": word, "confidence": 1.0} for word in text.split()]


def configured(ws, sequence_id: int, thresholds: dict | None = None) -> None:
    """A round trip through the transport: every message sent before is read."""
    ws.send_json({"type": "Configure"})
    got = receive(ws)
    assert (got["type"], got["sequence_id"], got["thresholds"]) == ("ConfigureSuccess", sequence_id,
                                                                     thresholds or THRESHOLDS)


def turn(rid: str, seq: int, event: str, index: int, start: float, end: float, transcript: str = "",
         turn_words: list | None = None, confidence: float = 0.0, **extra) -> dict:
    return {"type": "TurnInfo", "request_id": rid, "sequence_id": seq, "event": event, "turn_index": index,
            "audio_window_start": start, "audio_window_end": end, "transcript": transcript,
            "words": turn_words or [], "end_of_turn_confidence": confidence, **extra}


def connect(ws) -> str:
    first = receive(ws)
    assert first == {"type": "Connected", "request_id": first["request_id"], "sequence_id": 0}
    return str(first["request_id"])


@pytest.mark.parametrize(("query", "silence_ms", "eager"), [
    ("", 350, False),  # Flux's default eot_threshold, 0.7: 0.7 x 500 ms
    ("&eot_threshold=0.9&eager_eot_threshold=0.5", 450, True),
    ("&eot_threshold=1.0&eot_timeout_ms=3000", 3000, False),  # manual turns: only the timeout's silence
    ("&eot_threshold=0.5&eot_timeout_ms=700&mip_opt_out=true&tag=a&tag=b", 250, False),
])
def test_the_query_maps_onto_the_sidecar_options(tmp_path, query, silence_ms, eager):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL + query) as ws:
        connect(ws)
        ws.send_json({"type": "CloseStream"})
        assert close_code(ws) == (1000, "")
    (header, _), *_ = fake.frames
    assert {k: header[k] for k in ("language", "interim", "word_timestamps", "silence_ms", "eager")} == {
        "language": "en", "interim": True, "word_timestamps": False, "silence_ms": silence_ms, "eager": eager}
    assert fake.ops(header["stream"])[-1] == "end"


def test_a_turn_with_an_eager_end_and_measured_confidences(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, \
            client.websocket_connect(URL + "&eager_eot_threshold=0.5") as ws:
        rid = connect(ws)
        thresholds = {"eager_eot_threshold": 0.5, **THRESHOLDS}
        ws.send_bytes(audio(1.8))
        configured(ws, 1, thresholds)
        fake.play_from_thread(client,
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 0},
                              {"ev": "partial", "utterance": 0, "text": "Hello", "stable": "", "start": 0.1,
                               "end": 1.0},
                              {"ev": "partial", "utterance": 0, "text": "Hello world", "stable": "Hello",
                               "start": 0.1, "end": 1.6},
                              {"ev": "eager_final", "utterance": 0, "text": "Hello world.", "start": 0.5,
                               "end": 1.6, "language": "en"})
        assert receive(ws) == turn(rid, 2, "StartOfTurn", 0, 0.5, 0.5)
        assert receive(ws) == turn(rid, 3, "Update", 0, 0.5, 1.0, "Hello", [{"word": "Hello", "confidence": 0.0}])
        assert receive(ws) == turn(rid, 4, "Update", 0, 0.5, 1.6, "Hello world",
                                   [{"word": "Hello", "confidence": 1.0}, {"word": "world", "confidence": 0.0}])
        # 1.8 s heard, speech ended at 1.6: 200 ms of silence over the 500 ms reference
        assert receive(ws) == turn(rid, 5, "EagerEndOfTurn", 0, 0.5, 1.6, "Hello world.", settled("Hello world."), 0.4)
        ws.send_bytes(audio(0.35))
        configured(ws, 6, thresholds)
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "Hello world.", "start": 0.5,
                                       "end": 1.6, "language": "en"})
        assert receive(ws) == turn(rid, 7, "EndOfTurn", 0, 0.5, 1.6, "Hello world.", settled("Hello world."), 1.0,
                                   trigger="model")


def test_turn_resumed_then_the_next_turns_and_a_turn_without_words(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, \
            client.websocket_connect(URL + "&eager_eot_threshold=0.4&eot_threshold=0.8") as ws:
        rid = connect(ws)
        ws.send_bytes(audio(1.7))
        configured(ws, 1, {"eager_eot_threshold": 0.4, "eot_threshold": 0.8, "eot_timeout_ms": 5000})
        fake.play_from_thread(client,
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 0},
                              {"ev": "eager_final", "utterance": 0, "text": "Book.", "start": 0.5, "end": 0.8,
                               "language": "en"},
                              {"ev": "turn_resumed", "utterance": 0, "at": 1.1},
                              {"ev": "final", "utterance": 0, "text": "Book it.", "start": 0.5, "end": 1.5,
                               "language": "en"},
                              {"ev": "speech_started", "utterance": 1, "at": 1.6, "start_sample": 24000},
                              {"ev": "discarded", "utterance": 1, "end_sample": 27200})
        booked = settled("Book.")
        assert [m["event"] for m in [receive(ws) for _ in range(1)]] == ["StartOfTurn"]
        # 1.7 s heard, speech ended at 0.8: capped at 1
        assert receive(ws) == turn(rid, 3, "EagerEndOfTurn", 0, 0.5, 0.8, "Book.", booked, 1.0)
        assert receive(ws) == turn(rid, 4, "TurnResumed", 0, 0.5, 1.1, "Book.", booked)
        assert receive(ws) == turn(rid, 5, "EndOfTurn", 0, 0.5, 1.5, "Book it.",
                                   settled("Book it."), 0.4,
                                   trigger="model")
        assert receive(ws) == turn(rid, 6, "StartOfTurn", 1, 1.6, 1.6)
        assert receive(ws) == turn(rid, 7, "EndOfTurn", 1, 1.6, 1.7, trigger="model")


def test_force_end_turn_ends_the_open_turn_and_is_silent_with_none_open(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        rid = connect(ws)
        ws.send_bytes(audio(1.0))
        ws.send_json({"type": "ForceEndTurn"})
        configured(ws, 1)
        stream = fake.the_stream().id
        assert [h.get("id") for h, _ in fake.frames if h["op"] == "finalize"] == ["force-1"]
        fake.play_from_thread(client, {"ev": "finalized", "id": "force-1", "utterance": None})
        configured(ws, 2)  # no turn was open: nothing was sent for it
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.2, "start_sample": 0})
        assert receive(ws)["event"] == "StartOfTurn"
        ws.send_json({"type": "ForceEndTurn"})
        configured(ws, 4)
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "Hi", "start": 0.2, "end": 1.0,
                                       "language": "en"},
                              {"ev": "finalized", "id": "force-2", "utterance": 0})
        assert receive(ws) == turn(rid, 5, "EndOfTurn", 0, 0.2, 1.0, "Hi",
                                   settled("Hi"), 0.0,
                                   trigger="manual")
        configured(ws, 6)  # the finalized of the answered ForceEndTurn sends nothing more
        assert fake.ops(stream).count("finalize") == 2


def test_a_turn_the_pause_ended_stays_the_model_s_when_a_force_end_turn_overtakes_its_final(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        rid = connect(ws)
        ws.send_bytes(audio(1.5))
        configured(ws, 1)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.2, "start_sample": 0})
        assert receive(ws)["event"] == "StartOfTurn"
        ws.send_json({"type": "ForceEndTurn"})  # the pause closed the turn; its final is still being decoded
        configured(ws, 3)
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "Hi", "start": 0.2, "end": 1.0,
                                       "language": "en", "endpoint": True},
                              {"ev": "finalized", "id": "force-1", "utterance": None})
        assert receive(ws) == turn(rid, 4, "EndOfTurn", 0, 0.2, 1.0, "Hi", settled("Hi"), 1.0, trigger="model")
        configured(ws, 5)  # the ForceEndTurn found no turn open: nothing is sent for it


def test_a_silence_end_with_manual_turns_is_the_timeout(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, \
            client.websocket_connect(URL + "&eot_threshold=1.0&eot_timeout_ms=800") as ws:
        connect(ws)
        ws.send_bytes(audio(2.0))
        configured(ws, 1, {"eot_threshold": 1.0, "eot_timeout_ms": 800})
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.2, "start_sample": 0},
                              {"ev": "final", "utterance": 0, "text": "Hi", "start": 0.2, "end": 1.0,
                               "language": "en"})
        receive(ws)
        end = receive(ws)
        assert (end["event"], end["trigger"], end["end_of_turn_confidence"]) == ("EndOfTurn", "timeout", 1.0)


def test_flux_general_multi_says_the_language_found(tmp_path):
    fake = FakeSidecar(languages=("en", "de"))
    with dictation_client(tmp_path, fake) as client, \
            client.websocket_connect(URL.replace("flux-general-en", "flux-general-multi")) as ws:
        connect(ws)
        configured(ws, 1)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.2, "start_sample": 0},
                              {"ev": "final", "utterance": 0, "text": "Hallo", "start": 0.2, "end": 1.0,
                               "language": "de"})
        assert "languages" not in receive(ws)
        assert receive(ws)["languages"] == ["de"]
    assert fake.frames[0][0]["language"] is None  # detected


def test_a_recognizer_that_is_not_there_is_an_error_then_close_1011(tmp_path):
    fake = FakeSidecar(state=EngineState.MISSING, detail="not installed")
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        error = receive(ws)
        assert (error["type"], error["sequence_id"], error["code"]) == ("Error", 0, "ENGINE_UNAVAILABLE")
        assert set(error) == {"type", "sequence_id", "code", "description"}
        assert close_code(ws) == (1011, error["description"])


@pytest.mark.parametrize(("query", "description"), [
    ("model=nova-3&sample_rate=16000", ("model: 'nova-3' is not served here; use one of: flux-general-en, "
                                       "flux-general-multi")),
    ("sample_rate=16000", "model: '' is not served here; use one of: flux-general-en, flux-general-multi"),
    ("model=flux-general-en", ("sample_rate: required for raw audio (linear16, mulaw, alaw); give the audio's "
                              "rate in Hz")),
    ("model=flux-general-en&sample_rate=16000&encoding=opus",
     "encoding: 'opus' is not supported; use linear16, mulaw or alaw"),
    ("model=flux-general-en&sample_rate=16000&eot_threshold=0.2", "eot_threshold: 0.2 is out of range; use 0.5 to 1"),
    ("model=flux-general-en&sample_rate=16000&eot_threshold=high", "eot_threshold: 'high' is not a number"),
    ("model=flux-general-en&sample_rate=16000&eager_eot_threshold=0.95",
     "eager_eot_threshold: 0.95 is out of range; use 0.3 to 0.9"),
    ("model=flux-general-en&sample_rate=16000&eager_eot_threshold=0.8&eot_threshold=0.6",
     "eager_eot_threshold: 0.8 must not exceed eot_threshold (0.6)"),
    ("model=flux-general-en&sample_rate=16000&eot_timeout_ms=10000",
     ("eot_timeout_ms: 10000 is not supported; this server ends a turn after at most 5000 ms of silence "
     "(use 500 to 5000)")),
    ("model=flux-general-en&sample_rate=16000&eot_timeout_ms=100", ("eot_timeout_ms: 100 is out of range; use 500 "
                                                                   "to 60000")),
    ("model=flux-general-en&sample_rate=16000&keyterm=ComfyUI&keyterm=Comfy%3CUI",
     "keyterm: 'Comfy<UI' holds '<'; a term holds letters, digits, spaces and '’-.&+/#@_:"),
    ("model=flux-general-en&sample_rate=16000&keyterm=" + "x" * 51,
     "keyterm: 'xxxxxxxxxxxxxxxxxxxx'... is 51 characters; a term holds at most 50"),
    ("model=flux-general-en&sample_rate=16000" + "".join(f"&keyterm=term{i}" for i in range(51)),
     "keyterm: more than 50 terms"),
    ("model=flux-general-en&sample_rate=16000&language_hint=en", ("language_hint: not supported; the recognizer "
     "is told one language (flux-general-en: English) or detects it among all it knows (flux-general-multi), and "
     "cannot be held to a list of hints")),
    ("model=flux-general-en&sample_rate=16000&redact=numbers", "redact: not supported; no redaction runs here"),
    ("model=flux-general-en&sample_rate=16000&numerals=true",
     "numerals=true: not supported; numbers are written the way the recognizer writes them"),
    ("model=flux-general-en&sample_rate=16000&punctuate=true", ("punctuate: not a parameter here; known: model, "
     "encoding, sample_rate, eager_eot_threshold, eot_threshold, eot_timeout_ms, keyterm, language_hint, "
     "profanity_filter, numerals, redact, mip_opt_out, tag")),
])
def test_a_bad_query_is_an_error_then_close_4400(tmp_path, query, description):
    with dictation_client(tmp_path) as client, client.websocket_connect(f"/v2/listen?{query}") as ws:
        assert receive(ws) == {"type": "Error", "sequence_id": 0, "code": "BAD_REQUEST", "description": description}
        code, reason = close_code(ws)
    assert (code, reason) == (4400, description[:len(reason)]) and reason


@pytest.mark.parametrize(("configure", "code", "description"), [
    ({"keyterms": ["ComfyUI", "Comfy<UI"]}, "INVALID_CONFIGURE",
     "keyterms: 'Comfy<UI' holds '<'; a term holds letters, digits, spaces and '’-.&+/#@_:"),
    ({"keyterms": ["x" * 51]}, "INVALID_CONFIGURE",
     "keyterms: 'xxxxxxxxxxxxxxxxxxxx'... is 51 characters; a term holds at most 50"),
    ({"keyterms": [f"term{i}" for i in range(51)]}, "INVALID_CONFIGURE", "keyterms: more than 50 terms"),
    ({"keyterms": ["ComfyUI", 7]}, "INVALID_CONFIGURE", "keyterms: every term must be a string"),
    ({"keyterms": {"ComfyUI": 1}}, "INVALID_CONFIGURE", "keyterms: must be a list of strings"),
    # refused as a whole: the valid key terms beside a threshold it cannot change are not applied either
    ({"keyterms": ["ComfyUI"], "thresholds": {"eot_threshold": 0.9}}, "UNSUPPORTED_CONFIGURE",
     ("eot_threshold/eot_timeout_ms: this change needs a turn silence of 450 ms and the stream's is fixed at 350 ms "
     "when it opens here; open a new stream with them in the query")),
    ({"language_hints": ["de"]}, "UNSUPPORTED_CONFIGURE", ("language_hints: not supported; the recognizer is told "
     "one language (flux-general-en: English) or detects it among all it knows (flux-general-multi), and cannot be "
     "held to a list of hints")),
    ({"numerals": True}, "UNSUPPORTED_CONFIGURE", ("numerals=true: not supported; numbers are written the way the "
                                                  "recognizer writes them")),
    ({"thresholds": {"eot_threshold": 0.9}}, "UNSUPPORTED_CONFIGURE",
     ("eot_threshold/eot_timeout_ms: this change needs a turn silence of 450 ms and the stream's is fixed at 350 ms "
     "when it opens here; open a new stream with them in the query")),
    ({"thresholds": {"eager_eot_threshold": 0.5}}, "UNSUPPORTED_CONFIGURE",
     ("eager_eot_threshold: eager ends of turn are switched on or off when the stream opens here; open a new stream "
     "with it in the query")),
    ({"thresholds": {"eot_threshold": 1.5}}, "INVALID_CONFIGURE", "eot_threshold: 1.5 is out of range; use 0.5 to 1"),
    ({"thresholds": {"eot_timeout_ms": "soon"}}, "INVALID_CONFIGURE", "eot_timeout_ms: 'soon' is not a number"),
    ({"thresholds": {"patience": 1}}, "INVALID_CONFIGURE", ("thresholds.patience: not a threshold; the thresholds "
                                                          "are: eager_eot_threshold, eot_threshold, eot_timeout_ms")),
    ({"thresholds": [0.5]}, "INVALID_CONFIGURE", "thresholds: must be an object"),
    ({"model": "nova"}, "INVALID_CONFIGURE", ("model: not a field of Configure; its fields are: thresholds, keyterms, "
                                             "language_hints, numerals, profanity_filter")),
])
def test_a_configure_that_cannot_be_honoured_is_refused_and_the_stream_goes_on(tmp_path, configure, code,
                                                                               description):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        rid = connect(ws)
        ws.send_json({"type": "Configure", **configure})
        assert receive(ws) == {"type": "ConfigureFailure", "request_id": rid, "sequence_id": 1, "code": code,
                               "description": description}
        configured(ws, 2)  # unchanged
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.2, "start_sample": 0})
        assert receive(ws)["sequence_id"] == 3
    assert [h["op"] for h, _ in fake.frames if h["op"] == "configure"] == []  # the recognizer's terms unchanged


def test_a_configure_that_keeps_the_turn_silence_is_applied(tmp_path):
    with dictation_client(tmp_path) as client, \
            client.websocket_connect(URL + "&eager_eot_threshold=0.4") as ws:
        rid = connect(ws)
        ws.send_json({"type": "Configure", "thresholds": {"eager_eot_threshold": 0.6, "eot_threshold": 0.7,
                                                          "eot_timeout_ms": 4000}, "keyterms": [], "numerals": False})
        assert receive(ws) == {"type": "ConfigureSuccess", "request_id": rid, "sequence_id": 1, "thresholds": {
            "eager_eot_threshold": 0.6, "eot_threshold": 0.7, "eot_timeout_ms": 4000}, "keyterms": [],
            "numerals": False}


def test_keyterms_of_the_query_open_the_stream_and_a_configure_replaces_or_clears_them(tmp_path):
    fake = FakeSidecar()
    # repeatable, as the SDK, Pipecat and LiveKit send them; trimmed and de-duplicated
    query = "&keyterm=Siobhan&keyterm=Comfy%20%20UI&keyterm=Siobhan&keyterm="
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL + query) as ws:
        rid = connect(ws)

        def configure(sequence_id: int, in_force: list[str], **fields: object) -> None:
            ws.send_json({"type": "Configure", **fields})
            assert receive(ws) == {"type": "ConfigureSuccess", "request_id": rid, "sequence_id": sequence_id,
                                   "thresholds": THRESHOLDS, "keyterms": in_force, "numerals": False}

        configure(1, ["Siobhan", "Comfy UI"])  # no keyterms field: the terms in force are kept and reported
        configure(2, ["Llanelli", "Zyxel"], keyterms=["Llanelli", " Zyxel "])
        configure(3, ["Llanelli", "Zyxel"], keyterms=["Llanelli", "Zyxel"])  # the same terms: nothing to change
        configure(4, ["Zyxel"], keyterms="Zyxel")  # the SDK's type allows one string
        configure(5, [], keyterms=[])  # clears them
        configure(6, [], thresholds={"eot_timeout_ms": 5000})
        ws.send_json({"type": "CloseStream"})
        assert close_code(ws) == (1000, "")
    assert [(h["op"], h["prompt"]) for h, _ in fake.frames if h["op"] in ("open", "configure")] == [
        ("open", "Siobhan, Comfy UI."), ("configure", "Llanelli, Zyxel."), ("configure", "Zyxel."),
        ("configure", "")]


def test_a_message_flux_does_not_define_is_a_warning_and_the_stream_goes_on(tmp_path):
    with dictation_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        rid = connect(ws)
        ws.send_json({"type": "KeepAlive"})
        assert receive(ws) == {"type": "Warning", "request_id": rid, "sequence_id": 1, "code": "BAD_MESSAGE",
                               "description": "unknown message type 'KeepAlive'; expected one of: Configure, "
                                              "ForceEndTurn, CloseStream"}
        ws.send_json({"type": "ForceEndTurn", "now": True})
        assert receive(ws)["description"] == ("ForceEndTurn.now: not a field of ForceEndTurn; its fields are: "
                                              "(none besides type)")
        configured(ws, 3)
        ws.send_json({"type": "CloseStream"})
        assert close_code(ws) == (1000, "")


def test_over_capacity_is_an_error_then_close_1013(tmp_path):
    with dictation_client(tmp_path, max_dictation_streams=1) as client, client.websocket_connect(URL) as first:
        connect(first)
        with client.websocket_connect(URL) as second:
            error = receive(second)
            assert (error["type"], error["sequence_id"], error["code"]) == ("Error", 0, "OVER_CAPACITY")
            assert close_code(second) == (1013, error["description"])


def test_an_error_the_stream_goes_on_after_is_a_warning(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        rid = connect(ws)
        restarted = ErrorEvent("asr_unavailable", "the recognizer restarted; replaying the open audio", True)
        client.portal.call(fake.the_stream().report, restarted)
        assert receive(ws) == {"type": "Warning", "request_id": rid, "sequence_id": 1, "code": "ASR_UNAVAILABLE",
                               "description": "the recognizer restarted; replaying the open audio"}
        configured(ws, 2)


def test_a_text_message_over_64_kib_closes_1009(tmp_path):
    with dictation_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        connect(ws)
        ws.send_text(" " * (64 * 1024 + 1))
        assert close_code(ws) == (1009, "text message longer than 65536 bytes")


def test_with_the_turn_model_a_turn_ends_by_its_answer_and_its_confidence_is_the_models(tmp_path):
    fake = FakeSidecar()
    fake.turn_model = True  # the sidecar was started with an end-of-turn model
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL + "&eot_threshold=0.8") as ws:
        rid = connect(ws)
        ws.send_bytes(audio(3.0))
        configured(ws, 1, {"eot_threshold": 0.8, "eot_timeout_ms": 5000})
        fake.play_from_thread(client,
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 0},
                              {"ev": "final", "utterance": 0, "text": "Book it.", "start": 0.5, "end": 1.0,
                               "language": "en", "endpoint": True, "turn_confidence": 0.93},
                              {"ev": "speech_started", "utterance": 1, "at": 1.5, "start_sample": 16000},
                              {"ev": "final", "utterance": 1, "text": "And then", "start": 1.5, "end": 2.0,
                               "language": "en", "endpoint": True, "turn_confidence": 0.2})
        assert receive(ws)["event"] == "StartOfTurn"
        # the model ended it: its probability, not the silence heard (1.0 here)
        assert receive(ws) == turn(rid, 3, "EndOfTurn", 0, 0.5, 1.0, "Book it.", settled("Book it."), 0.93,
                                   trigger="model")
        assert receive(ws)["event"] == "StartOfTurn"
        # the model heard it unfinished; the silence rule ended it
        assert receive(ws) == turn(rid, 5, "EndOfTurn", 1, 1.5, 2.0, "And then", settled("And then"), 0.2,
                                   trigger="timeout")
    (header, _), *_ = fake.frames
    assert header["turn_threshold"] == 0.8


@pytest.mark.parametrize(("turn_model", "query"), [(False, ""), (True, "&eot_threshold=1.0")])
def test_the_turn_model_is_asked_only_when_the_sidecar_has_one_and_turns_are_not_manual(tmp_path, turn_model, query):
    fake = FakeSidecar()
    fake.turn_model = turn_model
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL + query) as ws:
        connect(ws)
        ws.send_json({"type": "CloseStream"})
        assert close_code(ws) == (1000, "")
    (header, _), *_ = fake.frames
    assert "turn_threshold" not in header
