"""A server message's wire form, derived from its dataclass fields.

``WireMessage.to_dict`` puts ``type`` first, then every field in declaration
order. A field's ``metadata`` changes how it goes out:

- ``internal()``: kept for the gateway (sample positions, the close code), never sent;
- ``rounded(n)``: a float rounded to ``n`` digits (None stays None);
- ``OMIT_NONE``: left out while it is None;
- ``INLINE``: a mapping whose keys go out at the top level.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

WIRE = "wire"  # the metadata key this module reads
OMIT_NONE: Mapping[str, Any] = {WIRE: "omit_none"}
INLINE: Mapping[str, Any] = {WIRE: "inline"}


def internal(default: Any, *, compare: bool = True) -> Any:
    """A field the gateway keeps for itself (``compare``: whether equality looks at it)."""
    return dataclasses.field(default=default, compare=compare, metadata={WIRE: "internal"})


def rounded(digits: int) -> Mapping[str, Any]:
    return {WIRE: ("round", digits)}


class WireMessage:
    """Mixed into a frozen dataclass with a ``type`` tag field."""

    def to_dict(self) -> dict[str, Any]:
        tag, out = None, {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            rule = f.metadata.get(WIRE)
            value = getattr(self, f.name)
            if f.name == "type":
                tag = value
            elif rule == "internal" or (rule == "omit_none" and value is None):
                continue
            elif rule == "inline":
                out.update(value)
            elif isinstance(rule, tuple) and value is not None:
                out[f.name] = round(value, rule[1])
            else:
                out[f.name] = value
        return {"type": tag, **out}
