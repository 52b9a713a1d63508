"""The real sidecar server (engines/asr/server.py) over a stand-in model, for the
watchdog's tests: the process, its threads, frames, lag reports and busy clock
are the real ones; only the model is not. Every upload is one window of speech
that decodes to ``TEXT`` after ``--decode-s`` seconds. With ``--hang-once FLAG``
the first decode of all (the one that finds no file at FLAG, and makes it) never
returns, the way a decode stuck in a native library does; later processes
decode as usual.

Run as ``python stand_in_sidecar.py [--decode-s S] [--hang-once FLAG] [sidecar args ...]``
(from the project root); the sidecar's own arguments are accepted and ignored.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.getcwd())

from engines.asr import files
from engines.asr.decoder import Transcript
from engines.asr.server import SidecarServer

TEXT = "still awake"


class StandInModel:
    multilingual = False

    def __init__(self, decode_s: float, hang_flag: Path | None) -> None:
        self.decode_s = decode_s
        self.hang_flag = hang_flag

    def languages(self) -> list[str]:
        return ["en"]

    def decode(self, audio: Any, **options: Any) -> Transcript:
        if self.hang_flag is not None and not self.hang_flag.exists():
            self.hang_flag.touch()
            while True:  # hung: the watchdog kills the process
                time.sleep(3600)
        time.sleep(self.decode_s)  # the time a real decode takes, so the request is in flight a while
        return Transcript(text=TEXT, language="en")


def main() -> int:
    frames_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    parser = argparse.ArgumentParser()
    parser.add_argument("--decode-s", type=float, default=0.0)
    parser.add_argument("--hang-once", type=Path)
    args, _sidecar_args = parser.parse_known_args()
    files.speech_groups = lambda audio: [(0, len(audio))]  # no VAD model: the whole upload is speech
    server = SidecarServer(StandInModel(args.decode_s, args.hang_once), frames_out, "stand-in")  # type: ignore[arg-type]
    return server.serve(sys.stdin.buffer)


if __name__ == "__main__":
    sys.exit(main())
