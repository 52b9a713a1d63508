"""Cutting a voice into front and decoder, and decoding in two halves: the
same audio as the whole graph, on the miniature decoder-shaped graph."""

from __future__ import annotations

import numpy as np

from engines.piper import fastgraph
from engines.piper.halves import HALO, MIN_FRAMES, HalvesSession, split_graph
from tests.engines.piper.graphs import decoder_like, run


def sessions(model):
    front, decoder, latent = split_graph(model)
    make = lambda part: fastgraph.session(part.SerializeToString(), 1, spinning=False)  # noqa: E731
    return make(front), make(decoder), latent


def test_the_cut_is_at_the_decoders_input_and_front_then_decoder_is_the_whole_graph():
    front, decoder, latent = split_graph(decoder_like())
    assert latent == "/flow/enc/out"
    assert [n.name for n in front.graph.node] == ["/flow/enc/Conv"]
    assert [i.name for i in decoder.graph.input] == ["/flow/enc/out"]
    assert [o.name for o in decoder.graph.output] == ["output"]
    z = np.random.default_rng(4).standard_normal((1, 16, 40)).astype(np.float32)
    whole = run(decoder_like(), z)
    f, d, latent = sessions(decoder_like())
    halves = HalvesSession(f, d, latent, halves=False).run(None, {"z": z})[0]
    assert np.array_equal(halves, whole)


def test_two_halves_with_their_halo_make_the_same_samples_as_one_decoder():
    f, d, latent = sessions(decoder_like())
    for frames in (MIN_FRAMES, MIN_FRAMES + 1, 3 * MIN_FRAMES + 7):
        z = np.random.default_rng(frames).standard_normal((1, 16, frames)).astype(np.float32)
        whole = HalvesSession(f, d, latent, halves=False).run(None, {"z": z})[0]
        cut = HalvesSession(f, d, latent, halves=True).run(None, {"z": z})[0]
        assert cut.shape == whole.shape == (1, 1, 1, 16 * frames)
        assert float(np.max(np.abs(cut - whole))) < 1e-6


def test_a_short_sentence_is_decoded_whole():
    calls = []

    class Recorder:
        def run(self, outputs, feeds):
            calls.append(next(iter(feeds.values())).shape[-1])
            return [np.zeros((1, 1, 1, 16 * calls[-1]), dtype=np.float32)]

    class Front:
        def __init__(self, frames):
            self.frames = frames

        def run(self, outputs, feeds):
            return [np.zeros((1, 16, self.frames), dtype=np.float32)]

    HalvesSession(Front(MIN_FRAMES - 1), Recorder(), "z", halves=True).run(None, {})
    assert calls == [MIN_FRAMES - 1]
    HalvesSession(Front(MIN_FRAMES), Recorder(), "z", halves=True).run(None, {})
    assert sorted(calls[1:]) == [MIN_FRAMES // 2 + HALO, MIN_FRAMES // 2 + HALO]


def test_a_decoder_with_a_second_input_is_not_cut():
    assert split_graph(decoder_like(conditioned=True)) is None
