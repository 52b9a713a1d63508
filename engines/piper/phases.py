"""Two polyphase rewrites of the decoder's 2-D (height 1) convolutions, so
that ONNX Runtime's blocked-layout kernels can take them too.

Both split a convolution's output signal into ``s`` interleaved phases
(samples ``s*t + r`` for ``r = 0 .. s-1``), compute every phase as an output
channel of one ordinary convolution, and interleave the phases back with
Reshape -> Transpose -> Reshape. Each output sample is still the same sum of
the same products, with zero taps added where a phase has fewer taps.

- *upsampling*: a ConvTranspose with stride ``s`` (HiFi-GAN's upsampler) has
  no blocked-layout kernel. Its phase ``r`` at input step ``t`` reads inputs
  ``t + 1``, ``t`` and ``t - 1`` through kernel taps ``k = j*s + r + p``, so it
  is a stride-1 convolution with ``s`` times the output channels and a
  3-tap kernel (about 1.5x the multiply-adds of the transposed one, on
  kernels that run about 2.5x faster);
- *narrow output*: a convolution with fewer output channels than a block
  (HiFi-GAN's last one has 1) is padded to a whole block of 16 by ONNX Runtime,
  16x the work; computing ``s = 16`` consecutive samples as 16 channels of a
  stride-16 convolution (kernel ``K + 15``) costs about 3x instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NARROW_PHASES = 16  # samples per step in the narrow-output rewrite: a whole block of either width


def upsampler_phases(graph: Any, node: Any, weights: dict[str, Any], attrs: dict[str, Any]) -> list[Any] | None:
    """The nodes that replace ConvTranspose ``node`` (weights ``[Cin, Cout, 1, K]``), or None
    when its shape is not the plain upsampler (group 1, no dilation, output length = input * stride)."""
    from onnx import numpy_helper

    weight = numpy_helper.to_array(weights[node.input[1]])
    stride = attrs.get("strides", [1, 1])[-1]
    pads = attrs.get("pads", [0, 0, 0, 0])
    kernel = weight.shape[-1]
    if (weight.ndim != 4 or attrs.get("group", 1) != 1 or any(d != 1 for d in attrs.get("dilations", [1, 1]))
            or any(attrs.get("output_padding", [0, 0])) or pads[1] != pads[3] or pads[0] or pads[2]
            or kernel - 2 * pads[1] != stride or stride < 2):
        return None
    pad = pads[1]
    c_in, c_out = weight.shape[0], weight.shape[1]
    # phase r at step t takes input t - j through tap j*stride + r + pad, for every j that lands inside the kernel
    offsets = [j for j in range(-kernel, kernel + 1) if any(0 <= j * stride + r + pad < kernel for r in range(stride))]
    low, high = min(offsets), max(offsets)
    taps = high - low + 1
    phased = np.zeros((stride, c_out, c_in, 1, taps), dtype=np.float32)
    for r in range(stride):
        for m in range(taps):
            k = (high - m) * stride + r + pad
            if 0 <= k < kernel:
                phased[r, :, :, 0, m] = weight[:, :, 0, k].T
    bias = _bias(node, weights, c_out)
    return _phase_nodes(graph, node, phased.reshape(stride * c_out, c_in, 1, taps), np.tile(bias, stride),
                        stride=1, pads=[0, high, 0, -low], phases=stride, channels=c_out)


def narrow_phases(graph: Any, node: Any, weights: dict[str, Any], attrs: dict[str, Any]) -> list[Any] | None:
    """The nodes that replace Conv ``node`` when it has fewer output channels than a block,
    stride 1 and no dilation or groups; None otherwise. The input length must be a
    multiple of ``NARROW_PHASES`` (the caller knows: HiFi-GAN's output is frames * hop)."""
    from onnx import numpy_helper

    weight = numpy_helper.to_array(weights[node.input[1]])
    unit = [1, 1]
    if (weight.ndim != 4 or weight.shape[0] >= NARROW_PHASES or attrs.get("group", 1) != 1
            or attrs.get("dilations", unit) != unit or attrs.get("strides", unit) != unit):
        return None
    pads = attrs.get("pads", [0, 0, 0, 0])
    c_out, c_in, kernel = weight.shape[0], weight.shape[1], weight.shape[-1]
    if pads[0] or pads[2] or pads[1] + pads[3] != kernel - 1:
        return None  # not a length-preserving convolution
    s = NARROW_PHASES
    phased = np.zeros((s, c_out, c_in, 1, kernel + s - 1), dtype=np.float32)
    for r in range(s):
        phased[r, :, :, :, r:r + kernel] = weight
    bias = _bias(node, weights, c_out)
    return _phase_nodes(graph, node, phased.reshape(s * c_out, c_in, 1, kernel + s - 1), np.tile(bias, s),
                        stride=s, pads=[0, pads[1], 0, kernel - 1 - pads[1]], phases=s, channels=c_out)


def _bias(node: Any, weights: dict[str, Any], channels: int) -> np.ndarray:
    from onnx import numpy_helper

    if len(node.input) > 2 and node.input[2]:
        return numpy_helper.to_array(weights[node.input[2]]).astype(np.float32)
    return np.zeros(channels, dtype=np.float32)


def _phase_nodes(graph: Any, node: Any, weight: np.ndarray, bias: np.ndarray, *, stride: int, pads: list[int],
                 phases: int, channels: int) -> list[Any]:
    """Conv (phase-major output channels ``r * channels + o``) -> interleave -> ``node``'s output."""
    from onnx import helper, numpy_helper

    base, out = node.name, node.output[0]
    graph.initializer.extend([
        numpy_helper.from_array(weight, f"{base}/phases_w"),
        numpy_helper.from_array(bias.astype(np.float32), f"{base}/phases_b"),
        numpy_helper.from_array(np.array([0, phases, channels, -1], dtype=np.int64), f"{base}/phases_shape"),
        numpy_helper.from_array(np.array([0, channels, 1, -1], dtype=np.int64), f"{base}/signal_shape"),
    ])
    return [
        helper.make_node("Conv", [node.input[0], f"{base}/phases_w", f"{base}/phases_b"], [f"{out}/phases"],
                         name=f"{base}/phases", kernel_shape=list(weight.shape[2:]), strides=[1, stride],
                         pads=pads, dilations=[1, 1], group=1),
        helper.make_node("Reshape", [f"{out}/phases", f"{base}/phases_shape"], [f"{out}/phases_split"],
                         name=f"{base}/phases_split"),
        # [N, phases, C, T] -> [N, C, T, phases]: sample s*t + r follows sample s*t + r - 1
        helper.make_node("Transpose", [f"{out}/phases_split"], [f"{out}/interleaved"], name=f"{base}/interleave",
                         perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", [f"{out}/interleaved", f"{base}/signal_shape"], [out], name=f"{base}/signal"),
    ]
