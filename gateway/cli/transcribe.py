"""``voxgate transcribe FILE.wav``: stream a WAV file through /v1/dictation.

Audio is sent in real time by default (like a microphone), or as fast as the
socket takes it with ``--fast``. Finals go to stdout, one line per utterance;
partials are shown on stderr when it is a terminal (``--json`` prints every
event as one JSON line instead). The API key comes from VOXGATE_API_KEY /
VOXGATE_API_KEY_FILE, like the server's.

The session is resumable: a connection cut for less than the server's grace
(``VOXGATE_RESUME_GRACE_S``) is resumed without a lost or repeated word
(gateway/client/dictation.py). A server that holds no sessions
(grace 0) is used without; ``--no-resume`` asks for none.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from gateway.audio import AudioFormatError, Encoding, read_wav, resample
from gateway.config import Settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("transcribe", help="stream a WAV file through /v1/dictation and print the transcript",
                       description="Stream a WAV file through a running gateway's /v1/dictation socket.")
    p.add_argument("file", type=Path, help="a WAV file (any rate, any channel count)")
    p.add_argument("--url", default=None, help="gateway base URL (default http://127.0.0.1:<VOXGATE_PORT>)")
    p.add_argument("--fast", action="store_true", help="send as fast as possible instead of in real time")
    p.add_argument("--language", default=None, help="ISO 639-1 code or auto (default: auto)")
    p.add_argument("--silence-ms", type=int, default=None, help="trailing silence that ends an utterance")
    p.add_argument("--word-timestamps", action="store_true", help="ask for word timestamps (with --json)")
    p.add_argument("--no-interim", action="store_true", help="do not ask for partials")
    p.add_argument("--term", action="append", default=None, metavar="TERM",
                   help="a word the recognizer should expect (a name, product, jargon); repeat for more")
    p.add_argument("--chunk-ms", type=int, default=100, help="audio per message (default 100 ms)")
    p.add_argument("--json", action="store_true", help="print every event as a JSON line")
    p.add_argument("--no-resume", action="store_true", help="end on a dropped connection instead of resuming")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    url = args.url or f"http://127.0.0.1:{settings.port}"
    try:
        samples, rate = read_wav(args.file.read_bytes())
    except OSError as exc:
        print(f"voxgate transcribe: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except AudioFormatError as exc:
        print(f"voxgate transcribe: {args.file}: {exc}", file=sys.stderr)
        return 2
    if rate > 48000 or rate < 8000:
        samples, rate = resample(samples, rate, ASR_RATE), ASR_RATE
    return asyncio.run(transcribe(url, samples, rate, args, api_key=settings.api_key))


async def transcribe(url: str, samples: np.ndarray, rate: int, args: argparse.Namespace,
                     api_key: str | None = None) -> int:
    from gateway.client.base import Credentials
    from gateway.client.dictation import DictationClient, DictationRefused
    from gateway.client.resume import ResumeFailed

    show_partials = not args.json and not args.no_interim and sys.stderr.isatty()

    async def connect(resume: bool) -> DictationClient:
        return await DictationClient.connect(
            url, sample_rate=rate, encoding=Encoding.S16LE, language=args.language,
            interim=not args.no_interim, word_timestamps=args.word_timestamps or None,
            silence_ms=args.silence_ms, terms=args.term, credentials=Credentials(api_key=api_key),
            resume=resume)

    try:
        try:
            client = await connect(resume=not args.no_resume)
        except DictationRefused as exc:
            if exc.code != 4400 or not exc.reason.startswith("resumable:"):
                raise
            client = await connect(resume=False)  # this server holds no session after a drop
    except DictationRefused as exc:
        print(f"voxgate transcribe: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"voxgate transcribe: cannot connect to {url}: {exc}", file=sys.stderr)
        return 1
    async with client:
        if args.json:
            print(json.dumps(client.ready), flush=True)

        async def send() -> None:
            await client.stream_samples(samples, chunk_ms=args.chunk_ms, realtime=not args.fast)
            await client.end()

        sender = asyncio.create_task(send())
        try:
            async for event in client.events():
                if args.json:
                    print(json.dumps(event), flush=True)
                elif event["type"] == "partial" and show_partials:
                    print(f"\r\033[K… {event['text'][-100:]}", end="", file=sys.stderr, flush=True)
                elif event["type"] == "final":
                    if show_partials:
                        print("\r\033[K", end="", file=sys.stderr, flush=True)
                    print(f"[{event['start']:7.2f} - {event['end']:7.2f}] {event['text']}", flush=True)
                elif event["type"] == "error":
                    print(f"voxgate transcribe: {event['code']}: {event['message']}", file=sys.stderr)
        except ResumeFailed as exc:
            print(f"voxgate transcribe: the connection dropped and {exc}", file=sys.stderr)
            return 1
        finally:
            if not sender.done():
                sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
    if client.close_code not in (1000, None):
        print(f"voxgate transcribe: closed {client.close_code} {client.close_reason}", file=sys.stderr)
        return 1
    return 0
