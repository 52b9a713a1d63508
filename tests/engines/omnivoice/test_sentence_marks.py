"""OmniVoice's streams mark the end of each sentence they voice (engines.timing.TimedStream)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import numpy as np

from engines.omnivoice.stream import SentenceStream, sentence_ends
from engines.timing import SpokenMark, TimedStream


def done(fn: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(fn())
    return future


async def test_each_sentence_is_marked_before_its_frames_and_the_last_ends_the_text():
    text = "  First one.  Second one here. Third. "
    sentences = ["First one.", "Second one here.", "Third."]
    stream = SentenceStream(sentences, lambda i: np.zeros(100 * (i + 1), dtype=np.float32), done, 80, 5.0,
                            lambda: None, text=text)
    assert isinstance(stream, TimedStream) and not stream.word_exact
    seen = []
    async for frame in stream.frames():
        seen.append((len(frame), list(stream.marks)))
    assert stream.marks == [SpokenMark(12, 100), SpokenMark(30, 300), SpokenMark(len(text), 600)]
    assert seen[0][1] == [SpokenMark(12, 100)]  # the sentence's mark came before its first frame


def test_a_sentence_not_found_in_the_text_gives_no_marks():
    assert sentence_ends("Hello there.", ["Hello", "world."]) == []
