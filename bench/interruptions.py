"""Interruptions benchmark: does ``text_spoken`` name the words actually played?

    flock /work/wt/bench.lock python bench/interruptions.py [--count 50] [--seed 1]

Starts one `voxgate serve --engines asr,piper` and, on one /v1/tts socket, speaks
``--count`` passages of three Harvard sentences, each interrupted at a random
offset (0.4 s to 6 s into it): the client reads the audio up to the offset, sends
``cancel`` with ``played_ms`` and keeps ``text_spoken``. The audio it had up to the
offset goes to the gateway's own ASR (``/v1/audio/transcriptions``, tiny.en); the
words of the passage the transcript covers (the prefix nearest to it by word edit
distance) are the words actually played. Printed: how far ``text_spoken``'s word
count is from that (target: within 1 word), and the ASR's own word errors on that
prefix as the noise floor of the measure.

Compute: the same interruptions on Piper in this process (no socket): frames the
stream yields after ``cancel()`` (target 0: it stops at the next frame; a sentence
already on a worker finishes there and is dropped, which this does not count).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import processes  # noqa: E402
from bench.processes import gateway_env  # noqa: E402
from gateway.audio import write_wav  # noqa: E402
from tests.support.speech import SENTENCES  # noqa: E402
from tests.support.speech import word_errors as edit_errors  # noqa: E402

RATE = 22050  # Piper's own: no resampling in the measure


def passages(count: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.sample(SENTENCES, 3)) for _ in range(count)]


def heard_prefix(text: str, heard: str) -> tuple[int, int]:
    """(words of ``text`` that ``heard`` covers, the ASR's word errors on them)."""
    words = text.split()
    scores = [(edit_errors(" ".join(words[:k]), heard)[0], k) for k in range(len(words) + 1)]
    errors, k = min(scores)
    return k, errors


async def transcribe(http, pcm: bytes) -> str:
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    response = await http.post("/v1/audio/transcriptions", data={"language": "en"},
                               files={"file": ("played.wav", write_wav(samples, RATE), "audio/wav")})
    response.raise_for_status()
    return str(response.json()["text"])


async def interrupt_once(ws, text: str, offset_ms: int, base_ms: int, index: int) -> tuple[bytes, dict, int]:
    """Speak ``text``, read up to ``offset_ms`` of it, cancel; (audio played, the answer, its played_ms)."""
    await ws.send(json.dumps({"type": "speak", "text": text, "id": f"p{index}"}))
    audio = b""
    while len(audio) < offset_ms * RATE // 1000 * 2:
        message = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(message, bytes):
            audio += message
        elif json.loads(message)["type"] == "end":
            break
    played = audio[:offset_ms * RATE // 1000 * 2]
    played_ms = base_ms + len(played) // 2 * 1000 // RATE
    await ws.send(json.dumps({"type": "cancel", "played_ms": played_ms}))
    while True:
        message = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(message, str) and json.loads(message)["type"] == "cancelled":
            return played, json.loads(message), played_ms
        if isinstance(message, str) and json.loads(message)["type"] == "error":
            raise RuntimeError(message)


async def boundaries(url: str, texts: list[str], offsets: list[int]) -> list[tuple[int, int, int]]:
    """Per interruption: (words in text_spoken, words the ASR heard, the ASR's errors on them)."""
    import httpx
    import websockets

    out = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as http, \
            websockets.connect(url.replace("http://", "ws://") + f"/v1/tts?engine=piper&sample_rate={RATE}",
                               max_size=None) as ws:
        json.loads(await ws.recv())  # ready
        base_ms = 0
        for index, (text, offset) in enumerate(zip(texts, offsets, strict=True)):
            played, answer, base_ms = await interrupt_once(ws, text, offset, base_ms, index)
            assert answer["text_spoken"] + answer["text_remaining"] == text, answer
            heard, errors = heard_prefix(text, await transcribe(http, played))
            out.append((len(answer["text_spoken"].split()), heard, errors))
    return out


async def compute_stops(texts: list[str], offsets: list[int]) -> list[int]:
    """Per interruption on an in-process Piper: the frames it yields after cancel."""
    from engines.piper.engine import PiperEngine

    engine = PiperEngine(threads=2)
    await engine.load()
    out = []
    try:
        for text, offset in zip(texts, offsets, strict=True):
            stream = engine.open_stream(text)
            frames = stream.frames()
            samples = 0
            async for frame in frames:
                samples += len(frame)
                if samples * 1000 >= offset * engine.info().sample_rate:
                    break
            stream.cancel()
            out.append(sum([1 async for _ in frames]))
    finally:
        await engine.close()
    return out


def report(results: list[tuple[int, int, int]], stops: list[int]) -> None:
    off = [abs(spoken - heard) for spoken, heard, _ in results]
    print("text_spoken - heard, per interruption (words):", " ".join(f"{s - h:+d}" for s, h, _ in results))
    within = sum(1 for d in off if d <= 1)
    print(f"\ninterruptions: {len(results)}")
    print("| measure | value |\n|---|---|")
    print(f"| text_spoken vs words heard by the ASR, mean | {statistics.mean(off):.2f} words |")
    print(f"| ... p95 / max | {float(np.percentile(off, 95)):.0f} / {max(off)} words |")
    print(f"| ... within 1 word | {within}/{len(off)} ({100 * within / len(off):.0f} %) |")
    print(f"| ... text_spoken longer / shorter than heard | "
          f"{sum(s > h for s, h, _ in results)} / {sum(s < h for s, h, _ in results)} |")
    print(f"| ASR word errors on the heard prefix (noise floor), mean | "
          f"{statistics.mean(e for _, _, e in results):.2f} |")
    print(f"| frames yielded after cancel (Piper, in process) | max {max(stops)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = passages(args.count, rng)
    offsets = [rng.randint(400, 6000) for _ in texts]
    with tempfile.TemporaryDirectory(prefix="voxgate-bench-") as data:
        proc, url = processes.start_gateway(
            ["--host", "127.0.0.1", "--engines", "asr,piper"],
            gateway_env({"VOXGATE_DATA_DIR": data, "VOXGATE_TTS_ENGINE": "piper", "VOXGATE_ASR_THREADS": "2"}),
            health_timeout_s=180, quiet_stdout=True)
        try:
            results = asyncio.run(boundaries(url, texts, offsets))
        finally:
            proc.terminate()
            proc.wait(30)
    stops = asyncio.run(compute_stops(texts, offsets))
    report(results, stops)


if __name__ == "__main__":
    main()
