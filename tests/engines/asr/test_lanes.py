"""How the sidecar splits the machine's cores into decode lanes."""

from __future__ import annotations

from engines.asr.decoder import split_cores


def test_both_unset_gives_one_single_threaded_lane_per_core():
    assert split_cores(0, 0, 2) == (2, 1)
    assert split_cores(0, 0, 8) == (8, 1)
    assert split_cores(0, 0, 0) == (1, 1)


def test_threads_set_gives_as_many_lanes_as_fit():
    assert split_cores(0, 2, 2) == (1, 2)
    assert split_cores(0, 3, 8) == (2, 3)
    assert split_cores(0, 4, 2) == (1, 4)


def test_lanes_set_divides_the_cores_among_them():
    assert split_cores(2, 0, 8) == (2, 4)
    assert split_cores(3, 0, 2) == (3, 1)


def test_both_set_are_taken_as_given():
    assert split_cores(2, 2, 2) == (2, 2)
