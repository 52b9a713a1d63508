"""Key/value stores with one row per stream.

``RowKvCache`` (flow LM): preallocated ``[layers, 2, rows, capacity, Hkv, D]`` plus a
length per row, so streams of different lengths share one batched forward; keys past a
row's length are masked out. ``RingKvCache`` (Mimi's decoder transformer): a fixed
ring per row (the ``context`` window and room for one call's new steps), so the cost
per frame stays flat however long the utterance is.

Both operate on a leading block of rows ``[0, n)`` or on one row; rows are moved with
:meth:`copy_row` when the batch compacts.
"""

from __future__ import annotations

import torch


class RowKvCache:
    def __init__(self, layers: int, rows: int, capacity: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32) -> None:
        self.data = torch.zeros(layers, 2, rows, capacity, kv_heads, head_dim, dtype=dtype)
        self.lengths = torch.zeros(rows, dtype=torch.long)
        self._rows = slice(0, rows)
        self._layout_for: torch.Tensor | None = None
        self._layout_cache: tuple[torch.Tensor, int, torch.Tensor] | None = None

    @property
    def capacity(self) -> int:
        return self.data.shape[3]

    def ensure_capacity(self, needed: int) -> None:
        """Grow every row to hold ``needed`` positions (rare: re-allocates)."""
        if needed <= self.capacity:
            return
        size = max(needed, self.capacity * 3 // 2)
        grown = self.data.new_zeros(*self.data.shape[:3], size, *self.data.shape[4:])
        grown[:, :, :, : self.capacity] = self.data
        self.data = grown

    def select(self, rows: slice) -> RowKvCache:
        """Work on rows ``rows`` (a view: writes land in this cache)."""
        view = object.__new__(RowKvCache)
        view.data = self.data[:, :, rows]
        view.lengths = self.lengths[rows]
        view._rows = rows
        view._layout_for, view._layout_cache = None, None
        return view

    def load_row(self, row: int, keys_values: list[torch.Tensor], length: int) -> None:
        """Put a voice prefix (per layer [2, T, Hkv, D]) into ``row``."""
        self.ensure_capacity(length)
        for layer, kv in enumerate(keys_values):
            self.data[layer, :, row, :length] = kv[:, :length]
        self.lengths[row] = length

    def copy_row(self, src: int, dst: int) -> None:
        used = int(self.lengths[src])
        self.data[:, :, dst, :used] = self.data[:, :, src, :used]
        self.lengths[dst] = used

    def positions(self, steps: int) -> torch.Tensor:
        """Absolute positions [B, steps] of the next ``steps`` tokens of every row."""
        return self.lengths[:, None] + torch.arange(steps)

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor,
               pos_q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        rows, used, mask = self._layout(pos_q)
        cache = self.data[layer]
        cache[0][rows, pos_q] = k
        cache[1][rows, pos_q] = v
        keys = cache[0, :, :used].permute(0, 2, 1, 3)
        values = cache[1, :, :used].permute(0, 2, 1, 3)
        return keys, values, mask

    def _layout(self, pos_q: torch.Tensor) -> tuple[torch.Tensor, int, torch.Tensor]:
        """Row index, used length and mask for ``pos_q``: every layer of a forward gets the
        same ``pos_q`` object, so they are computed by the first layer only."""
        if self._layout_for is not pos_q:
            used = int(pos_q.max()) + 1
            mask = (torch.arange(used)[None, None, :] <= pos_q[:, :, None])[:, None]
            self._layout_cache = (torch.arange(pos_q.shape[0])[:, None], used, mask)
            self._layout_for = pos_q
        return self._layout_cache

    def advance(self, steps: int) -> None:
        self.lengths += steps


class RingKvCache:
    """Sliding attention window of ``context`` steps, one ring per row.

    The ring has ``spare`` slots beyond the window. A call that brings at most ``spare``
    new steps writes them first and attends over the ring in place: every key its
    queries need is still there (the newest step overwrites a key ``context + spare``
    steps old, out of every query's window), so nothing is copied. A longer call
    attends over a copy of the ring with the new steps appended, then writes them.
    """

    def __init__(self, layers: int, rows: int, context: int, heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, spare: int = 0) -> None:
        self.context = context
        slots = context + spare
        self.keys = torch.zeros(layers, rows, slots, heads, head_dim, dtype=dtype)
        self.values = torch.zeros(layers, rows, slots, heads, head_dim, dtype=dtype)
        self.slot_pos = torch.full((layers, rows, slots), -1, dtype=torch.long)
        self.steps = torch.zeros(rows, dtype=torch.long)
        self._layout_for: torch.Tensor | None = None
        self._layout_cache: tuple[torch.Tensor, ...] = ()

    @classmethod
    def over(cls, context: int, keys: torch.Tensor, values: torch.Tensor, slot_pos: torch.Tensor,
             steps: torch.Tensor) -> RingKvCache:
        """A ring on existing tensors (views of another ring's rows, or copies of them)."""
        ring = object.__new__(cls)
        ring.context, ring.keys, ring.values, ring.slot_pos, ring.steps = context, keys, values, slot_pos, steps
        ring._layout_for, ring._layout_cache = None, ()
        return ring

    @property
    def slots(self) -> int:
        return self.keys.shape[2]

    def select(self, rows: slice) -> RingKvCache:
        return RingKvCache.over(self.context, self.keys[:, rows], self.values[:, rows],
                                self.slot_pos[:, rows], self.steps[rows])

    def reset_row(self, row: int) -> None:
        self.slot_pos[:, row] = -1
        self.steps[row] = 0

    def copy_row(self, src: int, dst: int) -> None:
        self.keys[:, dst] = self.keys[:, src]
        self.values[:, dst] = self.values[:, src]
        self.slot_pos[:, dst] = self.slot_pos[:, src]
        self.steps[dst] = self.steps[src]

    def positions(self, steps: int) -> torch.Tensor:
        return self.steps[:, None] + torch.arange(steps)

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor,
               pos_q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        in_place = pos_q.shape[1] <= self.slots - self.context
        mask, rows, slots, new_pos = self._layout(layer, pos_q, in_place)
        if in_place:
            self._write(layer, rows, slots, new_pos, k, v)
            return self.keys[layer].transpose(1, 2), self.values[layer].transpose(1, 2), mask
        # the earliest new query still needs keys the newest ones will replace: attend over
        # [ring as it was, new steps], and only then overwrite the ring
        keys = torch.cat([self.keys[layer], k], dim=1)
        values = torch.cat([self.values[layer], v], dim=1)
        self._write(layer, rows, slots, new_pos, k, v)
        return keys.transpose(1, 2), values.transpose(1, 2), mask

    def _write(self, layer: int, rows: torch.Tensor, slots: torch.Tensor, new_pos: torch.Tensor,
               k: torch.Tensor, v: torch.Tensor) -> None:
        keep = new_pos.shape[1]
        self.keys[layer][rows, slots] = k[:, -keep:]
        self.values[layer][rows, slots] = v[:, -keep:]
        self.slot_pos[layer][rows, slots] = new_pos

    def _layout(self, layer: int, pos_q: torch.Tensor, in_place: bool) -> tuple[torch.Tensor, ...]:
        """Mask and ring slots for ``pos_q``. Every layer holds the same positions and gets
        the same ``pos_q`` object in one forward, so the first layer computes them."""
        if self._layout_for is not pos_q:
            new_pos = pos_q[:, -min(pos_q.shape[1], self.slots):]
            rows = torch.arange(pos_q.shape[0])[:, None]
            slots = new_pos % self.slots
            if in_place:
                pos_k = self.slot_pos[layer].clone()
                pos_k[rows, slots] = new_pos
            else:
                pos_k = torch.cat([self.slot_pos[layer], pos_q], dim=1)
            delta = pos_q[:, :, None] - pos_k[:, None, :]
            mask = (pos_k[:, None, :] >= 0) & (delta >= 0) & (delta < self.context)
            # as the additive mask attention makes of a boolean one, made once, not in every layer
            additive = torch.zeros(mask.shape, dtype=self.keys.dtype).masked_fill_(~mask, float("-inf"))
            self._layout_cache = (additive[:, None], rows, slots, new_pos)
            self._layout_for = pos_q
        return self._layout_cache

    def advance(self, steps: int) -> None:
        self.steps += steps
