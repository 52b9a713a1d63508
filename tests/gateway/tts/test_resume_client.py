"""The real TTS client resuming through a relay that breaks the path, against
the real app on a real uvicorn with the fake engine: a message lost on the way
up is sent again, every frame arrives once and in order, and acks keep the
server's kept messages small."""

from __future__ import annotations

from gateway.audio import Encoding, encode
from gateway.client.tts import TtsClient
from tests.gateway.fakes import FakeTtsEngine, expected_audio, frames_for
from tests.gateway.helpers import tts_app
from tests.support.cut_relay import CutRelay
from tests.support.net import running_server

FIRST = "The first line, said before the path broke."
SECOND = "The second line, sent into a path that went silent."


async def test_a_message_lost_in_a_stalled_path_is_sent_again_and_no_frame_repeats(tmp_path):
    engine = FakeTtsEngine()
    app = tts_app(tmp_path, engine)
    async with running_server(app) as url:
        relay = CutRelay("127.0.0.1", int(url.rsplit(":", 1)[1]))
        await relay.start()
        try:
            tts = await TtsClient.connect(relay.url, resume=True, ping_s=0.5)
            async with tts:
                first = await tts.synthesize(FIRST, timeout_s=30)
                relay.stall()  # what goes up now is lost, and nothing closes
                second = await tts.synthesize(SECOND, timeout_s=30)  # the reconnect sends it again
                closed = await tts.close(30)
        finally:
            await relay.aclose()
    assert tts.resumes == 1 and relay.connections == 2
    assert first.audio == encode(expected_audio(FIRST), Encoding.S16LE)
    assert second.audio == encode(expected_audio(SECOND), Encoding.S16LE)
    assert second.start == {"type": "start", "id": "u2", "text": SECOND, "seq": frames_for(FIRST) + 3}
    assert closed == {"type": "closed", "utterances": 2, "seq": 2 * 2 + frames_for(FIRST) + frames_for(SECOND) + 1,
                      "audio_s": round((frames_for(FIRST) + frames_for(SECOND)) * 0.08, 3)}
