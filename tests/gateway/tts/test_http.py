"""The speech HTTP routes: POST /v1/tts, the OpenAI-compatible POST /v1/audio/speech
(through the official ``openai`` client), and the voice routes."""

from __future__ import annotations

import io
import struct
import wave

import httpx
import numpy as np
import openai
import pytest
from starlette.testclient import TestClient

from engines.base import EngineState
from gateway.audio import Encoding, encode, read_wav, wav_header
from tests.gateway.fakes import FakeTtsEngine, expected_audio, frames_for
from tests.gateway.helpers import LOOPBACK, tts_app
from tests.support.net import running_server
from tests.support.waiting import eventually


@pytest.fixture
def client(tmp_path):
    with TestClient(tts_app(tmp_path), client=LOOPBACK) as c:
        yield c


def test_post_tts_streams_a_wav(client):
    text = "HTTP speech in a WAV."
    r = client.post("/v1/tts", json={"text": text, "seed": 5})
    assert r.status_code == 200
    assert r.headers["content-type"] == "audio/wav"
    assert r.content[:44] == wav_header(24000, Encoding.S16LE)
    assert r.content[44:] == encode(expected_audio(text, seed=5), Encoding.S16LE)


def test_post_tts_raw_pcm_resampled(client):
    text = "Raw float samples at sixteen kilohertz."
    r = client.post("/v1/tts", json={"text": text, "format": "pcm_f32le", "sample_rate": 16000, "voice": "marius"})
    assert r.status_code == 200
    assert (r.headers["x-sample-rate"], r.headers["x-encoding"]) == ("16000", "pcm_f32le")
    assert len(r.content) == 4 * round(frames_for(text) * 1920 * 16000 / 24000)


@pytest.mark.parametrize(("body", "status", "detail"), [
    ({}, 400, "text: required, a non-empty string"),
    ({"text": "  "}, 400, "text: required, a non-empty string"),
    ({"text": "a" * 2001}, 413, "text: 2001 characters; the limit is 2000"),
    ({"text": "hi", "format": "ogg"}, 400,
     "format: must be one of: wav, pcm_s16le, pcm_f32le, mp3, opus, aac, flac, mulaw, alaw"),
    ({"text": "hi", "format": "opus", "sample_rate": 22050}, 400,
     "sample_rate: must be one of 8000, 12000, 16000, 24000, 48000 for opus"),
    ({"text": "hi", "sample_rate": 100}, 400, "sample_rate: must be between 8000 and 48000"),
    ({"text": "hi", "sample_rate": "16000"}, 400, "sample_rate: must be an integer"),
    ({"text": "hi", "seed": -3}, 400, "seed: must be an integer between 0 and 4294967295"),
    ({"text": "hi", "engine": "omnivoice"}, 400, "engine: unknown engine 'omnivoice'; available: pocket"),
    ({"text": "hi", "voice": "ghost"}, 400, "unknown voice 'ghost'; available voices: alba, marius"),
])
def test_post_tts_bad_input(client, body, status, detail):
    r = client.post("/v1/tts", json=body)
    assert r.status_code == status
    assert r.json()["detail"] == detail


def test_post_tts_body_that_is_not_json(client):
    r = client.post("/v1/tts", content=b"text=hello", headers={"content-type": "application/x-www-form-urlencoded"})
    assert (r.status_code, r.json()) == (400, {"detail": "body: not valid JSON", "code": "bad_request"})
    r = client.post("/v1/tts", json=["text"])
    assert (r.status_code, r.json()["detail"]) == (400, "body: must be a JSON object")
    r = client.post("/v1/tts", content=b"{" + b" " * 20000 + b"}")
    assert (r.status_code, r.json()["detail"]) == (413, "request body of 20002 bytes; the limit is 12096")


def test_post_tts_engine_not_ready(tmp_path):
    engine = FakeTtsEngine(state=EngineState.MISSING, detail="Pocket TTS weights not found: /x/model.safetensors",
                           hint="run `voxgate models pull pocket`")
    with TestClient(tts_app(tmp_path, engine), client=LOOPBACK) as client:
        r = client.post("/v1/tts", json={"text": "hi"})
    assert r.status_code == 503
    assert r.json() == {"detail": "Pocket TTS is not available on this gateway (not installed); an admin can see "
                                  "why at GET /v1/engines", "code": "engine_unavailable", "state": "missing"}


@pytest.mark.slow
async def test_post_tts_first_bytes_leave_before_synthesis_ends(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02, frames_by_text={"A long answer.": 2000})
    async with running_server(tts_app(tmp_path, engine, max_tts_sessions=1)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            async with http.stream("POST", "/v1/tts", json={"text": "A long answer."}) as r:
                assert r.status_code == 200
                chunks = r.aiter_bytes()  # kept referenced: a dropped iterator closes the response
                got = b""
                while len(got) <= 44 + 3840:
                    got += await chunks.__anext__()
                assert got[:4] == b"RIFF"
                assert engine.streams[0].produced < 2000  # synthesis still running
                listed = (await http.get("/v1/admin/sessions")).json()["sessions"]
                assert [(s["kind"], s["route"], s["voice"]) for s in listed] == [("tts", "/v1/tts", "alba")]
                # The streaming request holds a TTS slot: the limit applies to HTTP too.
                busy = await http.post("/v1/tts", json={"text": "hi"})
                assert busy.status_code == 503 and busy.headers["retry-after"] == "5"
                assert busy.json()["detail"] == "too many TTS sessions (limit 1); try again later"
            await eventually(lambda: engine.streams[0].cancelled, "the engine stream cancelled after the hang-up")
            assert engine.streams[0].produced < 2000
            assert (await http.post("/v1/tts", json={"text": "hi"})).status_code == 200


# ---- OpenAI-compatible


@pytest.mark.slow
async def test_openai_client_gets_wav_and_pcm(tmp_path):
    async with running_server(tts_app(tmp_path)) as url:
        oa = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="not-needed-on-loopback", max_retries=0)
        text = "Hello from the OpenAI client."
        wav = await oa.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="wav")
        samples, rate = read_wav(wav.content)
        assert rate == 24000
        assert encode(samples, Encoding.S16LE) == encode(expected_audio(text), Encoding.S16LE)
        pcm = await oa.audio.speech.create(model="gpt-4o-mini-tts", voice="marius", input=text,
                                           response_format="pcm")
        assert len(pcm.content) == frames_for(text) * 1920 * 2
        async with oa.audio.speech.with_streaming_response.create(model="tts-1", voice="alloy", input=text) as r:
            body = b"".join([chunk async for chunk in r.iter_bytes()])
        assert body[:2] == b"\xff\xf3"  # an MPEG-2 layer III frame: mp3, OpenAI's default, when no format is given
        with pytest.raises(openai.BadRequestError) as info:
            await oa.audio.speech.create(model="tts-1", voice="alloy", input=text,
                                         response_format="vorbis")  # type: ignore[arg-type]
        assert info.value.status_code == 400
        assert info.value.body["detail"] == \
            "response_format: 'vorbis' is not supported; use one of: mp3, opus, aac, flac, wav, pcm"
        with pytest.raises(openai.BadRequestError) as info:
            await oa.audio.speech.create(model="tts-1", voice="nobody", input=text)
        assert info.value.body["detail"] == "unknown voice 'nobody'; available voices: alba, marius"
        await oa.close()


@pytest.mark.parametrize(("body", "detail"), [
    ({"model": "tts-1", "voice": "alloy"}, "input: required, a non-empty string"),
    ({"model": "tts-1", "input": "hi", "speed": 1.5}, "speed: only 1.0 is supported"),
    ({"model": "tts-1", "input": "hi", "stream_format": "chunks"}, "stream_format: 'chunks' is not supported; use audio or sse"),
    ({"model": "tts-1", "input": "hi", "voice": 3}, "voice: must be a string"),
    ({"model": "tts-1", "input": "hi", "response_format": "ogg"},
     "response_format: 'ogg' is not supported; use one of: mp3, opus, aac, flac, wav, pcm"),
])
def test_openai_route_bad_input(client, body, detail):
    r = client.post("/v1/audio/speech", json=body)
    assert (r.status_code, r.json()["detail"]) == (400, detail)


# ---- voices


def sine_wav(seconds: float, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2").tobytes())
    return buf.getvalue()


def test_list_voices(client):
    r = client.get("/v1/voices")
    assert r.json() == {"voices": [
        {"id": "alba", "engine": "pocket", "name": "alba", "language": "en", "source": "builtin"},
        {"id": "marius", "engine": "pocket", "name": "marius", "language": "en", "source": "builtin"}],
        "defaults": {"pocket": "alba"}}
    r = client.get("/v1/voices?engine=omnivoice")
    assert (r.status_code, r.json()["detail"]) == (400, "engine: unknown engine 'omnivoice'; available: pocket")


def test_clone_list_speak_and_delete_a_voice(tmp_path):
    engine = FakeTtsEngine()
    with TestClient(tts_app(tmp_path, engine), client=LOOPBACK) as client:
        wav = sine_wav(2.0)
        r = client.post("/v1/voices", data={"id": "grandpa"}, files={"file": ("g.wav", wav, "audio/wav")})
        assert (r.status_code, r.json()) == (201, {"voice": {"id": "grandpa", "engine": "pocket", "name": "grandpa",
                                                             "language": "en", "source": "cloned"}})
        stored = tmp_path / "voices" / "uploads" / "pocket" / "grandpa.wav"
        assert stored.read_bytes() == wav and engine.cloned["grandpa"] == wav
        assert [p.name for p in stored.parent.iterdir()] == ["grandpa.wav"]  # no temporary file left
        assert "grandpa" in [v["id"] for v in client.get("/v1/voices").json()["voices"]]
        r = client.post("/v1/voices", data={"id": "grandpa"}, files={"file": ("g.wav", wav, "audio/wav")})
        assert (r.status_code, r.json()["code"]) == (409, "voice_exists")
        assert client.post("/v1/tts", json={"text": "in his voice", "voice": "grandpa"}).status_code == 200
        assert client.delete("/v1/voices/grandpa").status_code == 204
        assert not stored.exists() and "grandpa" not in engine.cloned
        r = client.delete("/v1/voices/grandpa")
        assert (r.status_code, r.json()["detail"]) == (404, "unknown voice 'grandpa'; available voices: alba, marius")
        r = client.delete("/v1/voices/alba")
        assert (r.status_code, r.json()["detail"]) == (400, "voice 'alba' is built in; only cloned voices can be deleted")


def test_ref_text_reaches_the_engine_only_when_given(tmp_path):
    engine = FakeTtsEngine()
    with TestClient(tts_app(tmp_path, engine), client=LOOPBACK) as client:
        files = {"file": ("g.wav", sine_wav(2.0), "audio/wav")}
        assert client.post("/v1/voices", data={"id": "a", "ref_text": "  It was a cold day.  "},
                           files=files).status_code == 201
        assert client.post("/v1/voices", data={"id": "b"}, files=files).status_code == 201
        assert client.post("/v1/voices", data={"id": "c", "ref_text": "   "}, files=files).status_code == 201
        r = client.post("/v1/voices", data={"id": "d", "ref_text": "x" * 1001}, files=files)
        assert (r.status_code, r.json()["detail"]) == (400, "ref_text: 1001 characters; the limit is 1000")
    assert engine.transcripts == {"a": "It was a cold day.", "b": None, "c": None}


def test_ref_text_for_an_engine_that_clones_from_the_audio_alone_is_refused(tmp_path):
    engine = FakeTtsEngine(clone_uses_transcript=False)  # as Pocket
    with TestClient(tts_app(tmp_path, engine), client=LOOPBACK) as client:
        files = {"file": ("g.wav", sine_wav(2.0), "audio/wav")}
        r = client.post("/v1/voices", data={"id": "a", "ref_text": "It was a cold day."}, files=files)
        assert (r.status_code, r.json()) == (400, {"code": "bad_request", "detail": (
            "ref_text: the pocket engine clones a voice from the audio alone and takes no transcript; "
            "leave ref_text out")})
        assert client.post("/v1/voices", data={"id": "b", "ref_text": "  "}, files=files).status_code == 201
        assert client.get("/v1/engines").json()["engines"][0]["clone_uses_transcript"] is False
    assert engine.cloned.keys() == {"b"} and engine.transcripts == {"b": None}
    assert sorted(p.name for p in (tmp_path / "voices" / "uploads" / "pocket").iterdir()) == ["b.wav"]


@pytest.mark.parametrize(("data", "file", "status", "detail"), [
    ({}, ("a.wav", sine_wav(2), "audio/wav"), 400,
     "id: required, 1-64 characters of letters, digits, '_' or '-', starting with a letter or digit"),
    ({"id": "../etc"}, ("a.wav", sine_wav(2), "audio/wav"), 400,
     "id: required, 1-64 characters of letters, digits, '_' or '-', starting with a letter or digit"),
    ({"id": "v1"}, None, 400, "file: required, a WAV file"),
    ({"id": "v1"}, ("a.mp3", b"ID3\x04" + b"\0" * 100, "audio/mpeg"), 400,
     "file: not a WAV file (no RIFF/WAVE header)"),
    ({"id": "v1"}, ("a.wav", sine_wav(0.5), "audio/wav"), 400,
     "file: 0.50 s of audio; a voice sample must be 1 to 30 s long"),
    ({"id": "v1"}, ("a.wav", sine_wav(31, rate=8000), "audio/wav"), 400,
     "file: 31.00 s of audio; a voice sample must be 1 to 30 s long"),
    ({"id": "v1", "engine": "nope"}, ("a.wav", sine_wav(2), "audio/wav"), 400,
     "engine: unknown engine 'nope'; available: pocket"),
])
def test_clone_bad_input(client, tmp_path, data, file, status, detail):
    files = {"file": file} if file else {"ref_text": (None, "no file here")}  # multipart without a file
    r = client.post("/v1/voices", data=data, files=files)
    assert (r.status_code, r.json()["detail"]) == (status, detail)
    assert not (tmp_path / "voices" / "uploads").exists()


def test_clone_refuses_non_multipart_and_oversize(client):
    r = client.post("/v1/voices", content=sine_wav(2), headers={"content-type": "audio/wav"})
    assert (r.status_code, r.json()["detail"]) == (400, "body: send multipart/form-data with the fields id and file (a WAV)")
    big = b"RIFF" + struct.pack("<I", 11 * 1024 * 1024) + b"WAVE" + b"\0" * (11 * 1024 * 1024)
    r = client.post("/v1/voices", data={"id": "big"}, files={"file": ("b.wav", big, "audio/wav")})
    assert r.status_code == 413


def test_clone_unsupported_engine(tmp_path):
    with TestClient(tts_app(tmp_path, FakeTtsEngine(can_clone=False)), client=LOOPBACK) as client:
        r = client.post("/v1/voices", data={"id": "v1"}, files={"file": ("a.wav", sine_wav(2), "audio/wav")})
    assert (r.status_code, r.json()) == (400, {"detail": "engine pocket cannot clone voices",
                                               "code": "clone_unsupported"})


def test_engine_queue_full_is_503_before_any_audio(tmp_path):
    from engines.base import EngineError

    engine = FakeTtsEngine(open_error=EngineError("too many TTS streams: 8 running and 32 waiting; try again shortly",
                                                  code="over_capacity"))
    with TestClient(tts_app(tmp_path, engine), client=LOOPBACK) as client:
        r = client.post("/v1/tts", json={"text": "hi"})
        assert (r.status_code, r.headers["retry-after"]) == (503, "5")
        assert r.json() == {"detail": "too many TTS streams: 8 running and 32 waiting; try again shortly",
                            "code": "over_capacity"}
        assert client.get("/v1/admin/sessions").json()["sessions"] == []  # the slot was given back



def test_post_tts_passes_language_and_instruct_to_the_engine(tmp_path):
    engine = FakeTtsEngine()
    with TestClient(tts_app(tmp_path, engine), client=LOOPBACK) as client:
        r = client.post("/v1/tts", json={"text": "Hallo.", "language": "de", "instruct": "whispering", "format": "pcm_s16le"})
        assert r.status_code == 200
        r = client.post("/v1/tts", json={"text": "Hallo.", "language": ""})
        assert (r.status_code, r.json()["detail"]) == (400, "language: must be a non-empty string")
    assert engine.streams[0].options.extra == {"language": "de", "instruct": "whispering"}
