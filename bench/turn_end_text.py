"""Does the text of a pause's speculative final tell the end of a turn from a pause within it?

    python bench/turn_end_text.py [--sets real,quick,short] [--renditions 1]

An agent's stream (``eager``) sends an ``eager_final`` once a pause has lasted
the turn-ending part of the silence window, and ``turn_resumed`` if speech comes
back before the window closes. Ending a turn sooner than the window would need a
signal that the words are complete. Whisper writes sentence punctuation; this
replays each clip set through the streaming policy (tests/support/policy_replay.py,
every decode at once) and counts, for the eager finals that speech then resumed
(pauses within a turn) and for those the final followed (ends of turns), how many
end in ``.``, ``?`` or ``!``. A usable signal ends the second kind and not the first.
Sets as in bench/asr_variants.py: ``real`` (recordings with pauses within
sentences), ``quick`` (sentences said phrase by phrase, 0.12-0.36 s apart),
``short`` (single sentences: ends of turns only).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.asr_variants import clip_set  # noqa: E402
from bench.dictation import cpu_model  # noqa: E402
from engines.asr.decoder import WhisperDecoder  # noqa: E402
from engines.asr.policy import StreamOptions  # noqa: E402
from tests.support.policy_replay import decode_job, stream_finals  # noqa: E402

SENTENCE_END = re.compile(r"[.?!][\"')\]]*$")


def pauses(decoder: WhisperDecoder, audio) -> list[tuple[str, bool]]:
    """(eager final's text, whether speech resumed after it) for each eager final of one clip."""
    events: list[dict] = []
    stream_finals(lambda job: decode_job(decoder, job), audio, StreamOptions(eager=True), events_out=events)
    turns = [e for e in events if e["ev"] in ("eager_final", "turn_resumed", "final")]
    out = []
    for i, event in enumerate(turns):
        if event["ev"] == "eager_final":
            after = next((e["ev"] for e in turns[i + 1:] if e["ev"] != "eager_final"), "final")
            out.append((event["text"].strip(), after == "turn_resumed"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="real,quick,short", help="clip sets (comma-separated)")
    parser.add_argument("--renditions", type=int, default=1, help="fresh syntheses of each synthetic set")
    parser.add_argument("--examples", type=int, default=6, help="punctuated pauses within turns to print per set")
    args = parser.parse_args()
    from engines.asr.models import TINY_EN_ID, resolve_model

    decoder = WhisperDecoder(resolve_model(TINY_EN_ID, ROOT).source, threads=2)
    print(f"{cpu_model()}, tiny.en, an agent's stream (eager), every decode at once")
    print(f"{'set':8} {'ends of turns punctuated':>26} {'pauses within turns punctuated':>32}")
    for set_name in args.sets.split(","):
        ends: list[bool] = []
        within: list[bool] = []
        examples: list[str] = []
        for n in range(1 if set_name == "real" else args.renditions):  # recordings: one audio
            for clip in clip_set(set_name, n):
                for text, resumed in pauses(decoder, clip.audio):
                    punctuated = bool(SENTENCE_END.search(text))
                    (within if resumed else ends).append(punctuated)
                    if resumed and punctuated:
                        examples.append(text)
        print(f"{set_name:8} {sum(ends):>17} of {len(ends):<6} {sum(within):>23} of {len(within):<6}")
        for text in examples[:args.examples]:
            print(f"    within a turn: {text!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
