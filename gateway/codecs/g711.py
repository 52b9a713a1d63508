"""G.711 mu-law and A-law (ITU-T G.711), the telephony codecs: one byte a
sample, 8 kHz in practice. Table-driven numpy: decoding looks each byte up in
a 256-entry table, encoding looks each 16-bit sample up in a 65536-entry table
built once from the standard's segment rules."""

from __future__ import annotations

import functools

import numpy as np

_MULAW_BIAS = 0x84
_MULAW_CLIP = 32635


def _segment(magnitude: np.ndarray) -> np.ndarray:
    """The segment (exponent) of a positive magnitude: the index of its highest
    bit above bit 7, 0..7."""
    exponent = np.zeros(magnitude.shape, dtype=np.int32)
    for bit in range(8, 15):
        exponent = np.where(magnitude >= 1 << bit, bit - 7, exponent)
    return exponent


@functools.lru_cache(maxsize=1)
def _mulaw_decode_table() -> np.ndarray:
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (code >> 4) & 0x07
    mantissa = code & 0x0F
    magnitude = (((mantissa << 3) + _MULAW_BIAS) << exponent) - _MULAW_BIAS
    return np.where(code & 0x80, -magnitude, magnitude).astype(np.float32) / 32768.0


@functools.lru_cache(maxsize=1)
def _alaw_decode_table() -> np.ndarray:
    code = np.arange(256, dtype=np.int32) ^ 0x55
    exponent = (code >> 4) & 0x07
    mantissa = code & 0x0F
    magnitude = np.where(exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0))
    return np.where(code & 0x80, magnitude, -magnitude).astype(np.float32) / 32768.0


@functools.lru_cache(maxsize=1)
def _mulaw_encode_table() -> np.ndarray:
    pcm = np.arange(-32768, 32768, dtype=np.int32)
    sign = np.where(pcm < 0, 0x80, 0)
    magnitude = np.minimum(np.abs(pcm), _MULAW_CLIP) + _MULAW_BIAS
    exponent = _segment(magnitude)
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    table: np.ndarray = (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8)
    return table


@functools.lru_cache(maxsize=1)
def _alaw_encode_table() -> np.ndarray:
    pcm = np.arange(-32768, 32768, dtype=np.int32)
    sign = np.where(pcm >= 0, 0x80, 0)
    magnitude = np.where(pcm >= 0, pcm, -pcm - 1)  # one's complement: -1 maps to the smallest step
    exponent = _segment(magnitude)
    shift = np.where(exponent == 0, 4, exponent + 3)
    mantissa = (magnitude >> shift) & 0x0F
    table: np.ndarray = ((sign | (exponent << 4) | mantissa) ^ 0x55).astype(np.uint8)
    return table


def _to_index(samples: np.ndarray) -> np.ndarray:
    pcm: np.ndarray = (np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0) * 32767.0).round().astype(np.int32)
    return pcm + 32768


def mulaw_decode(data: bytes) -> np.ndarray:
    samples: np.ndarray = _mulaw_decode_table()[np.frombuffer(data, dtype=np.uint8)]
    return samples


def alaw_decode(data: bytes) -> np.ndarray:
    samples: np.ndarray = _alaw_decode_table()[np.frombuffer(data, dtype=np.uint8)]
    return samples


def mulaw_encode(samples: np.ndarray) -> bytes:
    return bytes(_mulaw_encode_table()[_to_index(samples)].tobytes())


def alaw_encode(samples: np.ndarray) -> bytes:
    return bytes(_alaw_encode_table()[_to_index(samples)].tobytes())
