"""Finishing ONNX Runtime's NCHWc layout for the Piper decoder.

With the decoder's convolutions 2-D (conv2d.py), ONNX Runtime's layout pass
turns each into a blocked-layout ("NCHWc") convolution, but it only keeps a
tensor blocked across Add, Relu, Sigmoid, Tanh, Concat and a few others.
HiFi-GAN's LeakyRelu and its divide-by-a-constant are not among them, so the
optimized graph converts the whole upsampled signal back and forth around
every one of them (ReorderOutput -> LeakyRelu -> ReorderInput), and the
residual Adds that could be folded into the convolutions stay separate passes.

This module edits the graph ONNX Runtime itself optimized (saved with
``optimized_model_filepath``), so the blocked filters are ONNX Runtime's own:

1. an element-wise op of the decoder whose inputs are blocked tensors in
   disguise (the output of a ReorderOutput), or plain tensors of the same
   shape, runs on the blocked tensors instead: an element-wise op computes
   the same values in any memory order, as long as every operand uses the
   same order (channel counts that are multiples of 16 have no padding in
   either block size, 8 or 16);
2. ``Add(NCHWc conv, other)`` becomes the convolution's own ``Sum`` input
   (the kernel adds it while the output is in registers), as ONNX Runtime
   does for the ops it knows;
3. an activation right after a single-use NCHWc convolution becomes the
   convolution's fused activation;
4. ReorderOutput -> ReorderInput pairs left behind cancel out.

The result is only meant for the ONNX Runtime build and CPU that produced it
(the blocked filters depend on the CPU's vector width); fastgraph.py makes it
at load time and checks it against the stock model before using it.
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NCHWC = "com.microsoft.nchwc"
ELEMENTWISE = frozenset({"LeakyRelu", "Relu", "Tanh", "Sigmoid", "Add", "Sub", "Mul", "Div"})
FUSABLE_ACTIVATIONS = frozenset({"LeakyRelu", "Relu", "Tanh", "Sigmoid"})
SCALAR_OPERAND_OPS = frozenset({"Add", "Sub", "Mul", "Div"})
ALIGN = 16  # channel counts that fill whole blocks of either width (8 or 16)


def finish_nchwc(model: Any, prefix: str = "/dec/", block: int = 0) -> collections.Counter[str]:
    """Apply the rewrites above to the nodes named ``prefix...`` of ``model``
    (an optimized ``onnx.ModelProto``, changed in place); return what was done.
    ``block``: this CPU's block width (8 or 16), which the phase interleave
    needs; 0 leaves interleaves as ONNX Runtime made them."""
    from onnx import numpy_helper

    graph = model.graph
    context = _Context(
        graph=graph, prefix=prefix, block=block,
        weights={t.name for t in graph.initializer},
        scalars={t.name for t in graph.initializer if int(np.prod(t.dims)) == 1},
        shapes={t.name: [int(v) for v in numpy_helper.to_array(t)] for t in graph.initializer
                if t.data_type == 7 and len(t.dims) == 1 and t.dims[0] <= 8},  # int64 shape vectors
        outputs={o.name for o in graph.output})
    sources = [i.name for i in graph.input] + sorted(context.weights)
    nodes = topological(list(graph.node), sources)  # every rewrite below keeps this order valid
    done: collections.Counter[str] = collections.Counter()
    while True:
        step = _Step(nodes, context)
        if not step.apply_one(done):
            break
        nodes = step.nodes
    del graph.node[:]
    graph.node.extend(topological(nodes, sources))
    used = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return done


@dataclass
class _Context:
    graph: Any
    prefix: str
    block: int
    weights: set[str]
    scalars: set[str]
    shapes: dict[str, list[int]]
    outputs: set[str]
    blocked: set[str] = field(default_factory=set)  # tensors made blocked by a rewrite that is not element-wise


def _attr(node: Any, name: str) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return None


class _Step:
    """One rewrite over a snapshot of the graph's indexes (rebuilt after each change)."""

    def __init__(self, nodes: list[Any], context: _Context) -> None:
        self.nodes = nodes
        self.context = context
        self.weights, self.scalars, self.outputs, self.prefix = (context.weights, context.scalars, context.outputs,
                                                                  context.prefix)
        self.producer = {o: n for n in nodes for o in n.output}
        self.consumers: dict[str, list[Any]] = collections.defaultdict(list)
        for n in nodes:
            for i in n.input:
                self.consumers[i].append(n)
        self.blocked: set[str] = set(context.blocked)  # tensors in the blocked layout
        for n in nodes:
            if (n.domain == NCHWC and n.op_type != "ReorderOutput") or (
                    n.domain == "" and n.op_type in ELEMENTWISE and any(i in self.blocked for i in n.input)):
                self.blocked.update(n.output)

    def apply_one(self, done: collections.Counter[str]) -> bool:
        for node in self.nodes:
            if node.domain == NCHWC and node.op_type == "ReorderInput" and self._cancel_pair(node):
                done["reorder pairs cancelled"] += 1
                return True
            if not node.name.startswith(self.prefix) or node.domain != "":
                continue
            if node.op_type in ELEMENTWISE and self._hoist(node):
                done[f"{node.op_type} kept blocked"] += 1
                return True
            if node.op_type == "Add" and self._fuse_sum(node):
                done["Add fused into conv"] += 1
                return True
            if node.op_type in FUSABLE_ACTIVATIONS and self._fuse_activation(node):
                done[f"{node.op_type} fused into conv"] += 1
                return True
            if node.op_type == "Transpose" and self._block_interleave(node):
                done["phase interleave kept blocked"] += 1
                return True
        return self._drop_dead_reorders(done)

    def _unblocked_channels(self, name: str) -> int | None:
        """Channels of ``name`` if it is a ReorderOutput's plain copy of a blocked tensor."""
        node = self.producer.get(name)
        if node is None or node.domain != NCHWC or node.op_type != "ReorderOutput" or _attr(node, "channels_last"):
            return None
        channels = _attr(node, "channels")
        return int(channels) if channels else None

    def _cancel_pair(self, node: Any) -> bool:
        channels = self._unblocked_channels(node.input[0])
        if _attr(node, "channels_last") or not channels or channels % ALIGN or node.output[0] in self.outputs:
            return False
        blocked = self.producer[node.input[0]].input[0]
        for user in self.consumers[node.output[0]]:
            user.input[:] = [blocked if i == node.output[0] else i for i in user.input]
        self.nodes.remove(node)
        return True

    def _hoist(self, node: Any) -> bool:
        operands = [i for i in node.input if not (node.op_type in SCALAR_OPERAND_OPS and i in self.scalars)]
        if not operands or any(i in self.weights or i in self.blocked for i in operands):
            return False
        channels = {c for c in (self._unblocked_channels(i) for i in operands) if c}
        if len(channels) != 1 or min(channels) % ALIGN:
            return False  # no blocked operand to take the layout from, or padded blocks
        at = self.nodes.index(node)
        mapping = {}
        for name in operands:
            if self._unblocked_channels(name):
                mapping[name] = self.producer[name].input[0]
                continue
            reorder = next((u for u in self.consumers[name] if u.domain == NCHWC and u.op_type == "ReorderInput"
                            and not _attr(u, "channels_last")), None)
            if reorder is None:
                from onnx import helper

                reorder = helper.make_node("ReorderInput", [name], [f"{name}/blocked"], name=f"{name}/reorder_in",
                                           domain=NCHWC, channels_last=0)
                self.nodes.insert(at, reorder)
                at += 1
            mapping[name] = reorder.output[0]
        node.input[:] = [mapping.get(i, i) for i in node.input]
        plain = node.output[0]
        node.output[0] = f"{plain}/blocked"
        from onnx import helper

        self.nodes.insert(at + 1, helper.make_node("ReorderOutput", [node.output[0]], [plain],
                                                   name=f"{plain}/reorder_out", domain=NCHWC,
                                                   channels=min(channels), channels_last=0))
        return True

    def _single_use_conv(self, name: str) -> Any:
        conv = self.producer.get(name)
        if (conv is None or conv.domain != NCHWC or conv.op_type != "Conv" or len(self.consumers[name]) != 1
                or name in self.outputs or _attr(conv, "activation") is not None):
            return None
        return conv

    def _fuse_sum(self, node: Any) -> bool:
        if len(node.input) != 2 or not all(i in self.blocked for i in node.input):
            return False
        for k in (0, 1):
            conv = self._single_use_conv(node.input[k])
            if conv is not None and len(conv.input) < 4:
                conv.input[:] = [*conv.input, *[""] * (3 - len(conv.input)), node.input[1 - k]]
                conv.output[0] = node.output[0]
                # the conv moves to the Add's place, where the added operand exists too
                self.nodes.remove(conv)
                self.nodes[self.nodes.index(node)] = conv
                return True
        return False

    def _fuse_activation(self, node: Any) -> bool:
        from onnx import helper

        conv = self._single_use_conv(node.input[0]) if node.input[0] in self.blocked else None
        if conv is None:
            return False
        conv.attribute.append(helper.make_attribute("activation", node.op_type))
        if node.op_type == "LeakyRelu":
            alpha = _attr(node, "alpha")
            conv.attribute.append(helper.make_attribute("activation_params", [0.01 if alpha is None else alpha]))
        conv.output[0] = node.output[0]
        self.nodes.remove(node)
        return True

    def _only_user(self, name: str, op_type: str) -> Any:
        users = self.consumers[name]
        if len(users) != 1 or users[0].op_type != op_type or users[0].domain != "" or name in self.outputs:
            return None
        return users[0]

    def _block_interleave(self, node: Any) -> bool:
        """Reshape [N, s*C, 1, T] -> [N, s, C, T], Transpose to [N, C, T, s], Reshape to
        [N, C, 1, T*s] (phases.py) of a tensor that was blocked before a ReorderOutput:
        with C a multiple of the block width, the same interleave on the blocked
        memory ([N, s, C/b, T, b] -> [N, C/b, T, s, b]) is the blocked layout of the result."""
        from onnx import helper, numpy_helper

        block = self.context.block
        split = self.producer.get(node.input[0])
        if not block or split is None or split.op_type != "Reshape" or _attr(node, "perm") != [0, 2, 3, 1]:
            return False
        shape = self.context.shapes.get(split.input[1])
        channels = self._unblocked_channels(split.input[0])
        join = self._only_user(node.output[0], "Reshape")
        if (shape is None or len(shape) != 4 or shape[0] != 0 or shape[3] != -1 or not channels
                or channels != shape[1] * shape[2] or shape[2] % ALIGN or self._only_user(split.output[0], "Transpose")
                is not node or join is None or self.context.shapes.get(join.input[1]) != [0, shape[2], 1, -1]):
            return False
        phases, per_phase = shape[1], shape[2]
        blocked_shape = f"{split.name}/blocked_shape"
        self.context.graph.initializer.append(numpy_helper.from_array(
            np.array([0, phases, per_phase // block, -1, block], dtype=np.int64), blocked_shape))
        split.input[:] = [self.producer[split.input[0]].input[0], blocked_shape]
        node.attribute.remove(next(a for a in node.attribute if a.name == "perm"))
        node.attribute.append(helper.make_attribute("perm", [0, 2, 3, 1, 4]))
        plain = join.output[0]
        join.output[0] = f"{plain}/blocked"
        self.context.blocked.add(join.output[0])
        self.nodes.insert(self.nodes.index(join) + 1, helper.make_node(
            "ReorderOutput", [join.output[0]], [plain], name=f"{plain}/reorder_out", domain=NCHWC,
            channels=per_phase, channels_last=0))
        return True

    def _drop_dead_reorders(self, done: collections.Counter[str]) -> bool:
        dead = [n for n in self.nodes if n.domain == NCHWC and n.op_type in ("ReorderInput", "ReorderOutput")
                and not self.consumers[n.output[0]] and n.output[0] not in self.outputs]
        for n in dead:
            self.nodes.remove(n)
        done["unused reorders dropped"] += len(dead)
        return bool(dead)


def topological(nodes: list[Any], sources: Iterable[str]) -> list[Any]:
    """``nodes`` in an order where every input is made before it is used (stable:
    among ready nodes, the earliest in ``nodes`` first)."""
    available = set(sources) | {""}
    index = {o: k for k, n in enumerate(nodes) for o in n.output}
    waiting: list[int] = []
    users: dict[int, list[int]] = collections.defaultdict(list)
    for k, n in enumerate(nodes):
        needs = {index[i] for i in n.input if i not in available and i in index}
        waiting.append(len(needs))
        for j in needs:
            users[j].append(k)
    ready = [k for k, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    ordered = []
    while ready:
        k = heapq.heappop(ready)
        ordered.append(nodes[k])
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(ordered) != len(nodes):
        raise ValueError("the graph has a cycle")
    return ordered
