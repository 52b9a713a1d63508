"""An int8 decoder for a Piper voice: the HiFi-GAN decoder's convolutions on
ONNX Runtime's 8-bit kernels (opt-in: ``VOXGATE_PIPER_PRECISION=int8``).

Made in memory when a voice loads, on top of the fast graph's cut (halves.py):

1. the decoder's 1-D convolutions become 2-D ones, its upsamplers and its
   output convolution polyphase ones (conv2d.py, phases.py), as in the fast
   graph (ONNX Runtime's 8-bit convolution has no transposed form);
2. the front, in float32 with a fixed seed on its random draws, turns
   ``CALIBRATION`` (English sentences in the voice's own phonemes, with its
   own noise scales) into decoder input frames, cut in windows of ``WINDOW``
   frames; they give each activation its range (min/max);
3. ``onnxruntime.quantization`` writes the decoder with QuantizeLinear /
   DequantizeLinear pairs: weights int8 per output channel, activations uint8
   per tensor, for the convolutions, LeakyRelus and residual Adds inside the
   upsampling stages (``QUANTIZED_PARTS``). The joins between stages (the
   sum of the residual blocks, its division, the LeakyRelu after it), the
   output convolution and Tanh stay float32: the output convolution's result
   is the audio, and 8 bits there would be 8-bit audio;
4. ONNX Runtime fuses the pairs into its int8 kernels (QLinearConv, ...)
   when the session is made.

Unlike the fast graph this changes the arithmetic: the audio is not the
float32 model's. The int8 decoder raises the noise floor in pauses (about
-46 dBFS against -71 on the bundled voice) and moves the spectrum by a few dB
(``spectral_distance``), while speech stays as intelligible (docs/engines/piper.md
has the figures). ``check`` bounds the difference at every load; the caller
keeps the float32 decoder when it fails (model.py).

Thread safety: the functions are pure; the sessions made from their graphs
are safe for concurrent ``run`` calls.
"""

from __future__ import annotations

import functools
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

PRECISIONS = ("fp32", "int8")
WINDOW = 64  # decoder input frames per calibration example (about 0.75 s of audio)
SEED = 7.0  # the front's random draws while calibrating: the same int8 decoder at every load
# Where quantization pays and the error stays small: the layers inside the upsampling stages.
QUANTIZED_PARTS = ("/conv_pre/", "/ups.", "/resblocks.")
QUANTIZED_OPS = ("Conv", "LeakyRelu", "Add")
# English sentences for the activation ranges: varied phonemes, loud and quiet, questions, numbers.
CALIBRATION = (
    "Good morning, how can I help you today?",
    "The weather will be cloudy with a chance of rain in the afternoon.",
    "Please turn off the lights in the living room.",
    "Your next meeting starts in fifteen minutes.",
    "I have set a timer for ten minutes.",
    "The kitchen temperature is twenty one degrees.",
    "Playing your favourite music now.",
    "Would you like me to read the news headlines?",
    "The front door is locked and the alarm is armed.",
    "Sorry, I did not understand that. Could you say it again?",
    "Seven thousand three hundred and twelve people attended the concert.",
    "She sells sea shells by the sea shore, quietly and slowly!",
)

# Largest spectral distance (dB, see spectral_distance) accepted at load. On the bundled
# voice the int8 decoder is 10.2 dB from the float32 one on the check sentence (noise
# off), 9.9 on average and 11.3 at worst over the 16 Harvard sentences.
CHECK_DB = 14.0
FLOOR_DB = 80.0  # spectral_distance ignores what is more than this far below the loudest band


def calibration_frames(front: Any, latent: str, phoneme_ids: Sequence[Sequence[int]],
                       scales: Sequence[float]) -> list[np.ndarray]:
    """Decoder input windows of ``WINDOW`` frames: ``front`` (an ``onnx.ModelProto``,
    the voice up to the decoder) run on each sentence's ids with a fixed seed."""
    session = seeded_session(front)
    return windows([frames(session, latent, ids, scales) for ids in phoneme_ids])


def seeded_session(model: Any) -> Any:
    """A one-thread session of ``model`` (an ``onnx.ModelProto``, not changed) whose
    random draws have a fixed seed: a fresh one draws the same noise run after run."""
    import onnx
    from onnx import helper

    from engines.piper import fastgraph

    seeded = onnx.ModelProto()
    seeded.CopyFrom(model)
    for node in seeded.graph.node:
        if node.op_type in ("RandomNormalLike", "RandomUniformLike", "RandomNormal", "RandomUniform"):
            node.attribute.append(helper.make_attribute("seed", SEED))
    return fastgraph.session(seeded.SerializeToString(), 1, spinning=False)


def frames(front: Any, latent: str, phoneme_ids: Sequence[int], scales: Sequence[float]) -> np.ndarray:
    """The decoder's input ``[1, C, T]`` for one sentence, from a session of the front."""
    feeds = {"input": np.array([list(phoneme_ids)], dtype=np.int64),
             "input_lengths": np.array([len(phoneme_ids)], dtype=np.int64),
             "scales": np.array(scales, dtype=np.float32)}
    return np.asarray(front.run([latent], feeds)[0], dtype=np.float32)


def windows(frames: Sequence[np.ndarray], width: int = WINDOW) -> list[np.ndarray]:
    """Every ``[1, C, T]`` array cut in ``[1, C, width]`` windows covering it (the last one
    overlapping the one before); arrays shorter than ``width`` are left out. The
    calibrator's histograms need examples of one shape."""
    out = []
    for array in frames:
        length = array.shape[-1]
        if length < width:
            continue
        starts = list(range(0, length - width + 1, width))
        if starts[-1] != length - width:
            starts.append(length - width)
        out += [np.ascontiguousarray(array[..., s:s + width]) for s in starts]
    return out


def quantize_decoder(decoder: Any, latent: str, examples: Sequence[np.ndarray]) -> bytes:
    """The int8 graph of ``decoder`` (an ``onnx.ModelProto`` from halves.split_graph, not
    changed), calibrated on ``examples`` (its input ``latent``). Load it with every
    ONNX Runtime optimization (``session``): that fuses the int8 kernels."""
    import onnx
    from onnxruntime import quantization  # type: ignore[import-untyped]

    from engines.piper.conv2d import to_conv2d

    if not examples:
        raise ValueError("no calibration example (every sentence shorter than the window)")
    model = onnx.ModelProto()
    model.CopyFrom(decoder)
    to_conv2d(model)
    chosen = [n.name for n in model.graph.node
              if n.op_type in QUANTIZED_OPS and any(part in n.name for part in QUANTIZED_PARTS)]
    if not chosen:
        raise ValueError("no layer named like a HiFi-GAN decoder's (conv_pre, ups, resblocks)")

    class Examples(quantization.CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.left = iter(examples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            example = next(self.left, None)
            return None if example is None else {latent: example}

    with tempfile.TemporaryDirectory(prefix="voxgate-piper-int8-") as tmp, _quiet_quantizer():
        source, result = Path(tmp) / "decoder.onnx", Path(tmp) / "decoder.int8.onnx"
        onnx.save(model, str(source))
        quantization.quantize_static(
            str(source), str(result), Examples(), quant_format=quantization.QuantFormat.QDQ, per_channel=True,
            activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8,
            calibrate_method=quantization.CalibrationMethod.MinMax, op_types_to_quantize=list(QUANTIZED_OPS),
            nodes_to_quantize=chosen)
        return result.read_bytes()


class _quiet_quantizer(logging.Filter):
    """Drops what the quantizer logs through the root logger while it runs: advice for
    offline use ("consider pre-processing") that at load would read like a problem."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "quantization" not in Path(record.pathname).parts

    def __enter__(self) -> None:
        logging.root.addFilter(self)

    def __exit__(self, *exc: object) -> None:
        logging.root.removeFilter(self)


def session(model: bytes) -> Any:
    """A one-thread session of an int8 graph from ``quantize_decoder``."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


@functools.cache
def _mel_bank(rate: int, size: int, bands: int) -> np.ndarray:
    """Triangular mel filters ``[size // 2 + 1, bands]`` from 0 Hz to ``rate / 2``."""
    def mel(hz: np.ndarray) -> np.ndarray:
        return np.asarray(2595.0 * np.log10(1.0 + hz / 700.0))

    edges_mel = np.linspace(0.0, float(mel(np.array(rate / 2))), bands + 2)
    edges = 700.0 * (10 ** (edges_mel / 2595.0) - 1.0)
    freqs = np.linspace(0.0, rate / 2, size // 2 + 1)
    bank = np.zeros((len(freqs), bands))
    for b in range(bands):
        low, mid, high = edges[b], edges[b + 1], edges[b + 2]
        rising = (freqs - low) / (mid - low)
        falling = (high - freqs) / (high - mid)
        bank[:, b] = np.maximum(0.0, np.minimum(rising, falling))
    return bank


def log_mel(audio: np.ndarray, rate: int, size: int = 1024, hop: int = 256, bands: int = 80) -> np.ndarray:
    """Power in ``bands`` mel bands (dB), one row per ``hop`` samples (Hann windows of ``size``)."""
    padded = np.pad(np.asarray(audio, dtype=np.float64), size // 2)
    frames = np.lib.stride_tricks.sliding_window_view(padded, size)[::hop] * np.hanning(size)
    power = np.abs(np.fft.rfft(frames, axis=-1)) ** 2 @ _mel_bank(rate, size, bands)
    return np.asarray(10.0 * np.log10(np.maximum(power, 1e-20)))


def spectral_distance(audio: np.ndarray, reference: np.ndarray, rate: int) -> float:
    """Mean absolute difference (dB) of the log-mel spectra of two signals of equal
    length, each band floored ``FLOOR_DB`` below the reference's loudest: 0 for the
    same audio; how far the int8 decoder's spectrum strays, noise floor included."""
    ours, theirs = log_mel(audio, rate), log_mel(reference, rate)
    floor = float(np.max(theirs)) - FLOOR_DB
    return float(np.mean(np.abs(np.maximum(ours, floor) - np.maximum(theirs, floor))))


def check(int8: Any, fp32: Any, phoneme_ids: Sequence[int], rate: int, speaker_id: int | None = None) -> str | None:
    """Why the voice on the int8 decoder (``int8``) strays too far from ``fp32`` on
    ``phoneme_ids`` (noise off), or None."""
    from engines.piper import fastgraph

    a = fastgraph.run(int8, phoneme_ids, fastgraph.NO_NOISE, speaker_id)
    b = fastgraph.run(fp32, phoneme_ids, fastgraph.NO_NOISE, speaker_id)
    if a.shape != b.shape:
        return f"{len(a)} samples instead of {len(b)}"
    if not np.all(np.isfinite(a)):
        return "its audio is not finite"
    distance = spectral_distance(a, b, rate)
    if not distance <= CHECK_DB:
        return f"its spectrum is {distance:.1f} dB from the float32 decoder's (limit {CHECK_DB:g})"
    return None
