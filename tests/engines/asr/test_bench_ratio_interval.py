"""The bootstrap interval the dictation benchmark prints beside a streaming / offline ratio."""

from __future__ import annotations

import math

from bench.dictation import ratio_interval


def test_clips_that_all_agree_give_a_point_interval():
    assert ratio_interval([(1, 1), (0, 0), (3, 3)]) == (1.0, 1.0)
    assert ratio_interval([(2, 1), (4, 2), (6, 3)]) == (2.0, 2.0)
    assert ratio_interval([(0, 0), (0, 0)]) == (1.0, 1.0)  # no errors either side, as the pooled ratio reads it
    assert ratio_interval([(1, 0)]) == (math.inf, math.inf)


def test_the_interval_holds_the_pooled_ratio_and_widens_with_fewer_clips():
    pairs = [(1, 0), (0, 1), (2, 1), (1, 1), (0, 0), (3, 2), (1, 2), (2, 2)] * 5
    low, high = ratio_interval(pairs)
    pooled = sum(s for s, _ in pairs) / sum(o for _, o in pairs)
    assert low < pooled < high
    few_low, few_high = ratio_interval(pairs[:8])
    assert few_high - few_low > high - low


def test_no_clips_give_no_interval():
    assert all(math.isnan(x) for x in ratio_interval([]))
