"""The fast graph of the real bundled voice (joe, medium) is the same model:
sample by sample against the stock ONNX Runtime session, on the same phoneme
ids and the same noise; and the model falls back to the stock graph when the
fast one cannot be made or does not match."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from engines.piper import fastgraph
from engines.piper.halves import HalvesSession, split_graph
from engines.piper.model import PiperModel
from tests.support.speech import SENTENCES

# The rewrite reorders float sums (blocked kernels, fused residual adds): over
# these 16 sentences the audio differs from the stock graph's by at most 7.1e-5
# (-83 dB of full scale); the bound leaves room for other CPUs' kernels.
TOLERANCE = 2e-4
SCALES = (0.667, 1.0, 0.8)  # the voice's own noise_scale, length_scale, noise_w


@pytest.fixture(scope="module")
def sentence_ids(joe):
    from piper import PiperVoice
    from piper.config import PiperConfig

    voice = PiperVoice(session=None, config=PiperConfig.from_dict(joe.raw))
    return [voice.phonemes_to_ids(p) for text in SENTENCES for p in voice.phonemize(text) if p]


def seeded(model: bytes) -> bytes:
    """``model`` with a fixed seed on its random draws: a fresh session then draws the same noise."""
    import onnx
    from onnx import helper

    proto = onnx.load_from_string(model)
    draws = [n for n in proto.graph.node if n.op_type == "RandomNormalLike"]
    assert len(draws) == 2  # the duration predictor's and the prior's (both in the front when cut)
    for node in draws:
        node.attribute.append(helper.make_attribute("seed", 7.0))
    return proto.SerializeToString()


@pytest.mark.slow
def test_the_fast_graph_makes_the_stock_graphs_audio_with_the_same_noise(joe, sentence_ids):
    fast_bytes = fastgraph.prepare(joe.model)
    fast = fastgraph.session(seeded(fast_bytes), 1, spinning=False, fast=True)
    stock = fastgraph.session(seeded(joe.model.read_bytes()), 1, spinning=False)
    worst = 0.0
    for ids in sentence_ids:
        a, b = fastgraph.run(fast, ids, SCALES), fastgraph.run(stock, ids, SCALES)
        assert a.shape == b.shape and len(a) > 22050 // 2
        worst = max(worst, float(np.max(np.abs(a - b))))
    assert worst <= TOLERANCE


@pytest.mark.slow
def test_the_fast_graph_makes_the_stock_graphs_audio_without_noise(joe, sentence_ids):
    fast = fastgraph.session(fastgraph.prepare(joe.model), 1, spinning=False, fast=True)
    stock = fastgraph.session(joe.model, 0)
    for ids in sentence_ids:
        a, b = fastgraph.run(fast, ids, fastgraph.NO_NOISE), fastgraph.run(stock, ids, fastgraph.NO_NOISE)
        assert a.shape == b.shape
        assert float(np.max(np.abs(a - b))) <= TOLERANCE
        assert fastgraph.check(fast, stock, ids) is None


@pytest.mark.slow
def test_the_cut_fast_graph_one_by_one_and_in_halves_makes_the_stock_graphs_audio_with_the_same_noise(
        joe, sentence_ids):
    import onnx

    front, decoder, latent = split_graph(onnx.load(str(joe.model)))
    decoder_session = fastgraph.session(fastgraph.prepare(decoder.SerializeToString()), 1, spinning=False, fast=True)
    front_bytes = fastgraph.prepare(front.SerializeToString())
    ids_list = [*sentence_ids, sentence_ids[0][:9]]  # and one too short to cut in halves
    for halves in (False, True):
        # fresh seeded sessions: both graphs draw the same noise from their first run on
        cut = HalvesSession(fastgraph.session(seeded(front_bytes), 1, spinning=False, fast=True), decoder_session,
                            latent, halves=halves)
        stock = fastgraph.session(seeded(joe.model.read_bytes()), 1, spinning=False)
        for ids in ids_list:
            a, b = fastgraph.run(cut, ids, SCALES), fastgraph.run(stock, ids, SCALES)
            assert a.shape == b.shape
            assert float(np.max(np.abs(a - b))) <= TOLERANCE


class FixedSession:
    """Answers every run with the same audio."""

    def __init__(self, audio: list[float]) -> None:
        self.audio = np.array(audio, dtype=np.float32)

    def run(self, outputs, feeds):
        return [self.audio.reshape(1, 1, 1, -1)]


def test_check_names_a_length_or_a_sample_difference():
    same = FixedSession([0.0, 0.5, -0.5])
    assert fastgraph.check(same, FixedSession([0.0, 0.5, -0.5]), [1, 2]) is None
    assert fastgraph.check(same, FixedSession([0.0, 0.5, -0.5, 0.0]), [1, 2]) == "3 samples instead of 4"
    assert (fastgraph.check(same, FixedSession([0.0, 0.5, 0.0]), [1, 2])
            == "samples differ by up to 0.5 (tolerance 0.001)")
    assert (fastgraph.check(same, FixedSession([0.0, np.nan, 0.0]), [1, 2])
            == "samples differ by up to nan (tolerance 0.001)")


@pytest.mark.slow
def test_the_model_uses_the_fast_graph_by_default_and_the_stock_one_on_request(joe, caplog):
    caplog.set_level(logging.INFO, logger="engines.piper.model")
    model = PiperModel(joe)
    assert model.graph == "fast"
    assert re.fullmatch(r"Piper voice en_US-joe-medium: fast graph ready in \d+\.\d s \(a lone sentence: decoder "
                        r"halves on two threads\)", caplog.messages[-1])
    # a lone sentence's front runs on both cores, a pool inference's on one
    assert model._wide_voice.session.front.get_session_options().intra_op_num_threads == 2
    assert model._voice.session.front.get_session_options().intra_op_num_threads == 1
    one, both = model.infer(model.phonemize("One more.")[0]), model.infer(model.phonemize("One more.")[0], wide=True)
    assert one.dtype == both.dtype == np.float32 and len(one) > 22050 // 4 and len(both) > 22050 // 4
    assert PiperModel(joe, graph="stock").graph == "stock"
    with pytest.raises(ValueError, match=r"^graph: must be one of fast, stock, got 'turbo'$"):
        PiperModel(joe, graph="turbo")


@pytest.mark.slow
def test_a_fast_graph_that_fails_or_differs_leaves_the_stock_graph_with_a_warning(joe, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="engines.piper.model")

    def broken(model):
        raise RuntimeError("no kernel for this")

    monkeypatch.setattr(fastgraph, "prepare", broken)
    model = PiperModel(joe)
    assert model.graph == "stock"
    assert caplog.messages == [("Piper voice en_US-joe-medium: stock graph (making the fast graph failed: "
                               "RuntimeError: no kernel for this)")]
    assert len(model.infer(model.phonemize("Still speaking.")[0])) > 22050 // 4
    monkeypatch.undo()
    caplog.clear()
    monkeypatch.setattr(fastgraph, "check", lambda fast, stock, ids, speaker=None: "1 samples instead of 2")
    assert PiperModel(joe).graph == "stock"
    assert caplog.messages == [("Piper voice en_US-joe-medium: stock graph (the fast graph does not compute the same "
                               "audio here: 1 samples instead of 2)")]


@pytest.mark.slow
def test_a_cpu_without_blocked_kernels_keeps_the_stock_graph_quietly(joe, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="engines.piper.model")
    monkeypatch.setattr(fastgraph, "block_size", lambda: 0)
    assert PiperModel(joe).graph == "stock"
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", ("Piper voice en_US-joe-medium: stock graph (this CPU has no blocked-layout convolution kernels in "
                 "ONNX Runtime)"))]
