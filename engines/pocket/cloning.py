"""Turning a speech sample into the audio a voice prompt is made from.

Mono, resampled to 24 kHz with a polyphase filter, then cut to end on exactly 80 ms
of silence: a prompt that stops mid-word makes the model continue that word at the
start of every chunk, and a long trailing silence delays the onset.
"""

from __future__ import annotations

import io
import math

import numpy as np
import torch
from scipy.io import wavfile
from scipy.signal import resample_poly


def read_wav(data: bytes) -> tuple[np.ndarray, int]:
    """(float32 [channels, samples] in [-1, 1], sample rate) from WAV bytes."""
    try:
        rate, samples = wavfile.read(io.BytesIO(data))
    except Exception as exc:
        raise ValueError(f"audio: not a readable WAV file ({exc})") from exc
    if samples.dtype == np.int16:
        audio = samples.astype(np.float32) / 32768.0
    elif samples.dtype == np.int32:
        audio = samples.astype(np.float32) / 2147483648.0
    elif samples.dtype == np.uint8:
        audio = (samples.astype(np.float32) - 128.0) / 128.0
    else:
        audio = samples.astype(np.float32)
    audio = audio[None, :] if audio.ndim == 1 else audio.T
    return audio, int(rate)


def prepare_prompt_audio(wav: np.ndarray, sample_rate: int, target_rate: int) -> torch.Tensor:
    """Mono float32 [samples] at ``target_rate``, ending on a short pause."""
    audio = np.asarray(wav, dtype=np.float32)
    if audio.ndim == 2:
        audio = audio.mean(axis=0) if audio.shape[0] > 1 else audio[0]
    if audio.ndim != 1 or audio.size == 0:
        raise ValueError("audio: expected a non-empty mono or [channels, samples] signal")
    if not np.isfinite(audio).all():
        raise ValueError("audio: contains NaN or infinite samples")
    if sample_rate != target_rate:
        common = math.gcd(int(sample_rate), int(target_rate))
        audio = resample_poly(audio, target_rate // common, sample_rate // common, axis=-1)
    return end_on_pause(torch.from_numpy(np.ascontiguousarray(audio)).to(torch.float32), target_rate)


def end_on_pause(wav: torch.Tensor, sample_rate: int, pause_s: float = 0.08, fade_s: float = 0.02,
                 floor_db: float = 35.0) -> torch.Tensor:
    """Cut trailing 20 ms frames quieter than ``floor_db`` below the loudest, fade, add a pause."""
    frame = max(1, int(0.02 * sample_rate))
    count = wav.shape[-1] // frame
    if count == 0:
        return wav
    rms = wav[: count * frame].reshape(count, frame).square().mean(dim=1).sqrt()
    level = 20 * torch.log10(rms + 1e-12)
    loud = torch.nonzero(level > level.max() - floor_db).flatten()
    end = (int(loud[-1]) + 1) * frame
    out = wav[:end].clone()
    fade = min(int(fade_s * sample_rate), end)
    out[end - fade:] *= torch.linspace(1, 0, fade, dtype=out.dtype)
    return torch.cat([out, out.new_zeros(int(pause_s * sample_rate))])
