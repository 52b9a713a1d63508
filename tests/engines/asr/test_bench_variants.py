"""bench/asr_variants.py turns each variant into the tuning its streams are given
(nothing in engines.asr is assigned to), and refuses a bad setting before decoding."""

from __future__ import annotations

import pytest

from bench.asr_variants import NAMED, UNBOUNDED_TAIL_S, Variant, parse_variant
from engines.asr.tuning import PolicyTuning


@pytest.mark.parametrize(("variant", "expected"), [
    ("now", Variant(PolicyTuning(), False)),
    ("commit-before", Variant(PolicyTuning(hold_back_words=1, hold_back_earlier_words=0), False)),
    ("spec-160", Variant(PolicyTuning(speculate_from_s=0.16), False)),
    ("margin-30s", Variant(PolicyTuning(short_window_margin_s=23), False)),
    ("partials-in-pauses", Variant(PolicyTuning(partials_in_pauses=True), False)),
    ("crop-at-dispatch", Variant(PolicyTuning(final_tail_s=UNBOUNDED_TAIL_S), False)),
    ("final-window-full", Variant(PolicyTuning(), True)),
    ("final-margin-7", Variant(PolicyTuning(final_margin_s=7), False)),
    ("full-late", Variant(PolicyTuning(eager_full_window_speculates_early=False), True)),
    ("dictation", Variant(PolicyTuning(), True, eager=False)),
    ("tail=100+hold=6", Variant(PolicyTuning(final_tail_s=0.1, speculate_from_s=0.1, hold_back_words=6,
                                             hold_back_earlier_words=6), False)),
])
def test_a_variant_is_the_default_tuning_with_its_settings(variant, expected):
    assert parse_variant(variant) == expected


def test_every_named_variant_parses():
    assert all(isinstance(parse_variant(name), Variant) for name in NAMED)


@pytest.mark.parametrize(("variant", "message"), [
    ("hold=x", "setting 'hold=x' in variant 'hold=x': invalid literal for int() with base 10: 'x'"),
    ("margin=-1", "setting 'margin=-1' in variant 'margin=-1': PolicyTuning.short_window_margin_s must be a number of at least 0, not -1"),
    ("beam=3", "unknown setting 'beam=3' in variant 'beam=3' (see --help)"),
    ("pauses=yes", "unknown setting 'pauses=yes' in variant 'pauses=yes' (see --help)"),
])
def test_a_bad_setting_is_refused_by_name(variant, message):
    with pytest.raises(SystemExit) as info:
        parse_variant(variant)
    assert str(info.value) == message
