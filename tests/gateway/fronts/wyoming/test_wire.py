"""Wyoming framing against the real ``wyoming`` package, both directions, and its limits."""

from __future__ import annotations

import asyncio
import json

import pytest
from wyoming.event import Event as TheirEvent
from wyoming.event import async_read_event, async_write_event

from gateway.fronts.wyoming.wire import MAX_PAYLOAD_BYTES, Event, WireError, encode_event, read_event


def reader_of(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=64 * 1024)
    reader.feed_data(data)
    reader.feed_eof()
    return reader


class Sink:
    """A StreamWriter stand-in that keeps what is written."""

    def __init__(self) -> None:
        self.data = b""

    def writelines(self, parts) -> None:
        self.data += b"".join(parts)

    def write(self, part: bytes) -> None:
        self.data += part

    async def drain(self) -> None:
        return None


async def test_their_reader_reads_our_events():
    ours = Event("audio-chunk", {"rate": 22050, "width": 2, "channels": 1}, b"\x01\x02" * 10)
    theirs = await async_read_event(reader_of(encode_event(ours) + encode_event(Event("audio-stop"))))
    assert (theirs.type, theirs.data, theirs.payload) == ("audio-chunk", ours.data, ours.payload)


async def test_we_read_their_events():
    sink = Sink()
    await async_write_event(TheirEvent("synthesize", {"text": "Grüße", "voice": {"name": "x"}}), sink)
    await async_write_event(TheirEvent("audio-chunk", {"rate": 16000}, b"\x00" * 6), sink)
    reader = reader_of(sink.data)
    assert await read_event(reader) == Event("synthesize", {"text": "Grüße", "voice": {"name": "x"}})
    assert await read_event(reader) == Event("audio-chunk", {"rate": 16000}, b"\x00" * 6)
    assert await read_event(reader) is None


async def test_data_inline_in_the_header_is_read_too():
    line = json.dumps({"type": "transcribe", "data": {"language": "en"}}).encode() + b"\n"
    assert await read_event(reader_of(line)) == Event("transcribe", {"language": "en"})


async def test_our_header_carries_the_version_and_the_lengths():
    raw = encode_event(Event("pong", {"text": "hi"}, b"ab"))
    line, rest = raw.split(b"\n", 1)
    assert json.loads(line) == {"type": "pong", "version": "1.10.2", "data_length": 14, "payload_length": 2}
    assert rest == b'{"text": "hi"}ab'


@pytest.mark.parametrize(("data", "message"), [
    (b"not json\n", "the event header is not valid JSON"),
    (b"[1, 2]\n", "the event header is not a JSON object"),
    (b'{"data": {}}\n', 'the event header has no "type" string'),
    (b'{"type": "x", "data": [1]}\n', 'x: "data" must be a JSON object'),
    (b'{"type": "x", "payload_length": -1}\n', 'x: "payload_length" must be a non-negative integer'),
    (b'{"type": "x", "data_length": "3"}\n', 'x: "data_length" must be a non-negative integer'),
    (b'{"type": "x", "payload_length": %d}\n' % (MAX_PAYLOAD_BYTES + 1),
     f'x: "payload_length" {MAX_PAYLOAD_BYTES + 1} is over the limit of {MAX_PAYLOAD_BYTES} bytes'),
    (b'{"type": "x", "data_length": 10}\n{"a"', "x: the connection ended before the announced data or payload"),
    (b'{"type": "x", "data_length": 3}\n[1]', "x: the data is not a JSON object"),
    (b'{"type": "x"', "the connection ended in the middle of an event header"),
    (b"\n", "empty event header line"),
])
async def test_broken_framing_is_a_wire_error(data, message):
    with pytest.raises(WireError, match=f"^{message.replace('(', '[(]').replace(')', '[)]')}$"):
        await read_event(reader_of(data))


async def test_an_endless_header_line_is_a_wire_error():
    with pytest.raises(WireError, match="^an event header line is longer than 65536 bytes$"):
        await read_event(reader_of(b"x" * 70000 + b"\n"))
