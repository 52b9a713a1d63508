"""A stand-in for the ASR sidecar process that misbehaves on cue, for the
supervisor's fault tests. It speaks the real frame protocol (engines/asr/framing)
with no model: ``ready``, then ``ended`` for every ``end`` and ``pong`` for
every ``ping``. Audio whose first sample is exactly 0.5 is the cue; what
happens then depends on the mode:

- ``crash``: announce the utterance (``speech_started``), then exit at once;
- ``hang``: announce it, then report a decode that never finishes (``lag`` with a
  growing ``busy_s``) and read nothing more;
- ``malformed``: send a ``lag`` event the gateway cannot use, then a ``final``;
- ``mute``: no cue; after ``ready`` it reads on but answers nothing, pings
  included, like a sidecar whose main loop is stuck.

Run as ``python scripted_sidecar.py MODE`` (from the project root).
"""

from __future__ import annotations

import os
import sys
import threading
import time

sys.path.insert(0, os.getcwd())

from engines.asr.framing import pcm_from_bytes, read_frame, write_frame

CUE = 0.5


def main(mode: str) -> int:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    lock = threading.Lock()

    def send(event: dict) -> None:
        with lock:
            write_frame(out, event)

    send({"ev": "ready", "model": "scripted", "multilingual": False, "languages": ["en"]})
    while (frame := read_frame(sys.stdin.buffer)) is not None:
        header, payload = frame
        op, sid = header.get("op"), header.get("stream")
        if mode == "mute":
            continue
        if op == "ping":
            send({"ev": "pong"})
        if op == "end":
            send({"ev": "ended", "stream": sid, "utterances": 0, "audio_s": 0.0})
        if op != "audio" or pcm_from_bytes(payload)[:1].tolist() != [CUE]:
            continue
        send({"ev": "speech_started", "stream": sid, "utterance": 0, "at": 0.0, "start_sample": 0})
        if mode == "crash":
            os._exit(3)
        if mode == "hang":
            began = time.monotonic()
            while True:
                send({"ev": "lag", "streams": {sid: 0.0}, "busy_s": round(time.monotonic() - began, 3)})
                time.sleep(0.2)
        if mode == "malformed":
            send({"ev": "lag", "streams": [sid]})
            send({"ev": "final", "stream": sid, "utterance": 0, "text": "still here", "start": 0.0, "end": 1.0,
                  "end_sample": 16000})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
