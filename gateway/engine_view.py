"""What GET /v1/engines tells a caller who is not an admin.

An engine's ``detail``, ``hint`` and the default engine's ``default_reason`` say
how to fix it on the server: file paths under the data dir, shell commands,
package names. They are for whoever runs the gateway; a key holder, a PIN guest
or an anonymous client gets the engine's state without them, and an ASR model
configured as a local path is named by its last component.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

ADMIN_ONLY_FIELDS = ("detail", "hint", "default_reason")


def is_local_path(name: str) -> bool:
    """A filesystem path rather than a model name (``tiny.en``) or a hub id (``org/model``)."""
    return name.startswith(("/", "~", ".")) or "\\" in name or (len(name) > 1 and name[1] == ":")


def public_model_name(name: str) -> str:
    """A model's name as a client is told it: a local path by its last component."""
    if not is_local_path(name):
        return name
    return PurePath(name.replace("\\", "/")).name or "local model"


def without_server_details(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` (one engine of GET /v1/engines) as a non-admin sees it."""
    out = {k: v for k, v in entry.items() if k not in ADMIN_ONLY_FIELDS}
    model = out.get("model")
    if isinstance(model, str):
        out["model"] = public_model_name(model)
    return out
