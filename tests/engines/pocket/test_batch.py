"""Streams stepped together give the audio they give alone."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from engines.base import EngineError
from engines.pocket.batch import StreamBatch
from engines.pocket.decode_tasks import DecodeCosts, DecodeGroup, DecodeJob, cut, helper_share
from engines.pocket.stream import PocketStream

ATOL = 1e-5  # batched matmuls round differently from single-row ones

STREAMS = [  # (text, voice, seed, temperature)
    ("Hello world, this is a test.", "alba", 1, 0.3),
    ("The quick brown fox jumps over the lazy dog. Is it 3.5 today?", "marius", 2, 0.3),
    ("Good night", "marius", 3, 0.0),
    ("Rain in spain stays mainly in the plain.", "alba", 4, 0.7),
]


def _settings(model, temperature: float):
    return replace(model.defaults, temperature=temperature)


def _solo(model, text: str, voice: str, seed: int, temperature: float) -> np.ndarray:
    stream = PocketStream(model, text, model.load_voice(voice), _settings(model, temperature), seed)
    return np.concatenate(list(stream))


@pytest.fixture(scope="module")
def solo(tiny_model) -> list[np.ndarray]:
    return [_solo(tiny_model, *s) for s in STREAMS]


def _run(model, joins: dict[int, list[int]], cancel: dict[int, int] | None = None, max_streams: int = 4,
         pipelined: bool = False, decode_chunk: int = 1, hurry: dict[int, set[int]] | None = None):
    """Step a batch; stream i joins before step joins[step]; cancel {stream: step}; hurry {step: streams}."""
    batch = StreamBatch(model, max_streams, pipelined=pipelined, decode_chunk=decode_chunk)
    frames: dict[int, list[np.ndarray]] = {}
    ids: dict[int, int] = {}
    done: set[int] = set()
    widths = []
    step = 0
    while step <= max(joins) or len(batch):
        for index in joins.get(step, []):
            text, voice, seed, temperature = STREAMS[index]
            ids[index] = batch.add(text, model.load_voice(voice), _settings(model, temperature), seed)
            frames[index] = []
        for index, at in (cancel or {}).items():
            if at == step:
                assert batch.remove(ids[index])
        widths.append(len(batch))
        by_id = {sid: i for i, sid in ids.items()}
        for out in batch.step({ids[i] for i in (hurry or {}).get(step, set()) if i in ids}):
            # pipelined: the helper's jobs (<= decode_chunk frames a stream) finishing during the call
            assert len(out.frames) <= (4 if pipelined else 1) * decode_chunk
            frames[by_id[out.stream_id]].extend(out.frames)
            if out.done:
                done.add(by_id[out.stream_id])
        step += 1
    batch.close()
    return {i: np.concatenate(f) for i, f in frames.items()}, widths, done


MODES = [(False, 1), (True, 1), (False, 4), (True, 4), (False, 3)]  # (pipelined, decode_chunk)
MODE_IDS = ["sequential", "pipelined", "chunked", "chunked-pipelined", "chunked-by-3"]


@pytest.mark.parametrize(("pipelined", "decode_chunk"), MODES, ids=MODE_IDS)
def test_streams_joining_at_different_times_match_solo_runs(tiny_model, solo, pipelined: bool,
                                                            decode_chunk: int) -> None:
    # stream 3 is hurried on a few steps, so rows decode different counts in one step
    audio, widths, done = _run(tiny_model, {0: [0], 3: [1, 2], 9: [3]}, pipelined=pipelined,
                               decode_chunk=decode_chunk, hurry={11: {3}, 12: {3}, 17: {0, 3}})
    assert max(widths) == 4 and done == {0, 1, 2, 3}
    for i, expected in enumerate(solo):
        assert audio[i].shape == expected.shape, f"stream {i}"
        np.testing.assert_allclose(audio[i], expected, rtol=0, atol=ATOL, err_msg=f"stream {i}")


@pytest.mark.parametrize(("pipelined", "decode_chunk"), MODES, ids=MODE_IDS)
def test_a_stream_leaving_mid_way_does_not_disturb_the_others(tiny_model, solo, pipelined: bool,
                                                              decode_chunk: int) -> None:
    audio, widths, done = _run(tiny_model, {0: [0, 1, 2, 3]}, cancel={1: 5}, pipelined=pipelined,
                               decode_chunk=decode_chunk)
    assert widths[:5] == [4, 4, 4, 4, 4] and widths[5] == 3
    # 5 steps ran: frame 1 at once, then whole chunks (the cancelled one's waiting latents are dropped);
    # pipelined, how much of it the helper had decoded depends on timing
    played = len(audio[1]) // tiny_model.frame_samples
    assert 1 not in done and len(audio[1]) == played * tiny_model.frame_samples
    assert 1 <= played <= 5 if pipelined else played == 1 + 4 // decode_chunk * decode_chunk
    np.testing.assert_allclose(audio[1], solo[1][: len(audio[1])], rtol=0, atol=ATOL)
    for i in (0, 2, 3):
        np.testing.assert_allclose(audio[i], solo[i], rtol=0, atol=ATOL, err_msg=f"stream {i}")


def test_pipelined_audio_arrives_one_step_later(tiny_model) -> None:
    voice = tiny_model.load_voice("alba")
    for pipelined, first_audio_step in [(False, 0), (True, 1)]:
        batch = StreamBatch(tiny_model, max_streams=1, pipelined=pipelined)
        batch.add("Hello world.", voice, seed=1)
        outputs = [batch.step()[0] for _ in range(3)]
        batch.close()
        assert [out.pcm is not None for out in outputs].index(True) == first_audio_step


def test_chunked_decoding_delivers_the_first_frame_at_once_then_whole_chunks(tiny_model) -> None:
    batch = StreamBatch(tiny_model, 1, decode_chunk=4)
    batch.add("Rain in spain stays mainly in the plain, and the rest of the sentence goes on.",
              tiny_model.load_voice("alba"), seed=1)
    counts = [len(batch.step()[0].frames) for _ in range(9)]
    assert counts == [1, 0, 0, 0, 4, 0, 0, 0, 4]
    assert [len(batch.step([batch.stream_ids()[0]])[0].frames) for _ in range(2)] == [1, 1]


def test_one_pipelined_stream_decodes_ramping_whole_calls(tiny_model) -> None:
    """1, 1, 2 frames, then decode_chunk per Mimi call, however fast the helper is; only a
    text chunk's last call may be short."""
    sizes: list[int] = []
    batch = StreamBatch(tiny_model, 1, pipelined=True, decode_chunk=4)
    decode_group = batch._decoder._decode_group

    def recording(group):
        sizes.append(group.latents.shape[1])
        return decode_group(group)

    batch._decoder._decode_group = recording
    batch.add("Rain in spain stays mainly in the plain, and the rest of the sentence goes on.",
              tiny_model.load_voice("alba"), seed=1)
    while len(batch):
        batch.step()
    batch.close()
    assert len(sizes) > 5
    assert sizes[:4] == [1, 1, 2, 4]
    assert all(size == 4 for size in sizes[3:-1])
    assert 1 <= sizes[-1] <= 4


def test_batch_settings_are_checked(tiny_model) -> None:
    with pytest.raises(ValueError, match="^decode_chunk: must be at least 1$"):
        StreamBatch(tiny_model, 2, decode_chunk=0)
    with pytest.raises(ValueError, match="^eager_frames: must not be negative$"):
        StreamBatch(tiny_model, 2, eager_frames=-1)


def test_a_full_batch_refuses_another_stream(tiny_model) -> None:
    batch = StreamBatch(tiny_model, max_streams=1)
    voice = tiny_model.load_voice("alba")
    batch.add("One.", voice)
    with pytest.raises(EngineError, match=r"^batch is full \(1 streams\)$") as info:
        batch.add("Two.", voice)
    assert info.value.code == "over_capacity"


def test_empty_text_is_refused_before_joining(tiny_model) -> None:
    batch = StreamBatch(tiny_model, max_streams=2)
    with pytest.raises(ValueError, match="^text: must contain at least one non-space character$"):
        batch.add("  \n ", tiny_model.load_voice("alba"))
    assert len(batch) == 0


def test_remove_unknown_stream_is_false(tiny_model) -> None:
    assert StreamBatch(tiny_model).remove(12345) is False


def test_stream_cancel_stops_between_frames(tiny_model) -> None:
    stream = PocketStream(tiny_model, "Hello world, this is a test.", tiny_model.load_voice("alba"), seed=1)
    first = next(stream)
    assert first.shape == (tiny_model.frame_samples,) and first.dtype == np.float32
    stream.cancel()
    assert list(stream) == []
    assert stream.done


def test_a_voice_of_another_model_is_refused(tiny_model) -> None:
    import torch

    from engines.pocket import VoiceState

    voice = VoiceState(layers=(torch.zeros(2, 3, 4, 32),) * 2, length=3)
    with pytest.raises(ValueError, match=r"^voice: made for another model \(2 layers x 4 heads x 32; "
                                         r"this model has 2 x 2 x 64\)$"):
        StreamBatch(tiny_model).add("Hello.", voice)


@pytest.mark.parametrize(("pipelined", "decode_chunk"), MODES, ids=MODE_IDS)
def test_several_text_chunks_restart_the_decoder_at_the_same_frames(tiny_model, pipelined: bool,
                                                                    decode_chunk: int) -> None:
    text = "One small sentence here. Then a second one follows it. And a third closes the text."
    settings = replace(tiny_model.defaults, max_tokens_per_chunk=8)
    voice = tiny_model.load_voice("marius")
    expected = np.concatenate(list(PocketStream(tiny_model, text, voice, settings, seed=5)))
    batch = StreamBatch(tiny_model, 2, pipelined=pipelined, decode_chunk=decode_chunk)
    batch.add(text, voice, settings, seed=5)
    other = batch.add("Hello world, this is a test.", tiny_model.load_voice("alba"), seed=1)
    frames, chunks_seen = [], 0
    while len(batch):
        for out in batch.step():
            if out.stream_id != other:
                frames.extend(out.frames)
        chunks_seen = max([chunks_seen] + [row.utterance.chunk + 1 for row in batch._rows if row.stream_id != other])
    batch.close()
    assert chunks_seen >= 2  # the text really was spoken in several chunks
    got = np.concatenate(frames)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL)


def test_frames_per_mimi_call_grow_as_the_decoder_narrows() -> None:
    from engines.pocket.decode_tasks import frames_per_call

    assert [frames_per_call(width) for width in (1024, 512, 256, 128, 64)] == [4, 4, 8, 16, 16]


class _EvenSplit(DecodeCosts):
    """Costs that split every pipelined job in two even halves."""

    def add_lm(self, seconds: float) -> None:
        pass

    def add_decode(self, frames: int, seconds: float, on_helper: bool) -> None:
        pass


def test_the_lm_thread_decodes_the_jobs_unbegun_decodes_when_mimi_is_behind(tiny_model) -> None:
    """With many streams a pipelined job is cut into several decodes; after its LM step the
    stepping thread runs those the helper has not begun, rather than step ahead."""
    import threading

    batch = StreamBatch(tiny_model, 8, pipelined=True, decode_chunk=4)
    decoder = batch._decoder
    decode_group = decoder._decode_group
    stepping = threading.current_thread()
    slow_helper, ran_here = threading.Event(), threading.Event()
    threads: list[tuple[bool, list[int]]] = []  # (on the stepping thread, rows) per decode

    def recording(group):
        here = threading.current_thread() is stepping
        threads.append((here, group.rows))
        if here:
            ran_here.set()
        elif slow_helper.is_set():  # it lets the stepping thread claim the rest first
            ran_here.wait(5)
        return decode_group(group)

    decoder._decode_group = recording
    decoder.costs = _EvenSplit()  # the measured LM time would size the helper's part
    voice = tiny_model.load_voice("alba")
    for seed in range(8):
        batch.add("Rain in spain stays mainly in the plain.", voice, seed=seed)
    batch.step()
    batch.step()  # every stream's first frame, decoded before the step returns
    decoder.settle()  # no decode in flight
    batch.step()  # queues the next frame of every stream
    threads.clear()
    ran_here.clear()
    slow_helper.set()
    # the helper takes the eight frames queued (two decodes of four streams) from the front
    # and stalls; the LM steps, then finds a decode not begun and runs it, from the back
    batch.step()
    batch.close()
    assert sorted(rows for _, rows in threads) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert next(rows for here, rows in threads if here) == [4, 5, 6, 7]


class _FixedCosts(_EvenSplit):
    def __init__(self, lm_s: float, frame_s: float) -> None:
        super().__init__()
        self.lm_s, self.helper_frame_s, self.own_frame_s = lm_s, frame_s, frame_s


@pytest.mark.parametrize(("lm_s", "pieces"), [
    (0.0, [16, 16]),  # nothing measured yet: halves
    (0.027, [20, 12]),  # the LM step costs 7.2 frames of Mimi: the helper takes 3.6 more
    (0.200, [16, 16]),  # the LM step outlasts the job: all to the helper, in two calls
    (0.095, [16, 16]),  # the stepping thread's part would be 3.3 frames, under 4: none
])
def test_a_pipelined_job_gives_the_helper_the_larger_part_by_the_lm_step(tiny_model, lm_s, pieces) -> None:
    batch = StreamBatch(tiny_model, 32, pipelined=True)
    decoder = batch._decoder
    decoder.costs, decoder.task_frames = _FixedCosts(lm_s, 0.00375), 16
    tasks = decoder._split_job({1: list(range(32))})
    batch.close()
    assert [len(rows) for _, rows in tasks] == pieces
    assert [row for _, rows in tasks for row in rows] == list(range(32))
    assert helper_share(32, 0.027, 0.00375, 0.00375) == pytest.approx(19.6)
    # the helper's frames cost more (its decodes overlap the LM step): it takes fewer
    assert helper_share(24, 0.026, 0.0056, 0.0047) == pytest.approx((0.026 + 24 * 0.0047) / 0.0103)
    assert helper_share(24, 0.026, 0.0, 0.0047) == helper_share(24, 0.026, 0.0047, 0.0047)


def test_a_part_is_cut_into_even_decodes_within_the_frame_limit() -> None:
    assert [len(rows) for _, rows in cut([(1, i) for i in range(28)], 24)] == [14, 14]
    assert [len(rows) for _, rows in cut([(1, i) for i in range(20)], 24)] == [20]
    # rows of 4 frames (the 512-wide decoder's calls): one row a decode under a limit of 6
    assert cut([(4, 0), (4, 1), (4, 2), (2, 3), (2, 4)], 6) == [(4, [0]), (4, [1]), (4, [2]), (2, [3, 4])]


def test_a_job_is_claimed_from_both_ends() -> None:
    groups = [DecodeGroup([i], [100 + i], [False], torch.zeros(1, 1, 2), None) for i in range(4)]
    order: list[tuple[str, int]] = []

    def decode(group: DecodeGroup) -> dict[int, np.ndarray]:
        order.append((side, group.rows[0]))
        return {group.stream_ids[0]: np.zeros(1)}

    job = DecodeJob(groups, decode)
    side = "back"
    assert job.run(from_back=True).keys() == {100, 101, 102, 103}
    assert order == [("back", 3), ("back", 2), ("back", 1), ("back", 0)]
    order.clear()
    job = DecodeJob(groups, decode)
    side = "front"
    assert job.run().keys() == {100, 101, 102, 103}
    assert order == [("front", 0), ("front", 1), ("front", 2), ("front", 3)]
    assert [(frames, front) for frames, _, front in job.timings] == [(1, True)] * 4 and not job.left()
