"""The 2-D rewrite of a Piper voice's convolutions (and its polyphase parts):
the same outputs from ONNX Runtime, on a miniature decoder-shaped graph."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from engines.piper.conv2d import to_conv2d
from tests.engines.piper.graphs import decoder_like, run

Z = np.random.default_rng(1).standard_normal((1, 16, 23)).astype(np.float32)


def op_types(model, prefix: str = "") -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node if n.name.startswith(prefix))


def test_the_rewritten_graph_computes_the_same_audio():
    expected = run(decoder_like(), Z)
    model, made = to_conv2d(decoder_like())
    assert made == 9  # the flow's conv, and all eight of the decoder's
    assert run(model, Z).shape == expected.shape == (1, 1, 1, 16 * 23)
    assert float(np.max(np.abs(run(model, Z) - expected))) < 1e-5


def test_the_decoder_becomes_one_region_of_2d_convs_with_polyphase_upsamplers():
    model, _ = to_conv2d(decoder_like())
    # the leaving Squeeze is named after the region's output; the entering Unsqueeze after its input
    assert op_types(model, "/dec/") == {"Conv": 8, "LeakyRelu": 7, "Add": 6, "Div": 2, "Tanh": 1, "Reshape": 6,
                                        "Transpose": 3, "Squeeze": 1}
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    assert all(len(weights[n.input[1]]) == 4 for n in convs)
    by_name = {n.name: n for n in convs}
    # a stride-4 upsampler: 4 phases of 16 channels, 3 taps; the 1-channel post-conv: 16 samples per step
    assert weights[by_name["/dec/ups.0/ConvTranspose/phases"].input[1]] == [64, 16, 1, 3]
    assert weights[by_name["/dec/conv_post/Conv/phases"].input[1]] == [16, 16, 1, 22]
    # the region is entered and left once; the flow's conv is wrapped on its own
    assert [n.op_type for n in model.graph.node if n.op_type in ("Squeeze", "Unsqueeze")].count("Unsqueeze") == 3


def test_the_same_audio_with_a_batch_of_two():
    z = np.concatenate([Z, Z[:, :, ::-1]]).copy()
    model, _ = to_conv2d(decoder_like())
    assert float(np.max(np.abs(run(model, z) - run(decoder_like(), z)))) < 1e-5


def test_a_decoder_with_an_op_that_needs_3d_tensors_keeps_its_shape_and_only_wraps_convs():
    original = decoder_like(inside="Reshape")
    expected = run(original, Z)
    model, made = to_conv2d(decoder_like(inside="Reshape"))
    assert made == 7  # the Convs; ConvTranspose has no faster 2-D kernel on its own
    assert op_types(model)["Unsqueeze"] == 1 + 7  # the graph's own, and one per conv
    assert op_types(model)["ConvTranspose"] == 2
    assert float(np.max(np.abs(run(model, Z) - expected))) < 1e-5


def test_a_speaker_conditioned_decoder_keeps_its_shape_and_the_prepared_graph_its_audio():
    from engines.piper import fastgraph

    g = np.random.default_rng(3).standard_normal((1, 16, 1)).astype(np.float32)
    expected = run(decoder_like(conditioned=True), Z, g=g)
    model, made = to_conv2d(decoder_like(conditioned=True))
    assert made == 8 and op_types(model)["ConvTranspose"] == 2  # wrapped one by one, no 4-D region
    assert float(np.max(np.abs(run(model, Z, g=g) - expected))) < 1e-5
    prepared = fastgraph.prepare(decoder_like(conditioned=True).SerializeToString())
    assert float(np.max(np.abs(run(prepared, Z, fast=True, g=g) - expected))) < 1e-5


def test_an_opset_before_13_is_refused():
    with pytest.raises(ValueError, match=r"^opset 12: the rewrite needs opset 13 or later \(Squeeze with an axes "
                                         r"input\)$"):
        to_conv2d(decoder_like(opset=12))
