"""G.711 mu-law and A-law to and from 16-bit PCM, the two telephony encodings
Deepgram's sockets take besides ``linear16``. One byte a sample; decoding is a
256-entry table, encoding is vectorised over the segment rules of ITU-T G.711.
Stateless, so any chunking of a stream gives the same bytes."""

from __future__ import annotations

import functools

import numpy as np

_MULAW_BIAS = 0x84
_MULAW_CLIP = 32635


def _top_bit(values: np.ndarray) -> np.ndarray:
    """Index of the highest set bit of each positive value (0 for 0)."""
    out = np.zeros(values.shape, dtype=np.int32)
    for bit in range(1, 16):
        out = np.where(values >= 1 << bit, bit, out)
    return out


@functools.cache
def _decode_table(law: str) -> np.ndarray:
    code = np.arange(256, dtype=np.int32)
    if law == "mulaw":
        inverted = ~code & 0xFF
        exponent, mantissa = (inverted >> 4) & 0x07, inverted & 0x0F
        magnitude = (((mantissa << 3) + _MULAW_BIAS) << exponent) - _MULAW_BIAS
        values = np.where(inverted & 0x80, -magnitude, magnitude)
    else:
        toggled = code ^ 0x55
        segment, mantissa = (toggled >> 4) & 0x07, toggled & 0x0F
        magnitude = np.where(segment == 0, (mantissa << 4) + 8,
                             ((mantissa << 4) + 0x108) << np.maximum(segment - 1, 0))
        values = np.where(toggled & 0x80, magnitude, -magnitude)
    return values.astype("<i2")


def decode(data: bytes, law: str) -> bytes:
    """G.711 bytes (``law``: ``mulaw`` or ``alaw``) to little-endian 16-bit PCM."""
    table: np.ndarray = _decode_table(law)
    return bytes(table[np.frombuffer(data, dtype=np.uint8)].tobytes())


def encode(pcm: bytes, law: str) -> bytes:
    """Little-endian 16-bit PCM (an even number of bytes) to G.711 bytes."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.int32)
    negative = samples < 0
    # Magnitudes as the reference coder takes them: the sample shifted down to the
    # law's width first (rounding towards minus infinity), then the sign dropped.
    if law == "mulaw":
        shifted = samples >> 2
        magnitude = (np.minimum(np.where(negative, -shifted, shifted) << 2, _MULAW_CLIP)) + _MULAW_BIAS
        exponent = _top_bit(magnitude) - 7
        mantissa = (magnitude >> (exponent + 3)) & 0x0F
        code = ~((negative << 7) | (exponent << 4) | mantissa) & 0xFF
    else:
        shifted = samples >> 3
        magnitude = np.where(negative, -shifted - 1, shifted)
        segment = np.maximum(_top_bit(magnitude) - 4, 0)
        mantissa = np.where(segment == 0, magnitude >> 1, magnitude >> np.maximum(segment, 1)) & 0x0F
        code = ((~negative << 7) & 0x80 | (segment << 4) | mantissa) ^ 0x55
    return bytes(code.astype(np.uint8).tobytes())
