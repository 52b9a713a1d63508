"""The environment the gateway's child processes start with (the ASR sidecar,
the upload decoders): this process's, less what a child must not see.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gateway.config import ENV_PREFIX

# Environment variables a child process never inherits: every VOXGATE_* (a child is
# configured by its arguments) and anything named like a credential.
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for the gateway's child processes (the ASR sidecar): this
    process's (or ``environ``), less ``VOXGATE_*`` and credential-like variables."""
    env = os.environ if environ is None else environ
    return {name: value for name, value in env.items()
            if not name.upper().startswith(ENV_PREFIX) and not any(p in name.upper() for p in SECRET_NAME_PARTS)}
