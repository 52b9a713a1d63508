"""The policy's tuning refuses values it cannot run with, naming the knob."""

from __future__ import annotations

import pytest

from engines.asr.tuning import PolicyTuning


@pytest.mark.parametrize(("knobs", "message"), [
    ({"speech_pad_s": -0.1}, "PolicyTuning.speech_pad_s must be a number of at least 0, not -0.1"),
    ({"final_beam": "5"}, "PolicyTuning.final_beam must be a number of at least 0, not '5'"),
    ({"final_beam": 0}, "PolicyTuning.final_beam must be above 0, not 0"),
    ({"partial_step_s": 0.0}, "PolicyTuning.partial_step_s must be above 0, not 0.0"),
    ({"agree": 1}, "PolicyTuning.agree must be at least 2 (hypotheses compared), not 1"),
    ({"silence_threshold": 0.6}, "PolicyTuning needs silence_threshold <= speech_threshold <= 1, not 0.6 and 0.5"),
    ({"max_partial_step_s": 0.4}, "PolicyTuning.max_partial_step_s (0.4) is below partial_step_s (0.5)"),
    ({"min_cut_part_s": 25.0}, "PolicyTuning.min_cut_part_s (25.0) must be below max_utterance_s (25.0)"),
])
def test_a_value_the_policy_cannot_run_with_is_refused_by_name(knobs, message):
    with pytest.raises(ValueError) as info:
        PolicyTuning(**knobs)
    assert str(info.value) == message


def test_the_defaults_are_valid_and_frozen():
    tuning = PolicyTuning()
    with pytest.raises(AttributeError):
        tuning.final_beam = 1  # type: ignore[misc]
