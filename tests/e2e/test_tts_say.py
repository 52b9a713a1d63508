"""``voxgate say``: the CLI in its own process, against a running gateway (``--url``)
and on this machine through the engine interface (Piper on a fresh data directory,
with no Pocket weights: the speech is proven real by transcribing it with tiny.en)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from gateway.app import create_app
from gateway.audio import Encoding, encode, read_wav
from gateway.config import Settings
from tests.gateway.fakes import FakeTtsEngine, expected_audio
from tests.support.listeners import FakeListener
from tests.support.net import running_server
from tests.support.speech import SENTENCES, resample, wer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


MAX_FEW_WER = 0.35  # tiny.en on a few Piper sentences (Piper's noise differs every run, so does tiny.en's error)


async def say(*args: str, data_dir: Path | None = None) -> tuple[int, str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "VOXGATE_PIPER_THREADS": "1"}
    if data_dir is not None:
        env["VOXGATE_DATA_DIR"] = str(data_dir)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from gateway.cli.main import main; raise SystemExit(main())", "say", *args,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, err.decode()


async def test_say_url_writes_the_gateway_audio(tmp_path):
    app = create_app(Settings(engines=(), data_dir=tmp_path), tts_engines={"pocket": FakeTtsEngine()},
                     share_listener=FakeListener())
    async with running_server(app) as url:
        out = tmp_path / "out.wav"
        code, err = await say("Said through the gateway.", "--url", url, "--seed", "11", "--voice", "marius",
                              "-o", str(out))
        assert code == 0, err
        samples, rate = read_wav(out.read_bytes())
        assert rate == 24000
        assert encode(samples, Encoding.S16LE) == encode(expected_audio("Said through the gateway.", 11),
                                                         Encoding.S16LE)
        assert f"voice marius from {url}" in err

        code, err = await say("hi", "--url", url, "--voice", "nobody", "-o", str(tmp_path / "x.wav"))
        assert code == 2
        assert err.startswith(f"voxgate say: {url}: unknown_voice: unknown voice 'nobody'; available voices: "
                              "alba, marius")
        assert not (tmp_path / "x.wav").exists()


def transcribe_tiny_en(samples, rate: int, data_dir: Path) -> str:
    from faster_whisper import WhisperModel

    from engines.asr.models import resolve_model

    model = WhisperModel(resolve_model("tiny.en", data_dir).source, device="cpu", compute_type="int8", cpu_threads=1)
    segments, _ = model.transcribe(resample(samples, rate, 16000), language="en", beam_size=1)
    return " ".join(segment.text for segment in segments)


async def test_say_on_a_fresh_machine_speaks_with_piper(tmp_path):
    data = tmp_path / "fresh"  # no Pocket weights: auto picks Piper and its bundled voice
    out = tmp_path / "piper.wav"
    text = " ".join(SENTENCES[:3])
    code, err = await say(text, "-o", str(out), data_dir=data)
    assert code == 0, err
    assert err.startswith(f"wrote {out}: ")
    assert "at 22050 Hz, piper voice en_US-joe-medium" in err
    samples, rate = read_wav(out.read_bytes())
    assert rate == 22050
    heard = transcribe_tiny_en(samples, rate, data)
    assert wer(text, heard) <= MAX_FEW_WER, heard
    assert not (data / "models" / "pocket").exists()


async def test_say_engine_and_voice_choices(tmp_path):
    data = tmp_path / "fresh"
    out = tmp_path / "out.wav"
    code, err = await say("Kick the ball straight.", "--engine", "piper", "--voice", "en_US-joe-medium",
                          "-o", str(out), data_dir=data)
    assert code == 0, err
    assert "piper voice en_US-joe-medium" in err
    assert read_wav(out.read_bytes())[1] == 22050
    out.unlink()

    weights = data / "models" / "pocket" / "model.safetensors"
    refusals = [
        (["--voice", "nobody"], "voxgate say: unknown voice 'nobody'; available voices: en_US-joe-medium\n"),
        (["--voice", str(tmp_path / "gone.wav")], f"voxgate say: --voice: no such WAV file: {tmp_path / 'gone.wav'}\n"),
        (["--engine", "pocket"],
         (f"voxgate say: Pocket TTS weights not found: {weights}\n  hint: run `voxgate models pull pocket` to "
         "download it, or `voxgate models make-random pocket DIR` for random weights (then set "
         "VOXGATE_POCKET_DIR=DIR)\n")),
        (["--temperature", "0", "--quantize", "int8"],
         ("voxgate say: --quantize, --temperature apply to Pocket TTS; the engine is piper (Pocket TTS weights not "
         f"found at {weights} (voxgate models pull pocket))\n  hint: pass --engine pocket\n")),
        (["--engine", "piper", "--seed", "3"],
         "voxgate say: --seed does not apply to Piper: its noise is drawn inside the voice's ONNX graph\n"),
        (["--engine", "piper", "--url", "http://127.0.0.1:9"],
         "voxgate say: --engine applies to an engine on this machine, not to --url\n"),
        (["--voice", str(tmp_path / "clip.wav"), "--engine", "piper"], ("voxgate say: Piper cannot clone voices; add "
         "a trained Piper voice (.onnx + .onnx.json) to a directory in VOXGATE_PIPER_VOICES instead\n")),
    ]
    (tmp_path / "clip.wav").write_bytes(encode_wav_of_silence())
    for extra, expected in refusals:
        code, err = await say("Hi.", *extra, "-o", str(out), data_dir=data)
        assert (code, err) == (2, expected), extra
        assert not out.exists()


def encode_wav_of_silence() -> bytes:
    import numpy as np

    from gateway.audio import write_wav

    return write_wav(np.zeros(16000, np.float32), 16000, Encoding.S16LE)
