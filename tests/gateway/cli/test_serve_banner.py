"""`voxgate serve`: the banner names the default TTS engine and the Wyoming
listener, and an unprotected Wyoming bind beyond loopback is refused."""

from __future__ import annotations

from gateway.cli.main import banner, main
from gateway.config import Settings


def test_the_banner_says_which_tts_engine_is_the_default_and_why(tmp_path):
    text = banner(Settings(data_dir=tmp_path, engines=("pocket", "piper", "asr")))
    weights = tmp_path / "models" / "pocket" / "model.safetensors"
    assert f"  tts default: piper (Pocket TTS weights not found at {weights} (voxgate models pull pocket))" in text
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"")
    text = banner(Settings(data_dir=tmp_path, engines=("pocket", "piper", "asr")))
    assert "  tts default: pocket (Pocket TTS is enabled and its weights are on disk)" in text
    assert "tts default" not in banner(Settings(data_dir=tmp_path, engines=("asr",)))


def test_the_banner_shows_the_wyoming_listener(tmp_path):
    text = banner(Settings(data_dir=tmp_path, engines=(), wyoming_uri="tcp://127.0.0.1:10300"))
    assert "  wyoming:     tcp://127.0.0.1:10300 (no auth: loopback only)" in text


def test_serve_refuses_a_public_wyoming_bind_without_trusted_networks(tmp_path, capsys, monkeypatch):
    for name in ("VOXGATE_TRUSTED_NETWORKS", "VOXGATE_WYOMING_URI", "VOXGATE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    code = main(["serve", "--engines", "none", "--data-dir", str(tmp_path), "--wyoming", "tcp://0.0.0.0:10300"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("voxgate: refusing to start: the Wyoming listener tcp://0.0.0.0:10300 is not on a "
                          "loopback address")
