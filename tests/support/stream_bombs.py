"""Live-audio bombs, built at test time: small messages that ask a dictation
socket's decoder for far more than their bytes can honestly carry, and the
means to run a victim under an address-space cap so that code which does
allocate gigabytes fails instead of sinking the machine.

- ``ogg_opus_bomb`` / ``webm_opus_bomb``: an Opus stream of 2-byte packets
  (TOC code 3, six 20 ms frames, all empty): each decodes to 120 ms;
- ``tiny_frame_packet``: 4 bytes, two 60 ms SILK frames of one byte each:
  120 ms that are not empty;
- ``mulaw_message``: a megabyte of G.711, two minutes at 16 kHz;
- ``endless_packet_pages``: Ogg pages whose packet never ends, a new logical
  stream each page.

``python -m tests.support.stream_bombs VICTIM BOMB`` feeds a bomb to the
decoder and resampler through their public ``feed`` methods in a child whose
address space is capped (``victim``); it prints what happened and the
tracemalloc peak as JSON.
"""

from __future__ import annotations

import contextlib
import json
import resource
import struct
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gateway.codecs.ogg import CAPTURE, HEADER, OggWriter, crc32

EMPTY_120MS = bytes([(31 << 3) | 3, 6])  # CELT FB 20 ms, code 3: a count byte of 6 CBR frames, no bytes left
TINY_120MS = bytes([(3 << 3) | 3, 2, 0, 0])  # SILK NB 60 ms, code 3: 2 CBR frames of one byte
OPUS_HEAD = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", 312, 48000, 0, 0)
OPUS_TAGS = b"OpusTags" + struct.pack("<I", 4) + b"bomb" + struct.pack("<I", 0)
PACKET_S = 0.12
CAP_HEADROOM_BYTES = 1 << 30  # what a victim may map beyond its size once its libraries are loaded
REPO = Path(__file__).resolve().parents[2]


def ogg_opus_stream(packets: list[bytes], *, serial: int = 0x5EED) -> bytes:
    """An Ogg Opus stream: the two header pages, then ``packets`` 255 a page."""
    writer = OggWriter(serial)
    out = writer.page([OPUS_HEAD], 0, bos=True) + writer.page([OPUS_TAGS], 0)
    for start in range(0, len(packets), 255):
        out += writer.page(packets[start:start + 255], -1)
    return out


def ogg_opus_bomb(packet_count: int = 1000, packet: bytes = EMPTY_120MS) -> bytes:
    """``packet_count`` copies of ``packet`` in Ogg: 1000 empty ones are 3,212 bytes asking for 120 s."""
    return ogg_opus_stream([packet] * packet_count)


def _element(ident: int, body: bytes, *, unknown_size: bool = False) -> bytes:
    size = b"\x01\xff\xff\xff\xff\xff\xff\xff" if unknown_size else b"\x01" + len(body).to_bytes(7, "big")
    return ident.to_bytes((ident.bit_length() + 7) // 8, "big") + size + body


def webm_opus_bomb(packet_count: int = 1024, packet: bytes = EMPTY_120MS) -> bytes:
    """A WebM stream whose blocks each carry 256 copies of ``packet`` (fixed lacing)."""
    header = _element(0x1A45DFA3, _element(0x4282, b"webm"))
    entry = (_element(0xD7, b"\x01") + _element(0x83, b"\x02") + _element(0x86, b"A_OPUS")
             + _element(0x63A2, OPUS_HEAD))
    blocks = b""
    for start in range(0, packet_count, 256):
        count = min(256, packet_count - start)
        blocks += _element(0xA3, b"\x81\x00\x00" + bytes([0x80 | 0x04, count - 1]) + packet * count)
    return (header + _element(0x18538067, _element(0x1654AE6B, _element(0xAE, entry))
                              + _element(0x1F43B675, blocks, unknown_size=True), unknown_size=True))


def mulaw_message(size: int = 1 << 20) -> bytes:
    """The largest message a dictation socket takes, of mu-law: 131 s at 8 kHz."""
    return bytes(range(256)) * (size // 256)


def endless_packet_pages(message_bytes: int = 1 << 20, *, first_serial: int = 1, bos: bool = False) -> bytes:
    """Whole Ogg pages of 255 lacing values of 255 (a packet that goes on), each
    of a new logical stream, about ``message_bytes`` in all."""
    body = b"\0" * (255 * 255)
    out = bytearray()
    serial = first_serial
    while len(out) + HEADER.size + 255 + len(body) <= message_bytes:
        page = bytearray(HEADER.pack(CAPTURE, 0, 0x02 if bos else 0, -1, serial, 0, 0, 255) + b"\xff" * 255 + body)
        struct.pack_into("<I", page, 22, crc32(bytes(page)))
        out += page
        serial += 1
    return bytes(out)


# ---- victims under an address-space cap


def _mapped_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


@contextlib.contextmanager
def address_space_cap(headroom_bytes: int = CAP_HEADROOM_BYTES) -> Iterator[None]:
    """Cap this process's address space at its present size plus ``headroom_bytes``
    for the block, so an allocation of gigabytes raises ``MemoryError``; the
    soft limit is put back after (it can be raised again up to the hard one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _mapped_bytes() + headroom_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _feed_all(encoding: str, rate: int, messages: list[bytes]) -> None:
    """What a dictation socket did with each message before decoding went in steps:
    decode it whole, then resample it whole."""
    from gateway.codecs.decoders import stream_decoder
    from gateway.codecs.formats import InputEncoding
    from gateway.resampling import LowDelayResampler

    decoder = stream_decoder(InputEncoding(encoding), rate)
    resampler = LowDelayResampler(decoder.sample_rate, 16000)
    for message in messages:
        resampler.feed(decoder.feed(message))


BOMBS: dict[str, Callable[[], tuple[str, int, list[bytes]]]] = {
    "ogg-empty-frames": lambda: ("ogg", 48000, [ogg_opus_bomb(1000)]),
    "ogg-tiny-frames": lambda: ("ogg", 48000, [ogg_opus_bomb(1000, TINY_120MS)]),
    "webm-empty-frames": lambda: ("webm", 48000, [webm_opus_bomb(1024)]),
    "mulaw-1mib": lambda: ("mulaw", 8000, [mulaw_message()]),
    "ogg-endless-pages": lambda: ("ogg", 48000, [ogg_opus_stream([])]
                                  + [endless_packet_pages(first_serial=100 * i + 1) for i in range(24)]),
}


def victim(bomb: str) -> dict[str, Any]:
    """Feed ``bomb`` to the decoder and resampler under the cap: ``outcome`` is
    "ok", the error's message, or "MemoryError"; ``peak_bytes`` the tracemalloc peak."""
    encoding, rate, messages = BOMBS[bomb]()
    _feed_all("pcm_s16le", 16000, [b"\0\0" * 160])  # load what decoding loads before the cap is measured
    if encoding in ("ogg", "webm"):
        _feed_all("opus", 16000, [EMPTY_120MS])
    outcome = "ok"
    with address_space_cap():
        tracemalloc.start()
        try:
            _feed_all(encoding, rate, messages)
        except MemoryError:
            outcome = "MemoryError"
        except ValueError as exc:  # AudioFormatError
            outcome = str(exc)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return {"outcome": outcome, "peak_bytes": peak}


def run_victim(bomb: str, timeout_s: float = 300.0) -> dict[str, Any]:
    """``victim(bomb)`` in a child process."""
    done = subprocess.run([sys.executable, "-m", "tests.support.stream_bombs", bomb], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise AssertionError(f"the victim for {bomb} died ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    print(json.dumps(victim(sys.argv[1])))
