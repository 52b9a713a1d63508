"""Replay: a new sidecar process is given every stream the last one held.

Each stream is opened again at the first sample its ``Retention`` kept, with
the utterance number and stable text to continue from, and its logged audio
and ``finalize`` marks are written again in order (an ``end`` too, when the
client had ended it). The stream counts as live once the last entry is
written with no await in between, so no entry logged meanwhile is missed.

Runs on the event loop only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from engines.asr.framing import encode_frame, pcm_to_bytes
from gateway.dictation.pipe import audio_op, end_op, finalize_op, open_op
from gateway.dictation.retention import FinalizeEntry
from gateway.dictation.stream import AsrStream


class ReplayPipe(Protocol):
    async def write(self, header: dict[str, Any], payload: bytes = b"") -> None: ...

    async def write_raw(self, frame: bytes) -> None:
        """An encoded frame, as is."""
        ...


def open_header(stream: AsrStream) -> dict[str, Any]:
    """The ``open`` that starts ``stream`` on a process where it continues from what was kept."""
    return open_op(stream.id, stream.options, stream.retention.resume_fields())


def replay_frames(stream: AsrStream, start: int) -> tuple[list[bytes], int]:
    """Frames for the logged entries from index ``start`` on, and the next index."""
    entries = stream.retention.entries(start)
    frames = [encode_frame(finalize_op(stream.id, entry.mark)) if isinstance(entry, FinalizeEntry)
              else encode_frame(audio_op(stream.id), pcm_to_bytes(entry)) for entry in entries]
    return frames, start + len(entries)


async def replay_streams(streams: Mapping[str, AsrStream], pipe: ReplayPipe) -> None:
    """Replay every stream that is not live yet."""
    # streams opened while this runs are picked up by the next pass; the ready flag
    # is set by the caller with no await after the last pass, so none is missed
    while True:
        pending = [s for s in streams.values() if not s.live]
        if not pending:
            return
        for stream in pending:
            await _replay(stream, pipe)


async def _replay(stream: AsrStream, pipe: ReplayPipe) -> None:
    if stream.ended:
        stream.live = True
        return
    await pipe.write(open_header(stream))
    index = 0
    while index < len(stream.retention):
        frames, index = replay_frames(stream, index)
        for frame in frames:
            await pipe.write_raw(frame)
    if stream.ending:
        await pipe.write(end_op(stream.id))
    stream.live = True  # no await since the last check: nothing logged was missed
