"""What the Flux front's end-to-end tests share: a real `voxgate serve --engines
asr` (the ASR sidecar with tiny.en), steady Piper speech (noise off, so the same
text is the same audio and the recognizer's words are the same every run), and
the turn grammar every client must see."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.e2e.gateway_process import running_gateway
from tests.support.speech import pcm16, piper_say, resample, silence

FIRST = "It's easy to tell the depth of a well."
SECOND = "Glue the sheet to the dark blue background."
KEY = "unused-on-loopback"
QUERY = {"model": "flux-general-en", "encoding": "linear16", "sample_rate": "16000"}
# one turn's events, one letter each: StartOfTurn, Update, EagerEndOfTurn, TurnResumed, EndOfTurn
TURN = re.compile(r"SU*(ERU*)*E?N")
LETTERS = {"StartOfTurn": "S", "Update": "U", "EagerEndOfTurn": "E", "TurnResumed": "R", "EndOfTurn": "N"}


@pytest.fixture(scope="module", name="server")
def gateway_server(tmp_path_factory):
    """The gateway's base URL (http://127.0.0.1:port)."""
    with running_gateway(tmp_path_factory.mktemp("data"), "asr", env={"VOXGATE_ASR_THREADS": "2"}) as gw:
        yield gw.url


def words_of(text: str) -> list[str]:
    """The words of ``text``, lower case, without punctuation."""
    return re.findall(r"[a-z0-9']+", text.lower())


def speech(*texts: str, tail_s: float = 1.5) -> bytes:
    """16 kHz 16-bit steady Piper speech: 0.5 s of silence, then each text followed by ``tail_s`` of it."""
    parts = [silence(0.5)]
    for text in texts:
        samples, rate = piper_say(text, steady=True)
        parts += [resample(samples, rate), silence(tail_s)]
    return pcm16(np.concatenate(parts))


def turn_letters(events: list[tuple[int, str]]) -> dict[int, str]:
    """Each turn's events (``(turn_index, event)`` in arrival order) as a string of ``LETTERS``."""
    out: dict[int, str] = {}
    for index, event in events:
        out[index] = out.get(index, "") + LETTERS[event]
    return out
