"""The stopping rule and the noise stream of one utterance, on scripted EOS logits."""

from __future__ import annotations

import pytest
import torch

from engines.pocket.generation import ChunkPlan, GenerationSettings, Utterance


def _drive(utterance: Utterance, logits: list[float]) -> list[tuple[int, bool]]:
    """Feed EOS logits step by step; returns (chunk, played) per computed step."""
    out = []
    utterance.begin_chunk()
    for logit in logits:
        if utterance.finished:
            break
        if utterance.chunk_done:
            utterance.begin_chunk()
        utterance.noise()
        out.append((utterance.chunk, utterance.accept(logit)))
    return out


def test_eos_before_step_six_is_ignored_then_frames_after_eos_are_played() -> None:
    plan = ChunkPlan(tokens=[1, 2], frames_after_eos=3, max_steps=100)
    utterance = Utterance([plan], GenerationSettings(temperature=0.0), 32, None)
    steps = _drive(utterance, [0.0] * 50)  # every logit is above -4.0
    assert steps == [(0, True)] * 9  # EOS taken at step 6, steps 7 and 8 played, 9 dropped unrun
    assert utterance.finished


def test_length_limit_ends_a_chunk_and_the_next_one_starts() -> None:
    plans = [ChunkPlan([1], 2, max_steps=4), ChunkPlan([2], 2, max_steps=3)]
    utterance = Utterance(plans, GenerationSettings(), 32, torch.Generator().manual_seed(0))
    steps = _drive(utterance, [-10.0] * 20)
    assert steps == [(0, True)] * 4 + [(1, True)] * 3
    assert utterance.finished


def test_zero_frames_after_eos_drops_the_eos_step() -> None:
    plan = ChunkPlan([1], frames_after_eos=0, max_steps=100)
    utterance = Utterance([plan], GenerationSettings(temperature=0.0), 32, None)
    logits = [-10.0] * 8 + [0.0]
    assert _drive(utterance, logits) == [(0, True)] * 8 + [(0, False)]


def test_noise_draws_follow_the_reference_order() -> None:
    """Prompt pass draw, one per step, and one for the dropped step after EOS."""
    seed, latent_dim = 7, 32
    plan = ChunkPlan([1], frames_after_eos=1, max_steps=100)
    utterance = Utterance([plan], GenerationSettings(temperature=0.3), latent_dim,
                          torch.Generator().manual_seed(seed))
    utterance.begin_chunk()
    used = []
    for logit in [-10.0] * 6 + [0.0]:
        used.append(utterance.noise())
        utterance.accept(logit)
    assert utterance.finished
    torch.manual_seed(seed)
    expected = [torch.empty(1, latent_dim).normal_(0.0, 0.3 ** 0.5)[0] for _ in range(9)]
    assert all(torch.equal(a, b) for a, b in zip(used, expected[1:8], strict=True))
    after = torch.empty(latent_dim).normal_(0.0, 0.3 ** 0.5, generator=utterance.generator)
    torch.manual_seed(seed)
    for _ in range(9):
        torch.empty(1, latent_dim).normal_(0.0, 0.3 ** 0.5)
    assert torch.equal(after, torch.empty(latent_dim).normal_(0.0, 0.3 ** 0.5))


def test_temperature_zero_noise_is_exactly_zero() -> None:
    utterance = Utterance([ChunkPlan([1], 1, 10)], GenerationSettings(temperature=0.0), 32, None)
    assert torch.equal(utterance.noise(), torch.zeros(32))


def test_no_chunks_is_refused() -> None:
    with pytest.raises(ValueError, match="^text: nothing to say$"):
        Utterance([], GenerationSettings(), 32, None)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("temperature", -0.1, "temperature: must be a number from 0 to 10, got -0.1"),
    ("lsd_steps", 0, "lsd_steps: must be an integer from 1 to 64, got 0"),
    ("frames_after_eos", -1, "frames_after_eos: must be an integer from 0 to 100 or None, got -1"),
    ("max_tokens_per_chunk", 0, "max_tokens_per_chunk: must be a positive integer, got 0"),
])
def test_settings_name_the_bad_field(field: str, value, message: str) -> None:
    with pytest.raises(ValueError) as info:
        GenerationSettings(**{field: value})
    assert str(info.value) == message
