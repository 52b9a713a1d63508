"""session.update onto the transcription configuration: what each field sets,
what a partial update keeps, and the exact error (param and message) for every
field that cannot be used."""

from __future__ import annotations

import pytest

from gateway.codecs.formats import InputEncoding
from gateway.fronts.openai_realtime.config import ServerVad, TranscriptionConfig, UpdateError, apply_update
from gateway.protocol.dictation import DictationParams

BASE = TranscriptionConfig()


def update(audio_input: dict, languages: list[str] | None = None, config: TranscriptionConfig = BASE):
    return apply_update(config, {"type": "transcription", "audio": {"input": audio_input}}, languages or [])


def test_the_default_session_object_is_openais_transcription_session():
    assert BASE.session_object("sess_1") == {
        "type": "transcription", "object": "realtime.transcription_session", "id": "sess_1",
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                            "transcription": {"model": "gpt-4o-transcribe", "language": None, "prompt": ""},
                            "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                                               "silence_duration_ms": 500},
                            "noise_reduction": None}},
        "include": None}


def test_a_full_update_maps_onto_the_dictation_session():
    config = update({"format": {"type": "audio/pcmu"},
                     "transcription": {"model": "whisper-1", "language": "EN", "prompt": ""},
                     "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 200,
                                        "silence_duration_ms": 800},
                     "noise_reduction": None}, languages=["en", "de"])
    assert config == TranscriptionConfig(format="audio/pcmu", model="whisper-1", language="en",
                                         prompt="", turn_detection=ServerVad(0.5, 200, 800), noise_reduction=None)
    assert config.dictation_params() == DictationParams(sample_rate=8000, encoding=InputEncoding.MULAW,
                                                        language="en", interim=True, silence_ms=800)
    assert config.session_object("s")["audio"]["input"]["format"] == {"type": "audio/pcmu"}


def test_fields_left_out_keep_their_values_and_null_turns_vad_off():
    first = update({"transcription": {"language": "de"}}, languages=[])
    second = update({"turn_detection": None}, config=first)
    assert (second.language, second.turn_detection, second.format) == ("de", None, "audio/pcm")
    # without VAD the recognizer still cuts at its longest pause; the client's commit ends the item
    assert second.dictation_params().silence_ms == 5000


@pytest.mark.parametrize(("silence", "expected"), [(50, 200), (500, 500), (9000, 5000)])
def test_silence_duration_is_clamped_to_the_recognizers_range(silence, expected):
    config = update({"turn_detection": {"type": "server_vad", "silence_duration_ms": silence}})
    assert config.dictation_params().silence_ms == expected
    assert config.turn_detection.silence_duration_ms == silence  # reported as asked


@pytest.mark.parametrize(("audio_input", "param", "message"), [
    ({"format": {"type": "audio/opus"}}, "session.audio.input.format.type",
     "format 'audio/opus' is not supported; use one of: audio/pcm, audio/pcmu, audio/pcma"),
    ({"format": {"type": "audio/pcm", "rate": 16000}}, "session.audio.input.format.rate",
     "audio/pcm is 24000 Hz only, not 16000"),
    ({"format": "pcm16"}, "session.audio.input.format",
     'session.audio.input.format must be an object with a "type", one of: audio/pcm, audio/pcmu, audio/pcma'),
    ({"transcription": {"language": "english"}}, "session.audio.input.transcription.language",
     "session.audio.input.transcription.language must be an ISO-639-1 code such as 'en'"),
    ({"transcription": {"model": 5}}, "session.audio.input.transcription.model",
     "session.audio.input.transcription.model must be a string"),
    ({"transcription": {"prompt": "x" * 801}}, "session.audio.input.transcription.prompt",
     "session.audio.input.transcription.prompt: 801 characters; a prompt holds at most 800"),
    ({"transcription": {"prompt": 7}}, "session.audio.input.transcription.prompt",
     "session.audio.input.transcription.prompt: must be a string"),
    ({"transcription": {"keywords": "ComfyUI"}}, "session.audio.input.transcription.keywords",
     "session.audio.input.transcription.keywords must be a list of strings"),
    ({"transcription": {"keywords": ["ComfyUI", ""]}}, "session.audio.input.transcription.keywords",
     "session.audio.input.transcription.keywords: a term is empty"),
    ({"turn_detection": {"type": "semantic_vad"}}, "session.audio.input.turn_detection.type",
     "turn detection 'semantic_vad' is not supported; use \"server_vad\" or null"),
    ({"turn_detection": {"type": "server_vad", "threshold": 1.5}}, "session.audio.input.turn_detection.threshold",
     "session.audio.input.turn_detection.threshold must be a number between 0.0 and 1.0"),
    ({"turn_detection": {"type": "server_vad", "silence_duration_ms": "500"}},
     "session.audio.input.turn_detection.silence_duration_ms",
     "session.audio.input.turn_detection.silence_duration_ms must be an integer number of milliseconds, 0..60000"),
    ({"noise_reduction": {"type": "loud"}}, "session.audio.input.noise_reduction",
     'session.audio.input.noise_reduction must be null or an object with "type": near_field or far_field'),
    ({"turn_detection": []}, "session.audio.input.turn_detection",
     "session.audio.input.turn_detection must be an object or null"),
    # fields this server cannot honour
    ({"transcription": {"model": "nova-3"}}, "session.audio.input.transcription.model",
     ("model 'nova-3' is not served here; use one of: whisper-1, gpt-transcribe, gpt-4o-transcribe, "
     "gpt-4o-mini-transcribe, gpt-4o-mini-transcribe-2025-12-15, gpt-realtime-whisper, gpt-live-transcribe "
     "(all run by this server's recognizer)")),
    ({"turn_detection": {"type": "server_vad", "threshold": 0.6}}, "session.audio.input.turn_detection.threshold",
     ("session.audio.input.turn_detection.threshold 0.6 is not supported: the recognizer's voice detector decides "
     "speech at 0.5; send 0.5 or leave it out")),
    ({"noise_reduction": {"type": "far_field"}}, "session.audio.input.noise_reduction",
     "session.audio.input.noise_reduction is not supported: no noise reduction runs here; send null or leave it out"),
])
def test_a_bad_field_is_named_with_why(audio_input, param, message):
    with pytest.raises(UpdateError) as info:
        update(audio_input)
    assert (info.value.param, str(info.value), info.value.code) == (param, message, "invalid_value")


def test_the_prompt_and_keywords_become_the_recognizers_context():
    config = update({"transcription": {"prompt": "Names:  Siobhan.", "keywords": ["ComfyUI", "Llanelli"]}})
    assert (config.prompt, config.keywords) == ("Names: Siobhan.", ("ComfyUI", "Llanelli"))
    assert config.dictation_params().prompt == "Names: Siobhan. ComfyUI, Llanelli."
    assert config.session_object("s")["audio"]["input"]["transcription"] == {
        "model": "gpt-4o-transcribe", "language": None, "prompt": "Names: Siobhan.",
        "keywords": ["ComfyUI", "Llanelli"]}


def test_a_language_the_recognizer_lacks_is_refused_with_the_ones_it_has():
    with pytest.raises(UpdateError) as info:
        update({"transcription": {"language": "de"}}, languages=["en"])
    assert (info.value.code, str(info.value)) == (
        "unsupported_language", "language 'de' is not supported by the recognizer here (available: en)")


@pytest.mark.parametrize(("session", "param", "message"), [
    ({"type": "realtime"}, "session.type",
     ("session.type 'realtime' is not supported: this server runs transcription sessions only "
     "(connect with ?intent=transcription)")),
    ([], "session", "session must be an object"),
    ({"audio": 3}, "session.audio", "session.audio must be an object"),
    ({"include": "logprobs"}, "session.include", "session.include must be a list of strings"),
    ({"include": ["item.input_audio_transcription.logprobs"]}, "session.include",
     ("session.include: 'item.input_audio_transcription.logprobs' is not produced here (no logprobs); send an empty "
     "list or leave it out")),
    ({"audio": {"output": {}}}, "session.audio.output",
     "session.audio.output is not a field here; session.audio takes: input"),
    ({"tools": []}, "session.tools", "session.tools is not a field here; session takes: type, audio, include"),
    ({"audio": {"input": {"transcription": {"delay": "low"}}}}, "session.audio.input.transcription.delay",
     ("session.audio.input.transcription.delay is not a field here; session.audio.input.transcription takes: "
     "model, language, prompt, keywords")),
    ({"audio": {"input": {"turn_detection": {"idle_timeout_ms": 5000}}}},
     "session.audio.input.turn_detection.idle_timeout_ms",
     ("session.audio.input.turn_detection.idle_timeout_ms is not a field here; session.audio.input.turn_detection "
     "takes: type, threshold, prefix_padding_ms, silence_duration_ms")),
])
def test_a_bad_session_object_is_refused(session, param, message):
    with pytest.raises(UpdateError) as info:
        apply_update(BASE, session, [])
    assert (info.value.param, str(info.value)) == (param, message)


def test_the_recognizers_own_name_is_a_model_and_livekits_default_session_is_taken():
    config = apply_update(BASE, {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": 24000},
        "transcription": {"model": "gpt-4o-mini-transcribe", "language": "en"},
        "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 600,
                           "silence_duration_ms": 350}}}}, ["en"], asr_model="tiny.en")
    assert (config.model, config.turn_detection) == ("gpt-4o-mini-transcribe", ServerVad(0.5, 600, 350))
    assert apply_update(BASE, {"audio": {"input": {"transcription": {"model": "tiny.en"}}}}, [],
                        asr_model="tiny.en").model == "tiny.en"
