"""A lone sentence on both cores: the decoder's two halves at once.

The fast graph gains nothing from a second thread (its blocked kernels split
work by rows, and audio is one row), so for a sentence a listener waits for
with the pool otherwise idle, the voice is cut in two graphs: the *front*
(text encoder, duration predictor, flow: phoneme ids to the decoder's latent
frames, with the voice's random draws) and the *decoder* (HiFi-GAN: frames to
samples). The front runs once; the decoder runs on the first half of the
frames and on the second half at the same time, on two threads, each half
with ``HALO`` extra frames of context across the cut, and the halves' samples
are joined at the cut.

The decoder is convolutional: a sample depends on a bounded window of frames
(about 11 on each side for Piper's medium voices), so with more context than
that each half computes exactly the samples the whole decoder would; the
load-time check compares the result with the stock graph (see model.py).

The same two graphs, decoded whole on one thread, are the fast graph of the
pool's one-thread inferences: cutting the voice in two costs nothing there.

Thread safety: ``HalvesSession.run`` may be called from several threads at
once; a call in halves starts (and joins) one extra thread.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from engines.piper.conv2d import DECODER_PREFIX

HALO = 16  # frames of context past the cut (needed: about 11; the check verifies)
MIN_FRAMES = 4 * HALO  # shorter sentences are decoded whole


def split_graph(model: Any) -> tuple[Any, Any, str] | None:
    """(front, decoder, the latent's name) cut from ``model`` (an ``onnx.ModelProto``),
    or None when the decoder takes more than the latent (a speaker embedding)."""
    from onnx import TensorProto, helper

    graph = model.graph
    weights = {t.name for t in graph.initializer}
    constant_of = {o: n for n in graph.node if n.op_type == "Constant" for o in n.output}
    region = [n for n in graph.node if n.name.startswith(DECODER_PREFIX)]
    made = {o for n in region for o in n.output}
    entering = {i for n in region for i in n.input
                if i and i not in made and i not in weights and i not in constant_of}
    if len(entering) != 1:
        return None
    latent = entering.pop()
    tail, reached = [], set(made)
    inside = {id(n) for n in region}
    for node in graph.node:  # what follows the decoder (Piper: one Unsqueeze to the output)
        if id(node) not in inside and any(i in reached for i in node.input):
            tail.append(node)
            reached.update(node.output)
    if not all(o.name in reached for o in graph.output):
        return None
    back_ids = inside | {id(n) for n in tail}
    front_nodes = [n for n in graph.node if id(n) not in back_ids]
    back_nodes = region + tail
    used_back = {i for n in back_nodes for i in n.input}
    back_nodes = [constant_of[i] for i in sorted(used_back) if i in constant_of] + back_nodes

    # the duration predictor's frame counts (its one Ceil) go out too: they time the words (alignment.py)
    durations = [o for n in front_nodes if n.op_type == "Ceil" for o in n.output]
    front_outputs = [helper.make_tensor_value_info(latent, TensorProto.FLOAT, None)]
    if len(durations) == 1:
        front_outputs.append(helper.make_tensor_value_info(durations[0], TensorProto.FLOAT, None))
    front = _subgraph(model, front_nodes, list(graph.input), front_outputs)
    decoder = _subgraph(model, back_nodes,
                        [helper.make_tensor_value_info(latent, TensorProto.FLOAT, ["N", "C", "T"])],
                        list(graph.output))
    return front, decoder, latent


def _subgraph(model: Any, nodes: list[Any], inputs: list[Any], outputs: list[Any]) -> Any:
    out = type(model)()
    out.CopyFrom(model)
    graph = out.graph
    used = {i for n in nodes for i in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.input[:]
    graph.input.extend(i for i in inputs if i.name in used)
    del graph.output[:]
    graph.output.extend(outputs)
    del graph.value_info[:]
    return out


class HalvesSession:
    """Front, then the decoder (in two halves on two threads when ``halves``);
    answers ``run`` like an ONNX Runtime session of the whole voice, so
    piper-tts can drive it: the audio, then what else the front puts out (the
    phoneme durations, when ``split_graph`` found them)."""

    def __init__(self, front: Any, decoder: Any, latent: str, *, halves: bool) -> None:
        self.front, self.decoder, self.latent, self.halves = front, decoder, latent, halves

    def run(self, output_names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        frames, *extras = self.front.run(None, feeds)
        count = frames.shape[-1]
        if not self.halves or frames.shape[0] != 1 or count < MIN_FRAMES:
            return [self._decode(frames), *extras]
        cut = count // 2
        second: list[np.ndarray] = []
        failed: list[BaseException] = []

        def decode_second() -> None:
            try:
                second.append(self._decode(frames[..., cut - HALO:]))
            except BaseException as exc:  # handed to the caller below
                failed.append(exc)

        helper = threading.Thread(target=decode_second, name="piper-half", daemon=True)
        helper.start()
        try:
            first = self._decode(frames[..., :cut + HALO])
        finally:
            helper.join()
        if failed:
            raise failed[0]
        hop = first.shape[-1] // (cut + HALO)  # samples per frame
        return [np.concatenate([first[..., :cut * hop], second[0][..., HALO * hop:]], axis=-1), *extras]

    def _decode(self, frames: np.ndarray) -> np.ndarray:
        return np.asarray(self.decoder.run(None, {self.latent: np.ascontiguousarray(frames)})[0])
