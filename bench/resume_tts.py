"""The TTS half of bench/resume.py: N clients at once, each speaking the same
two sentences through its own cutting relay with ``resume=True``.

The gateway serves the bundled Piper voice with its noise off (as
tests/e2e/test_tts_resume_e2e.py does), so the same text gives the same samples
every run. Each level runs once uncut, then once per cut: every relay breaks its
path when its client gets its first frame (mid-synthesis: the second sentence is
not made yet), closing it and refusing new connections for the cut's length, or
(``stall``) forwarding nothing more without a close. Per level and cut it prints
the streams whose whole PCM is byte for byte the uncut run's, the first frame
after the resumed ``ready``, the reconnect (the relay carrying again to the
resumed ``ready``) and the resumes.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gateway.client.tts import TtsClient
from tests.e2e.gateway_process import running_gateway
from tests.e2e.test_tts_resume_e2e import TEXT, VOICE, steady_voice
from tests.support.cut_relay import CutRelay

PING_S = 1.0  # how soon a client notices a path that went silent
TIMEOUT_S = 120.0  # one message, eight syntheses sharing two cores
Summary = Callable[[list[float]], str]  # p50 and max of some seconds, as printed


@dataclass
class TtsRun:
    audio: bytes
    resumes: int
    first_frame_s: float | None  # resumed ready -> first frame after it
    reconnect_s: float | None  # relay back -> resumed ready


@contextmanager
def tts_gateway(streams: int) -> Iterator[int]:
    """A gateway serving the steady voice for ``streams`` clients at once; yields its port."""
    with tempfile.TemporaryDirectory() as voices, tempfile.TemporaryDirectory() as data:
        env = {"VOXGATE_PIPER_VOICES": str(steady_voice(Path(voices))), "VOXGATE_PIPER_GRAPH": "stock",
               "VOXGATE_TTS_ENGINE": "piper", "VOXGATE_RESUME_GRACE_S": "30",
               "VOXGATE_MAX_TTS_SESSIONS": str(max(16, streams)),
               "VOXGATE_MAX_TTS_SESSIONS_PER_CLIENT": str(streams)}
        with running_gateway(Path(data), "piper", env=env) as gw:
            yield int(gw.url.rsplit(":", 1)[1])


async def speak_through(port: int, cut: str | None) -> TtsRun:
    relay = CutRelay("127.0.0.1", port)
    await relay.start()
    frames: list[tuple[float, bytes]] = []
    try:
        tts = await TtsClient.connect(relay.url, voice=VOICE, resume=True, ping_s=PING_S)
        async with tts:
            await tts.speak(TEXT)
            while True:
                message = await tts.receive(TIMEOUT_S)
                if isinstance(message, bytes):
                    frames.append((time.monotonic(), message))
                    if cut is not None:
                        relay.break_once(cut)
                elif message["type"] == "end":
                    break
            closed = await tts.close(TIMEOUT_S)
            if closed is None:
                raise RuntimeError("the session ended without a closed event")
        mended = await relay.mended_at()
    finally:
        await relay.aclose()
    return TtsRun(b"".join(frame for _, frame in frames), tts.resumes,
                  *after_resume([at for at, _ in frames], tts.resumed_at, mended, cut))


def after_resume(arrivals: list[float], resumed: float | None, mended: float | None,
                 cut: str | None) -> tuple[float | None, float | None]:
    """(resumed ``ready`` to the first message after it, the path carrying again to the
    resumed ``ready``; a stall has no moment it carries again) from ``time.monotonic`` times."""
    if resumed is None:
        return None, None
    after = [at for at in arrivals if at >= resumed]
    return (after[0] - resumed if after else None,
            resumed - mended if mended is not None and cut != "stall" else None)


async def tts_level(port: int, streams: int, cuts: list[str], summary: Summary) -> None:
    uncut = await asyncio.gather(*(speak_through(port, None) for _ in range(streams)))
    reference = uncut[0].audio
    steady = sum(run.audio == reference for run in uncut)
    print(f"tts {streams} stream(s), uncut    : {len(reference)} bytes of PCM each; "
          f"identical to one another {steady}/{streams}", flush=True)
    for cut in cuts:
        runs = await asyncio.gather(*(speak_through(port, cut) for _ in range(streams)))
        same = sum(run.audio == reference for run in runs)
        label = "stall" if cut == "stall" else f"cut {cut} s"
        print(f"tts {streams} stream(s), {label:9}: resumed {sum(r.resumes for r in runs)}/{streams}; "
              f"first frame after reconnect {summary([r.first_frame_s for r in runs if r.first_frame_s is not None])}; "
              f"reconnect {summary([r.reconnect_s for r in runs if r.reconnect_s is not None])}; "
              f"identical audio {same}/{streams}", flush=True)
        for run in runs:
            if run.audio != reference:
                print(f"    {len(run.audio)} bytes against {len(reference)}; first difference at byte "
                      f"{next((i for i, (a, b) in enumerate(zip(run.audio, reference, strict=False)) if a != b), 'none')}")


def run_tts(levels: list[int], cuts: list[str], summary: Summary) -> None:
    with tts_gateway(max(levels)) as port:
        for streams in levels:
            asyncio.run(tts_level(port, streams, cuts, summary))
