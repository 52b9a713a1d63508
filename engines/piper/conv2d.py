"""A Piper voice's 1-D convolutions rewritten as 2-D convolutions of height 1.

ONNX Runtime's fastest x86 convolution kernels (MLAS "NCHWc": channels in
blocks of 8 or 16 floats, direct convolution with no im2col buffer) only take
4-D tensors, and a VITS voice is all 1-D convolutions, so it runs on the
generic im2col + GEMM path. A convolution of a ``[N, C, T]`` tensor with a
``[O, C, K]`` kernel is exactly the convolution of ``[N, C, 1, T]`` with
``[O, C, 1, K]`` (same taps, same sums), so the rewrite changes no arithmetic,
only which kernel ONNX Runtime picks.

Two shapes of rewrite:

- the HiFi-GAN decoder (``/dec/...``, about 70% of the work) becomes one 4-D
  region: its input is unsqueezed once, every convolution and element-wise op
  inside works on ``[N, C, 1, T]``, and its output is squeezed once. ONNX
  Runtime then keeps the whole region in the blocked layout (see nchwc.py);
  inside it the upsamplers and the 1-channel output convolution become
  polyphase convolutions (phases.py);
- every other 1-D convolution (text encoder, flow, duration predictor) is
  wrapped alone in Unsqueeze -> Conv -> Squeeze: their tensors are short (one
  step per phoneme or per 256 samples), so the reorders around each cost
  little next to the convolution they speed up.

The region rewrite is only applied when the decoder holds nothing but
convolutions and shape-agnostic element-wise ops and has one input; anything
else (a multi-speaker voice's speaker conditioning, a future export with a
Reshape inside) falls back to wrapping its convolutions alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from engines.piper.phases import NARROW_PHASES, narrow_phases, upsampler_phases

DECODER_PREFIX = "/dec/"
CONV_OPS = ("Conv", "ConvTranspose")
# ops that compute the same thing on [N, C, T] and [N, C, 1, T] (scalar constants aside)
REGION_OPS = frozenset({"Conv", "ConvTranspose", "LeakyRelu", "Relu", "Tanh", "Sigmoid", "Add", "Sub", "Mul",
                        "Div", "Identity", "Constant"})
SPATIAL_ATTRS = ("dilations", "strides", "kernel_shape", "output_padding")


def to_conv2d(model: Any) -> tuple[Any, int]:
    """Rewrite ``model`` (an ``onnx.ModelProto``, changed in place) and return it
    with the number of convolutions made 2-D."""
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:
        raise ValueError(f"opset {opset}: the rewrite needs opset 13 or later (Squeeze with an axes input)")
    weights = {t.name: t for t in graph.initializer}
    region = _decoder_region(graph, weights)
    made = _region_to_4d(graph, region, weights) if region else 0
    made += _wrap_convs(graph, weights, skip={id(n) for n in region})
    # shapes recorded by the exporter no longer hold for the rewritten tensors
    del graph.value_info[:]
    used = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return model, made


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _set_attrs(node: Any, attrs: dict[str, Any]) -> None:
    from onnx import helper

    del node.attribute[:]
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())


def _conv_to_2d(node: Any, weights: dict[str, Any], done: set[str]) -> bool:
    """Make one 1-D Conv/ConvTranspose 2-D (height 1); False if it is not 1-D."""
    from onnx import numpy_helper

    weight = weights.get(node.input[1])
    if weight is None or len(weight.dims) != 3:
        return weight is not None and weight.name in done  # a weight shared with a conv already made 2-D
    if weight.name not in done:
        array = numpy_helper.to_array(weight)
        weight.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(array[:, :, None, :]), weight.name))
        done.add(weight.name)
    attrs = _attrs(node)
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise ValueError(f"{node.name}: auto_pad is not supported")
    for key in SPATIAL_ATTRS:
        if key in attrs:
            attrs[key] = [0 if key == "output_padding" else 1, *attrs[key]]
    if "pads" in attrs:
        begin, end = attrs["pads"]
        attrs["pads"] = [0, begin, 0, end]
    attrs["kernel_shape"] = [1, int(weight.dims[-1])]
    _set_attrs(node, attrs)
    return True


def _decoder_region(graph: Any, weights: dict[str, Any]) -> list[Any]:
    """The decoder's nodes if they can all work on 4-D tensors, else []."""
    region = [n for n in graph.node if n.name.startswith(DECODER_PREFIX)]
    if not region or any(n.op_type not in REGION_OPS or n.domain not in ("", "ai.onnx") for n in region):
        return []
    for node in region:
        if node.op_type in CONV_OPS:
            weight = weights.get(node.input[1])
            if weight is None or len(weight.dims) != 3 or (len(node.input) > 2 and node.input[2] not in weights):
                return []
        else:
            for name in node.input:
                tensor = weights.get(name)
                if tensor is not None and int(np.prod(tensor.dims)) != 1:
                    return []  # a non-scalar constant would broadcast differently in 4-D
        if node.op_type == "Constant":
            value = _attrs(node).get("value")
            if value is None or int(np.prod(value.dims)) != 1:
                return []
    produced = {o for n in region for o in n.output}
    entering = {i for n in region for i in n.input if i and i not in produced and i not in weights}
    if len(entering) != 1:
        # a second input is a multi-speaker voice's speaker embedding, [N, C, 1], added to every
        # step: a broadcast the blocked layout cannot do, so that decoder keeps its shape
        return []
    return region


def _region_to_4d(graph: Any, region: list[Any], weights: dict[str, Any]) -> int:
    from onnx import helper, numpy_helper

    inside = {id(n) for n in region}
    produced = {o for n in region for o in n.output}
    constants = set(weights) | {o for n in region if n.op_type == "Constant" for o in n.output}
    entering = _ordered(i for n in region for i in n.input if i and i not in produced and i not in constants)
    graph_outputs = {o.name for o in graph.output}
    used_outside = {i for n in graph.node if id(n) not in inside for i in n.input}
    leaving = _ordered(o for n in region for o in n.output if o in used_outside or o in graph_outputs)

    axes = "/voxgate/axes_h"
    graph.initializer.append(numpy_helper.from_array(np.array([2], dtype=np.int64), axes))
    renamed_in = {name: f"{name}/4d" for name in entering}
    renamed_out = {name: f"{name}/4d" for name in leaving}
    done: set[str] = set()
    made = 0
    upsampling = 1  # how many output samples each input step has become so far
    replaced: dict[int, list[Any]] = {}
    for node in region:
        node.input[:] = [renamed_in.get(i, renamed_out.get(i, i)) for i in node.input]
        node.output[:] = [renamed_out.get(o, o) for o in node.output]
        if node.op_type not in CONV_OPS or not _conv_to_2d(node, weights, done):
            continue
        made += 1
        attrs = _attrs(node)
        if node.op_type == "ConvTranspose":
            upsampling *= int(attrs.get("strides", [1, 1])[-1])
            phased = upsampler_phases(graph, node, weights, attrs)
        else:
            phased = narrow_phases(graph, node, weights, attrs) if upsampling % NARROW_PHASES == 0 else None
        if phased:
            replaced[id(node)] = phased
    nodes = [m for n in graph.node for m in replaced.get(id(n), [n])]
    first = next(k for k, n in enumerate(nodes) if id(n) in inside or n.name.startswith(DECODER_PREFIX))
    last = max(k for k, n in enumerate(nodes) if id(n) in inside or n.name.startswith(DECODER_PREFIX))
    squeezes = [helper.make_node("Squeeze", [renamed_out[o], axes], [o], name=f"{o}/squeeze_h") for o in leaving]
    unsqueezes = [helper.make_node("Unsqueeze", [i, axes], [renamed_in[i]], name=f"{i}/unsqueeze_h")
                  for i in entering]
    nodes[last + 1:last + 1] = squeezes
    nodes[first:first] = unsqueezes
    del graph.node[:]
    graph.node.extend(nodes)
    return made


def _wrap_convs(graph: Any, weights: dict[str, Any], skip: set[int]) -> int:
    from onnx import helper, numpy_helper

    axes = "/voxgate/axes_h_wrap"
    nodes: list[Any] = []
    done: set[str] = set()
    made = 0
    for node in graph.node:
        if id(node) in skip or node.op_type != "Conv" or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        if not _conv_to_2d(node, weights, done):
            nodes.append(node)
            continue
        x, y = node.input[0], node.output[0]
        nodes.append(helper.make_node("Unsqueeze", [x, axes], [f"{y}/wrapped_in"], name=f"{node.name}/unsqueeze_h"))
        node.input[0], node.output[0] = f"{y}/wrapped_in", f"{y}/wrapped_out"
        nodes.append(node)
        nodes.append(helper.make_node("Squeeze", [f"{y}/wrapped_out", axes], [y], name=f"{node.name}/squeeze_h"))
        made += 1
    if made:
        graph.initializer.append(numpy_helper.from_array(np.array([2], dtype=np.int64), axes))
    del graph.node[:]
    graph.node.extend(nodes)
    return made


def _ordered(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))
