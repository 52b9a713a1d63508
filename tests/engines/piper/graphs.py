"""Small ONNX graphs shaped like a Piper voice, for tests of the graph rewrites.

``decoder_like`` is a miniature VITS tail: a 1-D conv outside the decoder (as
the flow has), then a ``/dec/`` region with everything HiFi-GAN uses: a
pre-conv, LeakyRelu, two stride-4 ConvTransposes (16x upsampling, like the
real 256x), a residual block (two dilated convs, residual Adds), the sum of
blocks divided by a scalar, and a 1-channel post-conv with Tanh; the output is
unsqueezed outside the region, as Piper's export does. Random weights, fixed
seed; 16 channels, so ONNX Runtime's blocked layout takes every conv.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CHANNELS = 16


def _conv(nodes: list[Any], weights: list[Any], rng: np.random.Generator, name: str, x: str, c_in: int, c_out: int,
          kernel: int, dilation: int = 1, *, transpose: bool = False, stride: int = 1) -> str:
    from onnx import helper, numpy_helper

    shape = (c_in, c_out, kernel) if transpose else (c_out, c_in, kernel)
    weights.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(c_in * kernel)).astype(np.float32),
                                           f"{name}.weight"))
    weights.append(numpy_helper.from_array((rng.standard_normal(c_out) * 0.1).astype(np.float32), f"{name}.bias"))
    if transpose:
        pad = (kernel - stride) // 2
        node = helper.make_node("ConvTranspose", [x, f"{name}.weight", f"{name}.bias"], [f"{name}/out"],
                                name=f"{name}/ConvTranspose", kernel_shape=[kernel], strides=[stride], pads=[pad, pad],
                                dilations=[1], group=1)
    else:
        pad = dilation * (kernel - 1) // 2
        node = helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [f"{name}/out"], name=f"{name}/Conv",
                                kernel_shape=[kernel], pads=[pad, pad], dilations=[dilation], strides=[1], group=1)
    nodes.append(node)
    return f"{name}/out"


def _op(nodes: list[Any], op: str, name: str, inputs: list[str], **attrs: Any) -> str:
    from onnx import helper

    nodes.append(helper.make_node(op, inputs, [f"{name}/out"], name=name, **attrs))
    return f"{name}/out"


def decoder_like(seed: int = 0, opset: int = 15, inside: str = "", conditioned: bool = False) -> Any:
    """The miniature graph (``onnx.ModelProto``): input ``z`` ``[N, 16, T]``, output
    ``[N, 1, 1, 16*T]``. ``inside``: an extra op type to put in the decoder region
    (e.g. "Reshape", which the 4-D rewrite cannot take); ``conditioned``: a second
    input ``g`` ``[N, 16, 1]`` added to every step through a 1x1 conv, as a
    multi-speaker voice's speaker embedding is."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes: list[Any] = []
    weights: list[Any] = [numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two"),
                          numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")]
    c = CHANNELS
    x = _conv(nodes, weights, rng, "/flow/enc", "z", c, c, 5)
    x = _conv(nodes, weights, rng, "/dec/conv_pre", x, c, c, 7)
    if conditioned:
        x = _op(nodes, "Add", "/dec/Add_cond", [x, _conv(nodes, weights, rng, "/dec/cond", "g", c, c, 1)])
    x = _op(nodes, "LeakyRelu", "/dec/LeakyRelu", [x], alpha=0.1)
    for level in range(2):
        u = _conv(nodes, weights, rng, f"/dec/ups.{level}", x, c, c, 8, transpose=True, stride=4)
        a0 = _op(nodes, "LeakyRelu", f"/dec/resblocks.{level}/LeakyRelu", [u], alpha=0.1)
        y1 = _op(nodes, "Add", f"/dec/resblocks.{level}/Add",
                 [_conv(nodes, weights, rng, f"/dec/resblocks.{level}/convs.0", a0, c, c, 3), u])
        a1 = _op(nodes, "LeakyRelu", f"/dec/resblocks.{level}/LeakyRelu_1", [y1], alpha=0.1)
        y2 = _op(nodes, "Add", f"/dec/resblocks.{level}/Add_1",
                 [_conv(nodes, weights, rng, f"/dec/resblocks.{level}/convs.1", a1, c, c, 3, 2), y1])
        x = _op(nodes, "Div", f"/dec/Div_{level}", [_op(nodes, "Add", f"/dec/Add_{level}", [y2, u]), "two"])
        x = _op(nodes, "LeakyRelu", f"/dec/LeakyRelu_{level + 1}", [x], alpha=0.1)
    if inside:
        shape = "same_shape"
        weights.append(numpy_helper.from_array(np.array([0, c, -1], dtype=np.int64), shape))
        x = _op(nodes, inside, "/dec/extra", [x, shape])
    x = _conv(nodes, weights, rng, "/dec/conv_post", x, c, 1, 7)
    x = _op(nodes, "Tanh", "/dec/Tanh", [x])
    nodes.append(helper.make_node("Unsqueeze", [x, "axis1"], ["output"], name="/Unsqueeze_out"))
    inputs = [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", c, "T"])]
    if conditioned:
        inputs.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, ["N", c, 1]))
    graph = helper.make_graph(nodes, "decoder_like", inputs,
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 1, 1, "S"])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def run(model: Any, z: np.ndarray, *, fast: bool = False, g: np.ndarray | None = None) -> np.ndarray:
    """``model`` (a ModelProto, or the bytes of a prepared graph) on ``z`` (and ``g``), one thread."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    if fast:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    source = model if isinstance(model, bytes) else model.SerializeToString()
    session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    feeds = {"z": z} if g is None else {"z": z, "g": g}
    return np.asarray(session.run(None, feeds)[0])
