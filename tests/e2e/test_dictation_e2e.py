"""Live dictation end to end: a real `voxgate serve` process with the real ASR
sidecar and tiny.en, real speech made at test time (Piper and espeak-ng),
streamed through the real socket by the real client."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from gateway.audio import write_wav
from gateway.client.dictation import DictationClient
from tests.e2e.gateway_process import running_gateway
from tests.support.speech import (
    add_noise,
    espeak_say,
    piper_say,
    resample,
    silence,
    wer,
    words,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIRST = "It's easy to tell the depth of a well."
SECOND = "Glue the sheet to the dark blue background."
LONG = "The juice of lemons makes fine punch, and the hogs were fed chopped corn and garbage before the rain."
MAX_PIPER_WER = 0.25  # tiny.en on this voice: ~10% on average, a single sentence can be worse
MAX_ESPEAK_WER = 0.6  # tiny.en on espeak-ng: ~30% on average


def sidecar_pids(server_pid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == server_pid and "engines.asr" in cmdline:
            pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "asr", env={"VOXGATE_ASR_THREADS": "2"}) as gw:
        yield gw.url, gw.proc


@pytest.fixture(scope="module")
def speech():
    """Test sentences at 16 kHz, synthesized once per module. Piper's noise is off
    (``steady``): the words a test names must be in the audio every run, not in
    one random rendition out of many."""
    out = {}
    for text in (FIRST, SECOND, LONG):
        samples, rate = piper_say(text, steady=True)
        out[text] = resample(samples, rate)
    return out


async def collect(client: DictationClient, audio: np.ndarray, realtime: bool, finalize: bool = False):
    async def send():
        await client.stream_samples(audio, realtime=realtime)
        if finalize:
            await client.finalize()
        await client.end()

    sender = asyncio.create_task(send())
    events = [event async for event in client.events()]
    await sender
    return events


def check_invariants(events: list[dict]) -> None:
    """Cumulative partials with growing stable text, one final per utterance, in order;
    an eager final is followed by turn_resumed or by a final with its text, with no
    partial between."""
    stable: dict[int, str] = {}
    finals: list[int] = []
    eager: dict[int, str] = {}  # the eager final each utterance holds
    for event in events:
        n = event.get("utterance", -1)
        if event["type"] == "partial":
            assert n not in finals, f"partial after the final of utterance {n}"
            assert n not in eager, f"partial while the eager final of utterance {n} stands"
            assert event["text"].startswith(event["stable"])
            assert event["stable"].startswith(stable.get(n, ""))
            stable[n] = event["stable"]
        elif event["type"] == "eager_final":
            assert event["text"] and n not in finals and n not in eager
            eager[n] = event["text"]
        elif event["type"] == "turn_resumed":
            assert eager.pop(n, None) is not None, f"turn_resumed without an eager final for utterance {n}"
        elif event["type"] == "final":
            assert n not in finals
            assert event["text"].startswith(stable.get(n, ""))
            if n in eager:
                assert event["text"] == eager.pop(n)
            finals.append(n)
    assert finals == sorted(finals)


def finals_of(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "final"]


def two_sentences(speech: dict[str, np.ndarray]) -> np.ndarray:
    """FIRST and SECOND with silence before, between (long enough to end the first) and after."""
    return np.concatenate([silence(0.5), speech[FIRST], silence(1.2), speech[SECOND], silence(1.0)])


def two_matching_finals(events: list[dict]) -> list[dict]:
    """The finals of ``two_sentences``, checked: the invariants hold, utterances 0
    and 1 and nothing else, each within MAX_PIPER_WER of its sentence."""
    check_invariants(events)
    finals = finals_of(events)
    assert [f["utterance"] for f in finals] == [0, 1]
    assert wer(FIRST, finals[0]["text"]) <= MAX_PIPER_WER, finals[0]["text"]
    assert wer(SECOND, finals[1]["text"]) <= MAX_PIPER_WER, finals[1]["text"]
    return finals


async def test_two_piper_sentences_in_real_time_give_two_matching_finals(server, speech):
    url, _ = server
    audio = two_sentences(speech)
    async with await DictationClient.connect(url) as client:
        events = await collect(client, audio, realtime=True)
    finals = two_matching_finals(events)
    assert finals[0]["end"] < finals[1]["start"]
    assert any(e["type"] == "partial" and e["text"] for e in events)
    assert [e["type"] for e in events].count("speech_started") == 2
    assert events[-1] == {"type": "closed", "utterances": 2, "audio_s": round(len(audio) / 16000, 3)}
    assert client.close_code == 1000


async def test_eager_finals_come_before_finals_with_the_same_text(server, speech):
    url, _ = server
    async with await DictationClient.connect(url, eager=True) as client:
        events = await collect(client, two_sentences(speech), realtime=True)
    two_matching_finals(events)
    assert events[-1]["type"] == "closed" and client.close_code == 1000


# short single sentences, said whole at three rates, that an agent stream's final on
# a 7 s encoder margin said twice ("Adding fast leads to wrong sums. Adding fast ...")
SHORT_SENTENCES = ("Adding fast leads to wrong sums.", "Mesh wire keeps chicks inside.")
SHORT_SCALES = (1.0, 0.8, 1.2)


@pytest.mark.parametrize("eager", [True, False], ids=["agent", "dictation"])
async def test_finals_of_short_sentences_have_no_more_word_errors_than_the_offline_transcription(server, eager):
    from bench.dictation_clips import make_short_clip

    url, _ = server
    worse = []
    for text in SHORT_SENTENCES:
        for scale in SHORT_SCALES:
            clip = make_short_clip(text, "piper", scale, steady=True)
            async with await DictationClient.connect(url, eager=eager) as client:
                events = await collect(client, clip.audio, realtime=True)
            check_invariants(events)
            streamed = " ".join(f["text"] for f in finals_of(events))
            async with httpx.AsyncClient(timeout=120) as http:
                reply = await http.post(url + "/v1/audio/transcriptions", data={"model": "whisper-1"},
                                        files={"file": ("clip.wav", write_wav(clip.audio, 16000), "audio/wav")})
            offline = reply.json()["text"]
            if wer(text, streamed) > wer(text, offline):
                worse.append(f"{clip.name}: {streamed!r} / offline {offline!r}")
    assert worse == []


async def test_espeak_speech_at_another_rate_and_in_f32(server):
    from gateway.audio import Encoding

    samples, rate = espeak_say(SECOND, voice="en-us", words_per_minute=150, rate=22050)
    audio = np.concatenate([samples, np.zeros(rate // 2, dtype=np.float32)])
    async with await DictationClient.connect(server[0], sample_rate=rate, encoding=Encoding.F32LE,
                                             interim=False) as client:
        events = await collect(client, audio, realtime=False)
    (final,) = finals_of(events)
    assert wer(SECOND, final["text"]) <= MAX_ESPEAK_WER, final["text"]
    assert not any(e["type"] == "partial" for e in events)


async def test_finalize_closes_the_utterance_without_waiting_for_silence(server, speech):
    async with await DictationClient.connect(server[0], silence_ms=5000, word_timestamps=True) as client:
        events = await collect(client, speech[FIRST], realtime=False, finalize=True)
    (final,) = finals_of(events)
    assert wer(FIRST, final["text"]) <= MAX_PIPER_WER
    assert [w["word"] for w in final["words"]] == final["text"].split()
    assert all(0 <= w["start"] <= w["end"] <= len(speech[FIRST]) / 16000 + 0.5 for w in final["words"])
    assert events[-1]["type"] == "closed" and client.close_code == 1000


async def test_silence_and_noise_give_no_text(server):
    rng = np.random.default_rng(7)
    noise = (rng.standard_normal(16000 * 10) * 0.05).astype(np.float32)
    async with await DictationClient.connect(server[0]) as client:
        events = await collect(client, np.concatenate([silence(10), noise]), realtime=False)
    assert not finals_of(events)
    assert not [e for e in events if e["type"] == "partial" and e["text"]]
    assert events[-1] == {"type": "closed", "utterances": 0, "audio_s": 20.0}


async def test_noisy_speech_at_10_db_is_still_transcribed(server, speech):
    audio = add_noise(np.concatenate([silence(0.5), speech[FIRST], silence(1.0)]), snr_db=10, seed=3)
    async with await DictationClient.connect(server[0], interim=False) as client:
        events = await collect(client, audio, realtime=False)
    assert wer(FIRST, " ".join(f["text"] for f in finals_of(events))) <= 0.4


async def test_a_sidecar_crash_mid_utterance_loses_no_speech(server, speech):
    url, proc = server
    audio = np.concatenate([silence(0.3), speech[LONG], silence(1.0)])
    crash_at_s = 2.5
    killed: list[int] = []

    def maybe_kill(sent_s: float) -> None:
        if sent_s >= crash_at_s and not killed:
            pids = sidecar_pids(proc.pid)
            assert len(pids) == 1
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    async with await DictationClient.connect(url) as bystander, await DictationClient.connect(url) as client:
        async def send():
            await client.stream_samples(audio, realtime=True, on_chunk_sent=maybe_kill)
            await client.end()

        sender = asyncio.create_task(send())
        events = [e async for e in client.events()]
        await sender
        # the other socket stayed up through the crash and still transcribes
        other = await collect(bystander, np.concatenate([speech[SECOND], silence(0.8)]), realtime=False)
    assert killed
    errors = [e for e in events if e["type"] == "error"]
    assert errors and errors[0]["code"] == "asr_unavailable" and errors[0]["retryable"] is True
    check_invariants(events)
    text = " ".join(f["text"] for f in finals_of(events))
    assert wer(LONG, text) <= MAX_PIPER_WER, text
    heard = words(text)
    assert {"juice", "lemons"} <= set(heard), text  # spoken before the crash (~2 s into the sentence)
    assert {"chopped", "garbage"} <= set(heard), text  # spoken after it
    assert wer(SECOND, " ".join(f["text"] for f in finals_of(other))) <= MAX_PIPER_WER
    async with httpx.AsyncClient() as http:
        health = (await http.get(url + "/health")).json()
        engines = (await http.get(url + "/v1/engines")).json()["engines"]
    assert health["asr"] == {"state": "ready"}
    assert [e["restarts"] for e in engines if e["kind"] == "asr"] == [1]


def test_openai_client_transcribes_a_wav_file(server, speech, tmp_path):
    import openai

    path = tmp_path / "speech.wav"
    path.write_bytes(write_wav(np.concatenate([speech[FIRST], silence(0.3), speech[SECOND]]), 16000))
    client = openai.OpenAI(base_url=server[0] + "/v1", api_key="unused-on-loopback", timeout=60)
    with open(path, "rb") as fh:
        result = client.audio.transcriptions.create(model="whisper-1", file=fh)
    assert wer(f"{FIRST} {SECOND}", result.text) <= MAX_PIPER_WER
    with open(path, "rb") as fh:
        verbose = client.audio.transcriptions.create(model="whisper-1", file=fh, response_format="verbose_json")
    assert verbose.language == "en"
    assert verbose.duration == pytest.approx(len(speech[FIRST]) / 16000 + 0.3 + len(speech[SECOND]) / 16000, abs=0.01)
    assert len(verbose.segments) >= 1


def test_voxgate_transcribe_prints_the_finals(server, speech, tmp_path):
    path = tmp_path / "speech.wav"
    samples, rate = piper_say(FIRST)
    path.write_bytes(write_wav(np.concatenate([samples, np.zeros(rate // 2, dtype=np.float32)]), rate))
    out = subprocess.run([sys.executable, "-m", "gateway.cli", "transcribe", str(path), "--url", server[0], "--fast"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**{k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_")},
                              "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    (line,) = out.stdout.strip().splitlines()
    assert line.startswith("[")
    assert wer(FIRST, line.split("] ", 1)[1]) <= MAX_PIPER_WER
