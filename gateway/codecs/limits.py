"""What a live stream's bytes may cost once decoded.

PCM and G.711 bytes fix their own length. Opus does not: a packet of two
bytes (a TOC byte and a frame count, every frame empty) decodes to 120 ms, so
a few kilobytes could ask for hours of samples. A message of a stream carrying
Opus (raw packets, Ogg, WebM) may therefore decode to at most
``MESSAGE_FLOOR_S`` plus what its bytes carry at ``MIN_BITS_PER_S``: half of
Opus's lowest speech bitrate (6 kbit/s), so honest audio is far inside it.
The bytes a message completes from earlier ones (a page cut across messages)
count with it. Past the cap, ``DecodeLimitExceeded``.

A container stream that sends ``MAX_BYTES_WITHOUT_AUDIO`` without decoding a
sample is not an audio stream: it is refused too.
"""

from __future__ import annotations

from gateway.audio import AudioFormatError

MIN_BITS_PER_S = 3000
MESSAGE_FLOOR_S = 1.0  # any single packet (at most 120 ms) and a page of small ones fit
MAX_BYTES_WITHOUT_AUDIO = 2 * 1024 * 1024  # a video track's frames between audio blocks stay far below


class DecodeLimitExceeded(AudioFormatError):
    """Decoding asked for more audio than the bytes can carry; the message says the limit."""


class MessageBudget:
    """The decoded seconds one message may still give (one per stream, reset per message)."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._what = ""
        self._allowed = 0
        self._spent = 0

    def start(self, message_bytes: int, carried_bytes: int) -> None:
        """A new message of ``message_bytes``, completing ``carried_bytes`` held from before."""
        self._what = f"a message of {message_bytes} bytes" + (
            f" (with {carried_bytes} held from the messages before it)" if carried_bytes else "")
        seconds = MESSAGE_FLOOR_S + (message_bytes + carried_bytes) * 8 / MIN_BITS_PER_S
        self._allowed = int(seconds * self.sample_rate)
        self._spent = 0

    def spend(self, samples: int) -> None:
        self._spent += samples
        if self._spent > self._allowed:
            raise DecodeLimitExceeded(
                f"{self._what} decodes to more than {self._allowed / self.sample_rate:.1f} s "
                f"of audio; the limit is {MESSAGE_FLOOR_S:g} s plus {MIN_BITS_PER_S // 1000} kbit/s of its bytes "
                f"(1 s per {MIN_BITS_PER_S // 8} bytes)")


class SilentBytes:
    """Bytes a container stream sent since it last decoded audio, from positions
    in the stream: where the page or block that gave audio ended, and how far
    the stream has come."""

    def __init__(self, container: str) -> None:
        self.container = container
        self._heard_at = 0

    def heard(self, position: int) -> None:
        self._heard_at = position

    def check(self, position: int) -> None:
        silent = position - self._heard_at
        if silent > MAX_BYTES_WITHOUT_AUDIO:
            raise AudioFormatError(f"the {self.container} stream sent {silent} bytes without any audio; "
                                   f"the limit is {MAX_BYTES_WITHOUT_AUDIO} bytes (2 MiB) without audio")
