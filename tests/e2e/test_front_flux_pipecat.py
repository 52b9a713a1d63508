"""Pipecat's ``DeepgramFluxSTTService`` against /v2/listen of a real `voxgate
serve` (the ASR sidecar with tiny.en), in a minimal Pipecat pipeline: Flux owns
the turns, so no VAD stage; steady Piper speech; the service's turn events, its
eager end of turn and the finals it pushes, with their exact words."""

from __future__ import annotations

import itertools
import re
import warnings

import pytest

from tests.e2e.flux_support import (
    FIRST,
    KEY,
    SECOND,
    gateway_server,  # noqa: F401  (the `server` fixture)
    speech,
    words_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # Pipecat's own, at import
    pytest.importorskip("pipecat", reason="pipecat-ai is not installed (pip install 'voxgate[test]' on Python >= 3.11)")
    from pipecat.frames.frames import ErrorFrame, InterimTranscriptionFrame, STTUpdateSettingsFrame
    from pipecat.services.deepgram.flux.stt import DeepgramFluxSTTService

    from tests.support.pipecat_driver import Run

LETTERS = {"on_start_of_turn": "S", "on_eager_end_of_turn": "E", "on_turn_resumed": "R", "on_end_of_turn": "N"}


def flux_service(server: str, **settings: object) -> tuple[DeepgramFluxSTTService, list[tuple[str, str]]]:
    """The service on /v2/listen, and the list its turn events are recorded in."""
    stt = DeepgramFluxSTTService(api_key=KEY, url=server.replace("http://", "ws://") + "/v2/listen",
                                 sample_rate=16000, enable_eager_end_of_turn=True,
                                 settings=DeepgramFluxSTTService.Settings(**settings))
    events: list[tuple[str, str]] = []
    for name in LETTERS:
        async def record(_service: object, transcript: str = "", *, name: str = name) -> None:
            events.append((name, transcript))

        stt.add_event_handler(name, record)
    return stt, events


async def test_each_turn_is_start_eager_end_and_end_with_the_exact_words(server):
    # a 2 s end-of-turn silence leaves the speculative final ample time: an eager end comes every turn
    stt, events = flux_service(server, eot_threshold=1.0, eot_timeout_ms=2000)
    async with Run(stt) as run:
        await run.send_audio(speech(FIRST, SECOND, tail_s=2.5))
        await run.wait_for(lambda heard: len(heard.finals()) >= 2)
    letters = "".join(LETTERS[name] for name, _ in events)
    assert re.fullmatch(r"(S(ER)*EN){2}", letters), letters
    ends = [text for name, text in events if name == "on_end_of_turn"]
    eager = [text for (name, text), (after, _) in itertools.pairwise(events)
             if (name, after) == ("on_eager_end_of_turn", "on_end_of_turn")]
    assert eager == ends and [words_of(text) for text in ends] == [words_of(FIRST), words_of(SECOND)]
    finals = run.heard.finals()
    assert [f.text for f in finals] == ends and all(f.finalized for f in finals)
    assert run.heard.of(InterimTranscriptionFrame), "Flux's Updates are Pipecat's interim transcripts"
    assert not run.heard.of(ErrorFrame)


async def test_a_settings_update_it_cannot_honour_is_refused_and_the_turns_go_on(server):
    """Pipecat sends numerals as a Configure: the ConfigureFailure reaches the pipeline as an error."""
    stt, _ = flux_service(server)
    async with Run(stt) as run:
        errors: list[ErrorFrame] = []

        @run.worker.event_handler("on_pipeline_error")
        async def on_error(_worker: object, frame: ErrorFrame) -> None:
            errors.append(frame)  # a service's error goes upstream, to the worker, not to the collector

        await run.worker.queue_frame(STTUpdateSettingsFrame(delta=DeepgramFluxSTTService.Settings(
            numerals=True)))
        await run.send_audio(speech(FIRST))
        await run.wait_for(lambda heard: len(heard.finals()) >= 1)
    (error,) = errors
    assert "numerals=true: not supported; numbers are written the way the recognizer writes them" in error.error
    assert [words_of(f.text) for f in run.heard.finals()] == [words_of(FIRST)]
