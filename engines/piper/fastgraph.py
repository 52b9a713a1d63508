"""The "fast" graph of a Piper voice: the same model, on faster ONNX Runtime kernels.

Made in memory when a voice loads (about 1.5 s for a medium voice; 2.5 s cut in two, halves.py):

1. conv2d.py rewrites the voice's 1-D convolutions as 2-D ones of height 1
   (and, in the decoder, phases.py its upsamplers and its output convolution);
2. ONNX Runtime optimizes that (all levels, which includes its NCHWc layout
   pass) and saves the optimized graph to a temporary file;
3. nchwc.py keeps the decoder in the blocked layout end to end and folds its
   residual Adds into the convolutions;
4. the result is loaded with only basic optimizations (it already is optimized).

Nothing is left on disk: the optimized graph is specific to this ONNX Runtime
and this CPU's vector width. ``check`` compares the result with the stock
graph on one sentence with the noise off, and the caller keeps the stock graph
when they differ (see model.py): a future ONNX Runtime that fused differently
costs speed, never the voice.

Thread safety: the functions are pure; the sessions they return are safe for
concurrent ``run`` calls, like any ONNX Runtime session.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# Largest sample difference accepted against the stock graph (audio in [-1, 1]).
# The rewrite only reorders float sums: on the bundled voice the largest difference is 7.1e-5.
CHECK_TOLERANCE = 1e-3
NO_NOISE = (0.0, 1.0, 0.0)  # noise_scale, length_scale, noise_w: the graph's random draws multiplied by 0


def prepare(model: Path | bytes) -> bytes:
    """The fast graph of the voice model at ``model`` (a path, or the model's bytes)."""
    import onnx

    from engines.piper.conv2d import to_conv2d
    from engines.piper.nchwc import finish_nchwc

    block = block_size()
    if block < 2:
        raise NoBlockedKernels("this CPU has no blocked-layout convolution kernels in ONNX Runtime")
    proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(str(model))
    to_conv2d(proto)
    finished = optimized(proto)
    del proto
    finish_nchwc(finished, block=block)
    return bytes(finished.SerializeToString())


class NoBlockedKernels(RuntimeError):
    """ONNX Runtime has no blocked-layout kernels here (not x86-64 with AVX): the stock graph is as fast."""


@functools.cache
def block_size() -> int:
    """How many channels ONNX Runtime's blocked layout packs together on this CPU (16
    with AVX-512, 8 with AVX2), read off the filter of a probe convolution with one
    output channel, which it pads to a whole block; 0 when it keeps the plain layout."""
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((1, 16, 1, 1), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="probe")], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 4])], [weight])
    probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    probe.ir_version = 8
    result = optimized(probe).graph
    convs = [n for n in result.node if n.op_type == "Conv" and n.domain == "com.microsoft.nchwc"]
    if not convs:
        return 0
    weights = {t.name: list(t.dims) for t in result.initializer}
    return int(weights[convs[0].input[1]][0])


def optimized(model: Any) -> Any:
    """``model`` (an ``onnx.ModelProto``) as ONNX Runtime optimizes it for this CPU, every level."""
    import onnx
    import onnxruntime  # type: ignore[import-untyped]

    with tempfile.TemporaryDirectory(prefix="voxgate-piper-") as tmp:
        path = Path(tmp) / "optimized.onnx"
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(path)
        options.log_severity_level = 3  # it warns that the saved graph is CPU-specific: that is the point
        onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return onnx.load(str(path))


def session(model: Path | bytes, threads: int, *, spinning: bool = True, fast: bool = False) -> Any:
    """An ONNX Runtime CPU session; ``threads`` 0: ONNX Runtime's default (one per
    core). ``fast``: ``model`` is a graph from ``prepare`` (optimized already)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if fast:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    source = model if isinstance(model, bytes) else str(model)
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def run(session: Any, phoneme_ids: Sequence[int], scales: Sequence[float], speaker_id: int | None = None) -> np.ndarray:
    """One sentence through a Piper graph, as piper-tts feeds it: float32 mono, not normalized."""
    feeds = {"input": np.array([list(phoneme_ids)], dtype=np.int64),
             "input_lengths": np.array([len(phoneme_ids)], dtype=np.int64),
             "scales": np.array(scales, dtype=np.float32)}
    if speaker_id is not None:
        feeds["sid"] = np.array([speaker_id], dtype=np.int64)
    return np.asarray(session.run(None, feeds)[0], dtype=np.float32).reshape(-1)


def check(fast: Any, stock: Any, phoneme_ids: Sequence[int], speaker_id: int | None = None) -> str | None:
    """Why ``fast`` is not the same model as ``stock`` on ``phoneme_ids`` (noise off), or None."""
    a = run(fast, phoneme_ids, NO_NOISE, speaker_id)
    b = run(stock, phoneme_ids, NO_NOISE, speaker_id)
    if a.shape != b.shape:
        return f"{len(a)} samples instead of {len(b)}"
    difference = float(np.max(np.abs(a - b))) if len(a) else 0.0
    if not difference <= CHECK_TOLERANCE:  # also catches NaN
        return f"samples differ by up to {difference:.2g} (tolerance {CHECK_TOLERANCE:g})"
    return None
