"""Flux's /v2/listen end to end with Deepgram's own Python SDK (deepgram-sdk 7,
``listen.v2``, its async and its sync socket, pointed at voxgate through its
environment override): a real `voxgate serve` with the real ASR sidecar and
tiny.en hearing steady Piper speech. Exact words, the turn grammar, measured
confidences, ForceEndTurn, key terms (query and Configure), and Flux-shaped
refusals with their close codes."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from websockets.exceptions import ConnectionClosed

from tests.e2e.flux_support import (
    FIRST,
    KEY,
    QUERY,
    SECOND,
    TURN,
    gateway_server,  # noqa: F401  (the `server` fixture)
    speech,
    turn_letters,
    words_of,
)

# deepgram-sdk 7 imports websockets' legacy client API, which warns on import
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore:websockets.*deprecated:DeprecationWarning")]
deepgram = pytest.importorskip("deepgram", reason="deepgram-sdk is not installed (pip install 'voxgate[test]')")

from deepgram.listen.v2.types import (  # noqa: E402  (after the importorskip above)
    ListenV2ConfigureFailure,
    ListenV2ConfigureSuccess,
    ListenV2Connected,
    ListenV2FatalError,
    ListenV2TurnInfo,
)

CHUNK = 2560  # 80 ms of 16-bit mono at 16 kHz: Deepgram's advice for Flux
# tiny.en writes "Shubon" for this name (Piper's noise off); with the name as a key term, the name
NAME = "Please send the invoice to Siobhan before Friday."


def environment(url: str):
    from deepgram import DeepgramClientEnvironment

    ws = url.replace("http://", "ws://")
    return DeepgramClientEnvironment(base=url, production=ws, agent=ws, agent_rest=url)


async def stream(url: str, pcm: bytes, *, force_end: bool = False, configure: dict | None = None,
                 **query: str | list[str]) -> tuple[list, int | None]:
    """Send ``pcm`` in real time, then ``ForceEndTurn`` (``force_end``) and CloseStream;
    every message the SDK parsed, in order, and the close code."""
    from deepgram import AsyncDeepgramClient

    got: list = []
    client = AsyncDeepgramClient(api_key=KEY, environment=environment(url))
    async with client.listen.v2.connect(**{**QUERY, **query}) as conn:
        async def read() -> None:
            try:
                async for message in conn:
                    got.append(message)
            except ConnectionClosed:  # a close other than 1000 ends the iteration with this error
                pass

        reader = asyncio.create_task(read())
        if configure is not None:
            await conn.send_configure(configure)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(0, len(pcm), CHUNK):
            await conn.send_media(pcm[i:i + CHUNK])
            await asyncio.sleep(max(0.0, start + (i + CHUNK) / 32000 - loop.time()))
        if force_end:
            await conn.send_force_end_turn()
        await conn.send_close_stream()
        await asyncio.wait_for(reader, 60)
        code = conn._websocket.close_code  # the SDK keeps no other record of it
    return got, code


def turns_of(messages: list) -> list[ListenV2TurnInfo]:
    return [m for m in messages if isinstance(m, ListenV2TurnInfo)]


def check_turn_grammar(turns: list[ListenV2TurnInfo]) -> None:
    """Each turn's events follow Flux's grammar, turns come in order and an
    EndOfTurn right after an EagerEndOfTurn repeats it."""
    letters = turn_letters([(t.turn_index, t.event) for t in turns])
    assert list(letters) == sorted(letters) and all(TURN.fullmatch(s) for s in letters.values()), letters
    for before, after in itertools.pairwise(turns):
        if (before.event, after.event) == ("EagerEndOfTurn", "EndOfTurn"):
            assert (after.transcript, after.words) == (before.transcript, before.words)


async def test_two_sentences_are_two_turns_with_their_exact_words(server):
    messages, code = await stream(server, speech(FIRST, SECOND), eager_eot_threshold="0.5")
    assert code == 1000
    assert isinstance(messages[0], ListenV2Connected)
    assert [m.sequence_id for m in messages] == list(range(len(messages)))
    turns = turns_of(messages)
    check_turn_grammar(turns)
    ends = [t for t in turns if t.event == "EndOfTurn"]
    assert [words_of(t.transcript) for t in ends] == [words_of(FIRST), words_of(SECOND)]
    for end in ends:
        assert " ".join(w.word for w in end.words) == end.transcript
        # settled words: no timing is measured on this path (docs/fronts.md)
        assert all((w.confidence, w.start, w.end) == (1.0, None, None) for w in end.words)
        # the turn ended after 0.7 x 500 ms of silence, and the client had sent that much
        assert end.end_of_turn_confidence >= 0.7 and end.trigger == "model"
    assert ends[0].audio_window_end < ends[1].audio_window_start
    assert any(t.event == "Update" and t.transcript for t in turns)


async def test_an_eager_end_of_turn_comes_first_and_the_end_of_turn_repeats_it(server):
    """A 2 s end-of-turn silence (manual turns, eot_timeout_ms=2000) leaves the speculative
    final ample time to be decoded before it: the eager end of turn comes every time."""
    messages, code = await stream(server, speech(FIRST, SECOND, tail_s=2.5), eager_eot_threshold="0.5",
                                  eot_threshold="1.0", eot_timeout_ms="2000")
    assert code == 1000
    turns = turns_of(messages)
    check_turn_grammar(turns)
    for index, sentence in enumerate((FIRST, SECOND)):
        eager, end = [t for t in turns if t.turn_index == index][-2:]
        assert (eager.event, end.event, end.trigger) == ("EagerEndOfTurn", "EndOfTurn", "timeout")
        assert words_of(eager.transcript) == words_of(end.transcript) == words_of(sentence)
        # the eager point is 160 ms of silence (0.32 of the reference), the end 2 s (capped at 1)
        assert eager.end_of_turn_confidence >= 0.32 and end.end_of_turn_confidence == 1.0


async def test_force_end_turn_ends_a_manual_turn_with_its_words(server):
    """eot_threshold=1.0: no silence rule ends the turn before the 5 s timeout; ForceEndTurn does."""
    messages, code = await stream(server, speech(FIRST, tail_s=1.0), force_end=True, eot_threshold="1.0")
    assert code == 1000
    turns = turns_of(messages)
    check_turn_grammar(turns)
    (end,) = [t for t in turns if t.event == "EndOfTurn"]
    assert (words_of(end.transcript), end.trigger) == (words_of(FIRST), "manual")


async def test_a_keyterm_gives_the_rare_name_the_recognizer_misses_without_it(server):
    """The same audio three times: without key terms, with ``keyterm`` in the query (as the
    SDK repeats it), and with ``Configure{keyterms}`` sent before the audio."""
    pcm = speech(NAME)
    texts, answers = [], []
    for query, configure in (({}, None), ({"keyterm": ["Siobhan", "ComfyUI"]}, None),
                             ({}, {"type": "Configure", "keyterms": ["Siobhan"]})):
        messages, code = await stream(server, pcm, configure=configure, **query)
        assert code == 1000
        texts.append(" ".join(t.transcript for t in turns_of(messages) if t.event == "EndOfTurn"))
        answers += [m.keyterms for m in messages if isinstance(m, ListenV2ConfigureSuccess)]
    assert ["Siobhan" in text for text in texts] == [False, True, True], texts
    assert answers == [["Siobhan"]]


async def test_a_configure_it_cannot_honour_is_a_configure_failure(server):
    messages, code = await stream(server, speech(FIRST, tail_s=0.5), configure={
        "type": "Configure", "numerals": True})
    failure = next(m for m in messages if isinstance(m, ListenV2ConfigureFailure))
    assert (failure.code, failure.description) == (
        "UNSUPPORTED_CONFIGURE", "numerals=true: not supported; numbers are written the way the recognizer writes them")
    assert code == 1000 and [words_of(t.transcript) for t in turns_of(messages) if t.event == "EndOfTurn"] == [
        words_of(FIRST)]


async def test_a_bad_query_is_a_fatal_error_and_close_4400(server):
    messages, code = await stream(server, b"", eot_timeout_ms="20000")
    description = ("eot_timeout_ms: 20000 is not supported; this server ends a turn after at most 5000 ms of "
                   "silence (use 500 to 5000)")
    assert len(messages) == 1 and isinstance(messages[0], ListenV2FatalError)
    assert (messages[0].sequence_id, messages[0].code, messages[0].description) == (0, "BAD_REQUEST", description)
    assert code == 4400


def test_the_sync_socket_gets_the_same_turn(server):
    from deepgram import DeepgramClient

    client = DeepgramClient(api_key=KEY, environment=environment(server))
    pcm = speech(FIRST, tail_s=1.0)
    with client.listen.v2.connect(**QUERY) as conn:
        conn.send_media(pcm)  # at once: the gateway holds it to real time
        conn.send_close_stream()
        messages = list(conn)
    turns = turns_of(messages)
    check_turn_grammar(turns)
    assert [words_of(t.transcript) for t in turns if t.event == "EndOfTurn"] == [words_of(FIRST)]
