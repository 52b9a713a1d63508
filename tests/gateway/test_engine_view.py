"""GET /v1/engines: an admin reads how to fix a missing engine (paths, commands);
nobody else does, a key holder or a PIN guest included (gateway/engine_view.py)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from engines.base import EngineState, EngineStatus, TtsInfo
from gateway.engine_view import is_local_path
from tests.gateway.helpers import make_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.waiting import wait_until

KEY = "k" * 32
REMOTE = ("203.0.113.9", 40000)
WEIGHTS = "/srv/voxgate/models/pocket/model.safetensors"
PULL = "run `voxgate models pull pocket` to download it"
ASR_PATH = "/srv/models/whisper-small-ct2"


class MissingPocket:
    """A TTS engine whose weights are not on disk, its status saying where and how."""

    def info(self) -> TtsInfo:
        return TtsInfo(id="pocket", sample_rate=24000, frame_samples=1920)

    def status(self) -> EngineStatus:
        return EngineStatus(EngineState.MISSING, f"Pocket TTS weights not found: {WEIGHTS}", PULL)

    async def load(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def voices(self) -> list[object]:
        return []


def missing_asr() -> FakeSidecar:
    asr = FakeSidecar(state=EngineState.MISSING, detail=f"no model at {ASR_PATH}",
                      hint="voxgate models pull asr")
    asr.model_name = ASR_PATH
    return asr


TTS_COMMON = {"kind": "tts", "default": True, "id": "pocket", "sample_rate": 24000, "frame_samples": 1920,
              "languages": ["en"], "can_clone": False, "default_voice": None, "options": [],
              "clone_uses_transcript": False, "state": "missing"}
ASR_COMMON = {"kind": "asr", "id": "asr", "languages": [], "multilingual": None, "compute_type": "int8",
              "restarts": 0, "streams": 0, "turn_model": False, "state": "missing"}
FOR_ADMINS = {"engines": [
    {**TTS_COMMON, "default_reason": "Pocket TTS is enabled", "detail": f"Pocket TTS weights not found: {WEIGHTS}",
     "hint": PULL},
    {**ASR_COMMON, "model": ASR_PATH, "detail": f"no model at {ASR_PATH}", "hint": "voxgate models pull asr"},
]}
FOR_EVERYONE_ELSE = {"engines": [TTS_COMMON, {**ASR_COMMON, "model": "whisper-small-ct2"}]}


def client_for(tmp_path, **kw):
    return make_client(tmp_path, tts={"pocket": MissingPocket()}, asr=missing_asr(), engines=("pocket", "asr"), **kw)


def test_an_admin_reads_the_details(tmp_path) -> None:
    with client_for(tmp_path) as local:  # loopback: the admin of a default install
        wait_until(lambda: local.get("/health").status_code == 200, "the app ready")
        assert local.get("/v1/engines").json() == FOR_ADMINS


def test_a_key_holder_who_is_not_admin_gets_no_path_or_command(tmp_path) -> None:
    with client_for(tmp_path, api_key=KEY, host="0.0.0.0", client=REMOTE) as remote:
        wait_until(lambda: remote.get("/health").status_code == 200, "the app ready")
        r = remote.get("/v1/engines", headers={"Authorization": f"Bearer {KEY}"})
        assert (r.status_code, r.json()) == (200, FOR_EVERYONE_ELSE)
        assert "/srv/" not in r.text and "voxgate models" not in r.text


def test_a_pin_guest_gets_no_path_or_command(tmp_path) -> None:
    with client_for(tmp_path) as local:
        wait_until(lambda: local.get("/health").status_code == 200, "the app ready")
        pin = local.post("/v1/admin/share").json()["pin"]
        guest = TestClient(local.app, client=REMOTE)
        guest.app_state.update(local.app_state)  # the same lifespan state, seen from a LAN address
        r = guest.get("/v1/engines", headers={"X-Voxgate-Pin": pin})
        assert (r.status_code, r.json()) == (200, FOR_EVERYONE_ELSE)
        assert "/srv/" not in r.text and "voxgate models" not in r.text


@pytest.mark.parametrize(("name", "local"), [
    ("tiny.en", False), ("Systran/faster-whisper-small", False), ("/srv/models/x", True),
    ("~/models/x", True), ("./models/x", True), ("C:\\models\\x", True),
])
def test_what_counts_as_a_server_path(name, local) -> None:
    assert is_local_path(name) is local
