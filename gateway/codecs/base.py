"""What every streaming encoder is (see encoders.py), apart from any codec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gateway.codecs.formats import OutputFormat


@dataclass(frozen=True)
class Encoded:
    data: bytes
    samples: int  # audio samples (at the encoder's rate) the bytes carry


EMPTY = Encoded(b"", 0)


class AudioEncoder(Protocol):
    format: OutputFormat
    sample_rate: int

    def start(self) -> bytes: ...

    def encode(self, samples: np.ndarray) -> Encoded: ...

    def finish(self) -> Encoded: ...
