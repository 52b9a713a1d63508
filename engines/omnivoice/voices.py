"""OmniVoice's voices: designed ones that ship with the engine, cloned ones kept on disk.

OmniVoice has no voice files of its own: without a reference clip it invents a
speaker for every call, so a text spoken sentence by sentence would change
voice at each sentence. A *designed* voice fixes that: the first time it is
used, one anchor sentence is generated from its ``instruct`` with a fixed seed
and turned into a voice-clone prompt (cached like any other), and every
sentence after that is cloned from it.

A *cloned* voice is an uploaded clip: ``<voices_dir>/<id>.wav`` and
``<id>.json`` (``{"version": 1, "clip_sha256", "transcript"}``), both written
atomically. Its prompt is rebuilt from the clip whenever the prompt cache lacks it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from engines.files import write_bytes_atomically

log = logging.getLogger(__name__)

RECORD_VERSION = 1
VOICE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
ANCHOR_TEXT = "The morning light came slowly over the hills, and the whole valley woke up."
ANCHOR_SEED = 1234


@dataclass(frozen=True)
class DesignedVoice:
    id: str
    instruct: str
    language: str = "en"


DESIGNED: dict[str, DesignedVoice] = {v.id: v for v in (
    DesignedVoice("female", "female, young adult, moderate pitch, american accent"),
    DesignedVoice("male", "male, middle-aged, low pitch, american accent"),
    DesignedVoice("female-british", "female, middle-aged, moderate pitch, british accent"),
    DesignedVoice("male-british", "male, young adult, moderate pitch, british accent"),
)}
DEFAULT_VOICE = "female"


@dataclass(frozen=True)
class ClonedVoice:
    id: str
    clip_sha256: str
    transcript: str


class VoiceStore:
    """The cloned voices in ``directory``. Called from the event loop (reads at load, small writes)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._voices: dict[str, ClonedVoice] = {}

    def load(self) -> None:
        self._voices = {}
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                if record.get("version") != RECORD_VERSION:
                    raise ValueError(f"version {record.get('version')!r}")
                voice = ClonedVoice(path.stem, str(record["clip_sha256"]), str(record["transcript"]))
            except (OSError, ValueError, KeyError, AttributeError) as exc:
                log.warning("skipping OmniVoice voice record %s: %s", path, exc)
                continue
            if not self.clip_path(voice.id).is_file():
                log.warning("skipping OmniVoice voice %s: its clip %s is missing", voice.id, self.clip_path(voice.id))
                continue
            self._voices[voice.id] = voice

    def ids(self) -> list[str]:
        return sorted(self._voices)

    def get(self, voice_id: str) -> ClonedVoice | None:
        return self._voices.get(voice_id)

    def clip_path(self, voice_id: str) -> Path:
        return self.directory / f"{voice_id}.wav"

    def read_clip(self, voice: ClonedVoice) -> bytes:
        return self.clip_path(voice.id).read_bytes()

    def add(self, voice_id: str, wav_bytes: bytes, transcript: str) -> ClonedVoice:
        """Keep the clip and its record (clip first: a record never points at a missing clip)."""
        voice = ClonedVoice(voice_id, clip_hash(wav_bytes), transcript)
        write_bytes_atomically(self.clip_path(voice_id), wav_bytes)
        record = {"version": RECORD_VERSION, "clip_sha256": voice.clip_sha256, "transcript": transcript}
        write_bytes_atomically(self.directory / f"{voice_id}.json", json.dumps(record).encode("utf-8"))
        self._voices[voice_id] = voice
        return voice

    def remove(self, voice_id: str) -> ClonedVoice | None:
        voice = self._voices.pop(voice_id, None)
        (self.directory / f"{voice_id}.json").unlink(missing_ok=True)
        self.clip_path(voice_id).unlink(missing_ok=True)
        return voice


def clip_hash(wav_bytes: bytes) -> str:
    return hashlib.sha256(wav_bytes).hexdigest()
