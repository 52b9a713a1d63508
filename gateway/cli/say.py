"""``voxgate say``: synthesize text to a WAV file, on this machine or on a running gateway.

Without ``--url`` the text goes through the same TTS engine the gateway would
use (``gateway.app.build_tts_engines`` and ``default_tts_engine``; ``--engine``
picks another), behind the engine interface: Piper speaks with its bundled
voice and no download; Pocket needs its weights (``voxgate models pull pocket``,
or a random-weight directory from ``voxgate models make-random pocket DIR``).
``--voice`` is one of the engine's voice ids, or, for an engine that clones, the
path of a WAV file to clone (the clone is dropped again when the WAV is written).
Pocket's ``--temperature 0`` makes its flow noise exactly zero and the output
deterministic. With ``--url`` the text goes to a running gateway's /v1/tts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gateway.audio import Encoding, wav_header, write_wav
from gateway.config import Settings

if TYPE_CHECKING:
    from engines.base import TtsEngine

ENGINES = ("auto", "pocket", "piper", "omnivoice")
POCKET_ONLY = (("model_dir", "--model-dir"), ("quantize", "--quantize"), ("temperature", "--temperature"))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("say", help="synthesize text to a WAV file",
                       description="Synthesize text to a WAV file with a TTS engine on this machine "
                                   "(the gateway's default engine unless --engine names one), or on a "
                                   "running gateway with --url.")
    p.add_argument("text", help="what to say")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="TTS engine (default: VOXGATE_TTS_ENGINE, auto: pocket when its weights are on disk, "
                        "else piper; pocket when --model-dir is given)")
    p.add_argument("--voice", default=None,
                   help="a voice id of the engine, or a WAV file to clone (engines that clone) "
                        "(default: the engine's default voice)")
    p.add_argument("-o", "--output", type=Path, required=True, help="WAV file to write")
    p.add_argument("--model-dir", type=Path, default=None,
                   help="Pocket TTS model directory (default: VOXGATE_POCKET_DIR or <data_dir>/models/pocket)")
    p.add_argument("--temperature", type=_temperature, default=None,
                   help="Pocket's flow noise temperature (default 0.3; 0 = deterministic)")
    p.add_argument("--seed", type=int, default=None,
                   help="noise seed, for Pocket and OmniVoice (default: a fresh one)")
    p.add_argument("--quantize", choices=["none", "int8"], default=None,
                   help="Pocket's int8 dynamic quantization of the LM linears (default none: exact float32)")
    p.add_argument("--encoding", choices=[e.value for e in Encoding], default=Encoding.S16LE.value,
                   help="WAV sample format (default pcm_s16le)")
    p.add_argument("--url", default=None,
                   help="synthesize on a running gateway (e.g. http://127.0.0.1:8000) over /v1/tts instead of "
                        "on this machine; the API key is taken from VOXGATE_API_KEY / VOXGATE_API_KEY_FILE")
    p.set_defaults(func=_run)


def _temperature(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None
    if not 0 <= value <= 2:
        raise argparse.ArgumentTypeError(f"{raw!r} is out of range (0..2)")
    return value


def _run(args: argparse.Namespace) -> int:
    # The one place that picks where synthesis happens: an engine on this machine,
    # or a running gateway (/v1/tts) with --url.
    if args.url:
        return _say_remote(args)
    return _say_local(args)


def _say_remote(args: argparse.Namespace) -> int:
    from gateway.client.base import Credentials
    from gateway.client.tts import TtsClosed, TtsError, speak_once

    local = [flag for name, flag in (*POCKET_ONLY, ("engine", "--engine")) if getattr(args, name) is not None]
    if local:
        return _fail(f"{_flags(local)} to an engine on this machine, not to --url")
    started = time.monotonic()
    try:
        pcm, ready = asyncio.run(speak_once(args.url, args.text, credentials=Credentials(Settings.from_env().api_key),
                                            voice=args.voice, seed=args.seed, encoding=args.encoding))
    except (TtsError, TtsClosed, OSError, TimeoutError) as exc:
        return _fail(f"{args.url}: {exc}")
    encoding = Encoding(args.encoding)
    try:
        args.output.write_bytes(wav_header(ready["sample_rate"], encoding, len(pcm) // encoding.sample_bytes) + pcm)
    except OSError as exc:
        return _fail(f"cannot write {args.output}: {exc.strerror}")
    seconds = len(pcm) / encoding.sample_bytes / ready["sample_rate"]
    print(f"wrote {args.output}: {seconds:.2f} s of audio at {ready['sample_rate']} Hz, voice {ready['voice']} "
          f"from {args.url} (in {time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def _flags(flags: list[str]) -> str:
    return f"{', '.join(flags)} {'applies' if len(flags) == 1 else 'apply'}"


def _fail(message: str, hint: str = "") -> int:
    print(f"voxgate say: {message}", file=sys.stderr)
    if hint:
        print(f"  hint: {hint}", file=sys.stderr)
    return 2


def _local_settings(args: argparse.Namespace) -> tuple[Settings, str, str]:
    """(settings, engine id, why that engine) for a synthesis on this machine."""
    from gateway.app import default_tts_engine

    settings = Settings.from_env()
    changes: dict[str, object] = {"pocket_quantize": args.quantize or "none"}
    if args.model_dir is not None:
        changes["pocket_dir"] = args.model_dir
    settings = settings.replace(**changes)
    if args.engine not in (None, "auto"):
        engine_id, why = args.engine, "--engine"
    elif args.model_dir is not None:
        engine_id, why = "pocket", "--model-dir names a Pocket TTS model"
    else:
        auto = settings if args.engine is None else settings.replace(tts_engine="auto")
        engine_id, why = default_tts_engine(auto, auto.engines)
    return settings.replace(engines=(engine_id,)), engine_id, why


def _say_local(args: argparse.Namespace) -> int:
    from engines.base import EngineError

    settings, engine_id, why = _local_settings(args)
    if engine_id != "pocket":
        given = [flag for name, flag in POCKET_ONLY if getattr(args, name) is not None]
        if given:
            return _fail(f"{_flags(given)} to Pocket TTS; the engine is {engine_id} ({why})",
                         "pass --engine pocket")
    if args.seed is not None and engine_id == "piper":
        return _fail("--seed does not apply to Piper: its noise is drawn inside the voice's ONNX graph")
    try:
        wav = _voice_wav(args.voice)
    except OSError as exc:
        return _fail(f"--voice: cannot read {args.voice}: {exc.strerror}")
    started = time.monotonic()
    try:
        audio, rate, voice = asyncio.run(_synthesize(settings, engine_id, args, wav))
    except EngineError as exc:
        return _fail(str(exc), exc.hint)
    except _Refused as exc:
        return _fail(*exc.args)
    try:
        args.output.write_bytes(write_wav(audio, rate, Encoding(args.encoding)))
    except OSError as exc:
        return _fail(f"cannot write {args.output}: {exc.strerror}")
    print(f"wrote {args.output}: {len(audio) / rate:.2f} s of audio at {rate} Hz, {engine_id} voice {voice} "
          f"(in {time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


class _Refused(Exception):
    """(message, hint) for the user: the engine is not ready, or bad input."""


def _voice_wav(voice: str | None) -> bytes | None:
    """The bytes of ``--voice`` when it names a file (a WAV to clone, unless the engine has a voice of that id)."""
    if voice is None or not Path(voice).is_file():
        return None
    return Path(voice).read_bytes()


async def _synthesize(settings: Settings, engine_id: str, args: argparse.Namespace,
                      wav: bytes | None) -> tuple[np.ndarray, int, str]:
    """(float32 audio, its rate, the voice's name) from the engine ``engine_id``."""
    from engines.base import EngineState, SynthesisOptions
    from gateway.app import build_tts_engines

    try:
        engine = build_tts_engines(settings)[engine_id]
    except ImportError as exc:
        raise _Refused(f"the {engine_id} engine needs a package that is not installed ({exc.name})",
                       "pip install 'voxgate[tts]'") from None
    await engine.load()
    try:
        status = engine.status()
        if status.state is not EngineState.READY:
            raise _Refused(status.detail or f"the {engine_id} engine is {status.state.value}", status.hint)
        voice, name, cloned = await _resolve_voice(engine, args.voice, wav)
        try:
            options = SynthesisOptions(temperature=args.temperature, seed=args.seed)
            stream = engine.open_stream(args.text, voice, options)
            frames = [frame async for frame in stream.frames()]
        finally:
            if cloned and voice is not None:
                await engine.delete_voice(voice)
    finally:
        await engine.close()
    audio = np.concatenate(frames).astype(np.float32) if frames else np.zeros(0, np.float32)
    return audio, engine.info().sample_rate, name


async def _resolve_voice(engine: TtsEngine, voice: str | None, wav: bytes | None) -> tuple[str | None, str, bool]:
    """(voice id, its name for the summary line, whether it is a clone to drop afterwards)."""
    from engines.base import UnknownVoice

    if voice is None:
        default = engine.info().default_voice
        return default, default or "(default)", False
    ids = [v.id for v in engine.voices()]
    if voice in ids:
        return voice, voice, False
    if wav is None:
        if voice.lower().endswith(".wav"):
            raise _Refused(f"--voice: no such WAV file: {voice}")
        raise UnknownVoice(voice, ids)
    clone_id = f"voxgate-say-{os.getpid()}"
    await engine.clone_voice(clone_id, wav)
    return clone_id, f"cloned from {voice}", True
