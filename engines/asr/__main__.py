"""``python -m engines.asr --model SOURCE``: the ASR sidecar process.

Frames on stdin/stdout (see framing.py). The real stdout file descriptor is
kept for frames only: fd 1 is pointed at stderr before anything else is
imported, so a stray ``print`` in a library can never corrupt the frame stream.
On a model that cannot load it writes one ``fatal`` frame and exits 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def main(argv: list[str] | None = None) -> int:
    frames_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr

    from .utterance import DEFAULT_FINAL_WINDOW, FINAL_WINDOWS

    parser = argparse.ArgumentParser(prog="python -m engines.asr")
    parser.add_argument("--model", required=True, help="CTranslate2 model directory or faster-whisper name")
    parser.add_argument("--model-id", help="the name to report (default: --model)")
    parser.add_argument("--compute-type", default="int8")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads per decode (0: the cores / lanes)")
    parser.add_argument("--lanes", type=int, default=0, help="decodes that may run at once (0: the cores / threads)")
    parser.add_argument("--batch", type=int, default=1, help="most decodes run together in one call")
    parser.add_argument("--final-window", choices=FINAL_WINDOWS, default=DEFAULT_FINAL_WINDOW,
                        help="encoder window of finals: the utterance plus a margin (short), Whisper's 30 s "
                             "(full), or full for streams without eager and short for eager ones (auto)")
    parser.add_argument("--turn-model", help="an end-of-turn model for the streams that ask for one: its ONNX "
                             "file, or auto (the one an installed pipecat-ai ships); none by default")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="asr-sidecar %(levelname)s %(name)s: %(message)s")

    from .framing import write_frame

    try:
        from .decoder import WhisperDecoder, split_cores

        lanes, threads = split_cores(args.lanes, args.threads, len(os.sched_getaffinity(0)))
        decoder = WhisperDecoder(args.model, compute_type=args.compute_type, threads=threads, lanes=lanes)
        turn_model = None
        if args.turn_model:
            from pathlib import Path

            from .turn_model import TurnModel, find_turn_model

            path = find_turn_model() if args.turn_model == "auto" else Path(args.turn_model)
            if path is None:
                raise FileNotFoundError("no end-of-turn model found: auto looks in an installed pipecat-ai "
                                        "(pip install pipecat-ai), or give the ONNX file's path")
            turn_model = TurnModel(path)
    except Exception as exc:  # report why, in one frame the gateway can show to users
        write_frame(frames_out, {"ev": "fatal", "message": f"cannot load ASR model {args.model!r}"
                                 f"{' or turn model ' + repr(args.turn_model) if args.turn_model else ''}: "
                                 f"{type(exc).__name__}: {exc}"})
        return 1

    from .server import SidecarServer

    server = SidecarServer(decoder, frames_out, args.model_id or args.model, lanes=lanes,
                           max_batch=args.batch, final_window=args.final_window, turn_model=turn_model)
    return server.serve(sys.stdin.buffer)


if __name__ == "__main__":
    sys.exit(main())
