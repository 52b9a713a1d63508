"""Keeping the decoder in ONNX Runtime's blocked layout: what the finishing
pass changes in ONNX Runtime's own optimized graph, and that the prepared
graph still computes the same audio."""

from __future__ import annotations

import numpy as np
import pytest

from engines.piper import fastgraph
from engines.piper.conv2d import to_conv2d
from engines.piper.nchwc import NCHWC, finish_nchwc, topological
from tests.engines.piper.graphs import decoder_like, run

Z = np.random.default_rng(2).standard_normal((1, 16, 31)).astype(np.float32)


def reorders_around(model, op_type: str) -> int:
    """How many ``op_type`` nodes of the decoder read a tensor just converted back from the blocked layout."""
    made_by = {o: n for n in model.graph.node for o in n.output}
    return sum(1 for n in model.graph.node if n.op_type == op_type and n.name.startswith("/dec/")
               and any(made_by.get(i) is not None and made_by[i].op_type == "ReorderOutput" for i in n.input))


def test_finishing_keeps_the_decoder_blocked_and_fuses_its_residual_adds():
    rewritten, _ = to_conv2d(decoder_like())
    graph = fastgraph.optimized(rewritten)
    assert reorders_around(graph, "Add") == 4  # what ONNX Runtime leaves: the residual Adds on unblocked copies
    done = finish_nchwc(graph)
    assert done["Add fused into conv"] == 4  # both residual Adds of both blocks
    assert (done["Add kept blocked"], done["LeakyRelu kept blocked"], done["Div kept blocked"]) == (6, 4, 2)
    assert reorders_around(graph, "LeakyRelu") == 0 and reorders_around(graph, "Add") == 0
    conv_sums = [n for n in graph.graph.node if n.domain == NCHWC and n.op_type == "Conv" and len(n.input) == 4]
    assert len(conv_sums) == 4


def test_with_the_block_width_known_the_upsampled_signal_never_leaves_the_blocked_layout():
    if fastgraph.block_size() < 2:
        pytest.skip("ONNX Runtime has no blocked-layout kernels on this CPU (needs x86-64 with AVX2 or AVX-512)")
    rewritten, _ = to_conv2d(decoder_like())
    graph = fastgraph.optimized(rewritten)
    done = finish_nchwc(graph, block=fastgraph.block_size())
    assert done["phase interleave kept blocked"] == 2  # both upsamplers
    made_by = {o: n for n in graph.graph.node for o in n.output}
    reorders = sorted((n.op_type, made_by[n.input[0]].name if n.input[0] in made_by else n.input[0])
                      for n in graph.graph.node if n.op_type in ("ReorderInput", "ReorderOutput"))
    # left: around the flow's conv, the decoder's way in, and the 1-channel post-conv's phases (too few for a block)
    assert reorders == [("ReorderInput", "/flow/enc/Conv/unsqueeze_h"),
                        ("ReorderInput", "/flow/enc/out/unsqueeze_h"),
                        ("ReorderOutput", "/dec/conv_post/out/phases_nchwc"),
                        ("ReorderOutput", "/flow/enc/out/wrapped_out_nchwc")]


def test_the_prepared_graph_computes_the_same_audio():
    prepared = fastgraph.prepare(decoder_like().SerializeToString())
    expected = run(decoder_like(), Z)
    got = run(prepared, Z, fast=True)
    assert got.shape == expected.shape == (1, 1, 1, 16 * 31)
    assert float(np.max(np.abs(got - expected))) < 1e-5


def test_topological_order_puts_producers_first_and_refuses_a_cycle():
    from onnx import helper

    b = helper.make_node("Relu", ["a"], ["b"], name="second")
    a = helper.make_node("Relu", ["x"], ["a"], name="first")
    assert [n.name for n in topological([b, a], ["x"])] == ["first", "second"]
    loop = helper.make_node("Add", ["b", "x"], ["a"], name="loop")
    with pytest.raises(ValueError, match=r"^the graph has a cycle$"):
        topological([b, loop], ["x"])
