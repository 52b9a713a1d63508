"""``voxgate say``: synthesize text to a WAV file with the Pocket TTS model on this machine.

Works on any model directory in the released layout, including a random-weight
one from ``voxgate models make-random pocket DIR``. ``--voice`` is a voice id from
the model's ``embeddings/`` or the path of a WAV file to clone. With
``--temperature 0`` the flow noise is exactly zero and the output deterministic.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.audio import AudioFormatError, Encoding, read_wav, wav_header, write_wav
from gateway.config import Settings

if TYPE_CHECKING:  # torch is imported only when a model is loaded here
    from engines.pocket.model import PocketModel
    from engines.pocket.voice import VoiceState


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("say", help="synthesize text to a WAV file",
                       description="Synthesize text to a WAV file with Pocket TTS.")
    p.add_argument("text", help="what to say")
    p.add_argument("--voice", default=None,
                   help="a voice id from the model's embeddings/, or a WAV file to clone "
                        "(default: alba or the first voice)")
    p.add_argument("-o", "--output", type=Path, required=True, help="WAV file to write")
    p.add_argument("--model-dir", type=Path, default=None,
                   help="Pocket TTS model directory (default: VOXGATE_POCKET_DIR or <data_dir>/models/pocket)")
    p.add_argument("--temperature", type=_temperature, default=None,
                   help="flow noise temperature (default 0.3; 0 = deterministic)")
    p.add_argument("--seed", type=int, default=None, help="noise seed (default: a fresh one)")
    p.add_argument("--quantize", choices=["none", "int8"], default="none",
                   help="int8 dynamic quantization of the LM linears (default none: exact float32)")
    p.add_argument("--encoding", choices=[e.value for e in Encoding], default=Encoding.S16LE.value,
                   help="WAV sample format (default pcm_s16le)")
    p.add_argument("--url", default=None,
                   help="synthesize on a running gateway (e.g. http://127.0.0.1:8000) over /v1/tts instead of "
                        "loading the model here; the API key is taken from VOXGATE_API_KEY / VOXGATE_API_KEY_FILE")
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
    # The one place that picks where synthesis happens: this machine's model now,
    # a running gateway (/v1/tts) with --url.
    if args.url:
        return _say_remote(args)
    return _say_local(args)


def _say_remote(args: argparse.Namespace) -> int:
    import asyncio

    from gateway.client.base import Credentials
    from gateway.client.tts import TtsClosed, TtsError, speak_once

    if args.temperature is not None or args.model_dir is not None:
        return _fail("--temperature and --model-dir apply to the local model, not to --url")
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


def _fail(message: str, hint: str = "") -> int:
    print(f"voxgate say: {message}", file=sys.stderr)
    if hint:
        print(f"  hint: {hint}", file=sys.stderr)
    return 2


def _say_local(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    model_dir = args.model_dir or settings.pocket_model_dir
    try:
        import torch

        from engines.base import EngineError
        from engines.pocket import load_model, synthesize
        from engines.pocket.engine import GET_MODEL_HINT
        from engines.pocket.model import MODEL_FILE
    except ImportError as exc:
        return _fail(f"Pocket TTS needs the tts extra ({exc.name} is not installed)",
                     "pip install 'voxgate[tts]'")
    if settings.tts_threads:
        torch.set_num_threads(settings.tts_threads)
    if not (model_dir / MODEL_FILE).is_file():
        return _fail(f"Pocket TTS weights not found: {model_dir / MODEL_FILE}", GET_MODEL_HINT)
    started = time.monotonic()
    try:
        model = load_model(model_dir, quantize=args.quantize == "int8")
        voice, voice_name = _resolve_voice(model, args.voice)
        settings_ = model.defaults
        if args.temperature is not None:
            import dataclasses

            settings_ = dataclasses.replace(settings_, temperature=args.temperature)
        audio = synthesize(model, args.text, voice, settings_, seed=args.seed)
    except EngineError as exc:
        return _fail(str(exc), getattr(exc, "hint", ""))
    except (AudioFormatError, ValueError) as exc:
        return _fail(str(exc))
    try:
        args.output.write_bytes(write_wav(audio, model.sample_rate, Encoding(args.encoding)))
    except OSError as exc:
        return _fail(f"cannot write {args.output}: {exc.strerror}")
    seconds = len(audio) / model.sample_rate
    print(f"wrote {args.output}: {seconds:.2f} s of audio at {model.sample_rate} Hz, voice {voice_name} "
          f"(in {time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def _resolve_voice(model: PocketModel, voice: str | None) -> tuple[VoiceState, str]:
    """(VoiceState, name) for a voice id, a WAV path to clone, or the default voice."""
    from engines.base import UnknownVoice

    ids = model.voice_ids()
    if voice is None:
        if not ids:
            raise UnknownVoice("(default)", ids)
        name = "alba" if "alba" in ids else ids[0]
        return model.load_voice(name), name
    if voice in ids:
        return model.load_voice(voice), voice
    path = Path(voice)
    if path.suffix.lower() == ".wav" or path.is_file():
        if not path.is_file():
            raise ValueError(f"--voice: no such WAV file: {path}")
        samples, rate = read_wav(path.read_bytes())
        return model.clone_voice(samples, rate), f"cloned from {path}"
    raise UnknownVoice(voice, ids)
